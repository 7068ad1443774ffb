-- SQLite flavour of extract_contracts.postgresql.sql (dates read through date(); the
-- leads as a JSON array through json_each); the same two branches. The renewal date goes
-- out as the row holds it: one written with an offset is dated in the business zone by the
-- rules (date() would read it at UTC), and only a plain date takes the settled shortcut.
WITH picked AS MATERIALIZED (
    SELECT c.id, c.vendor, c.title, c.amount, c.amount_minor, c.currency, c.renewal_date,
           c.notify_email, c.status,
           (SELECT min(CAST(l.value AS integer)) FROM json_each(:leads) AS l
            WHERE date(c.renewal_date) >= :as_of
              AND CAST(l.value AS integer) >= julianday(date(c.renewal_date)) - julianday(:as_of)) AS lead
    FROM contracts c
    WHERE c.id IN (SELECT id FROM contracts WHERE /*include contract_may_be_due*/)
    UNION ALL
    SELECT c.id, c.vendor, c.title, c.amount, c.amount_minor, c.currency, c.renewal_date,
           c.notify_email, c.status,
           (SELECT min(CAST(l.value AS integer)) FROM json_each(:leads) AS l
            WHERE date(c.renewal_date) >= :as_of
              AND CAST(l.value AS integer) >= julianday(date(c.renewal_date)) - julianday(:as_of)) AS lead
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
