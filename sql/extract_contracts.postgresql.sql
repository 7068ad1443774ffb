-- Renewal candidates: only rows that may be due tonight, plus every other row that shares
-- an id with one of them, so that a duplicated id is seen, and quarantined, whatever the
-- other copy says (G6). Two branches, not `may_be_due OR id IN (…)`: an OR
-- with a subquery cannot use the renewal_date index and read every row (docs/performance.md);
-- the rows sharing an id with a candidate include the candidates, rows without an id come
-- by the second branch. A row the ledger already settles for tonight (settled_lead: its
-- due lead, sql/fragments/renewal_settled) comes with its key's parts only: it is counted
-- as already handled without being read and decided again (docs/performance.md).
WITH picked AS MATERIALIZED (
    SELECT c.id, c.vendor, c.title, c.amount, c.amount_minor, c.currency, c.renewal_date, c.notify_email, c.status,
           (SELECT min(CAST(l AS integer)) FROM json_array_elements_text(CAST(:leads AS json)) AS l
            WHERE c.renewal_date >= CAST(:as_of AS date)
              AND CAST(l AS integer) >= c.renewal_date - CAST(:as_of AS date)) AS lead
    FROM contracts c
    WHERE c.id IN (SELECT id FROM contracts WHERE /*include contract_may_be_due*/)
    UNION ALL
    SELECT c.id, c.vendor, c.title, c.amount, c.amount_minor, c.currency, c.renewal_date, c.notify_email, c.status,
           (SELECT min(CAST(l AS integer)) FROM json_array_elements_text(CAST(:leads AS json)) AS l
            WHERE c.renewal_date >= CAST(:as_of AS date)
              AND CAST(l AS integer) >= c.renewal_date - CAST(:as_of AS date)) AS lead
    FROM contracts c
    WHERE c.id IS NULL AND /*include contract_may_be_due*/
), judged AS MATERIALIZED (
    SELECT p.*, CASE WHEN /*include renewal_settled*/ THEN p.lead END AS settled_lead
    FROM picked p
)
SELECT id,
       CASE WHEN settled_lead IS NULL THEN vendor END AS vendor,
       CASE WHEN settled_lead IS NULL THEN title END AS title,
       CASE WHEN settled_lead IS NULL THEN amount END AS amount,
       CASE WHEN settled_lead IS NULL THEN amount_minor END AS amount_minor,
       CASE WHEN settled_lead IS NULL THEN currency END AS currency,
       renewal_date, notify_email, status, settled_lead
FROM judged
