-- The end of every dunning candidates statement (sql/dunning_candidates.*,
-- dunning_candidates_typed), after its `picked` CTE: what was paid and credited on the picked
-- invoices up to :as_of (payments_of), and the rows as the night reads them — each picked
-- invoice with its payments, and the picked rows without an id (to be quarantined).
 payments_wanted AS MATERIALIZED (
    SELECT id AS invoice_id FROM picked WHERE id IS NOT NULL
), paid AS MATERIALIZED /*include payments_of*/
SELECT i.id, i.client_id, i.number, i.amount, i.amount_minor, i.currency, i.status, i.sent_at, i.due_date, i.paid_at, i.dunning_hold_until, i.pdf_path, i.amount_open, i.amount_paid,
       r.paid_e4, r.credited_e4, r.paid_last, r.currency_low AS paid_currency_low,
       r.currency_high AS paid_currency_high, r.unreadable AS payments_unreadable,
       /*include payment_state*/ AS payment_state
FROM invoices i LEFT JOIN paid r ON r.invoice_id = i.id
WHERE i.id IN (SELECT id FROM picked)
UNION ALL
SELECT id, client_id, number, amount, amount_minor, currency, status, sent_at, due_date, paid_at, dunning_hold_until, pdf_path, amount_open, amount_paid,
       NULL AS paid_e4, NULL AS credited_e4, NULL AS paid_last, NULL AS paid_currency_low,
       NULL AS paid_currency_high, NULL AS payments_unreadable, NULL AS payment_state
FROM picked
WHERE id IS NULL
