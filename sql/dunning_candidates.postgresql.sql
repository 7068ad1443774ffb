-- The invoices a night decides dunning for: open ones whose next step may be due tonight
-- (sql/fragments/dunning_candidate), plus every other row that shares an id with one of
-- them, so that a duplicated id is seen, and quarantined, whatever the other copy says
-- (G6); candidates without an id come by the second branch. Open invoices sent days ago
-- and not due for days are not read, nor their clients or history (docs/performance.md).
-- steps: each invoice's last step in the ledger; dated: those whose wait is over; paid:
-- what was paid and credited on the picked invoices up to :as_of (payments_of).
-- :start is 'sent', 'due', or 'any' when clients' dunning profiles count from either: then
-- every open invoice without a step comes along (its start text NULL), the rule decides.
WITH /*insert dunning_waits*/, picked AS MATERIALIZED (
    SELECT o.* FROM (
        SELECT id, client_id, number, amount, amount_minor, currency, status, sent_at, due_date, paid_at, dunning_hold_until, pdf_path, amount_open, amount_paid,
               CASE CAST(:start AS text) WHEN 'sent' THEN CAST(sent_at AS text)
                                         WHEN 'due' THEN CAST(due_date AS text) END AS start_text,
               CAST(:start AS text) = 'sent'
                 AND CAST(pg_typeof(sent_at) AS text) IN ('text', 'character varying', 'character') AS textual
        FROM invoices
        WHERE /*include invoice_may_be_dunned*/
          -- held tonight (dunning_hold_until after it): not dunned, nothing to quarantine
          AND (dunning_hold_until IS NULL OR dunning_hold_until <= CAST(:hold_as_of AS date))
    ) o
    WHERE /*include dunning_candidate*/
),
/*insert dunning_candidate_rows*/
