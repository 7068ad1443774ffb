-- SQLite flavour of invoices_by_id.postgresql.sql.
-- With what was paid and credited on each up to :as_of (sql/fragments/payments_of).
WITH picked AS (
    SELECT id, client_id, number, amount, amount_minor, currency, status, sent_at, due_date, paid_at, dunning_hold_until, pdf_path, amount_open, amount_paid
    FROM invoices
    WHERE id IN (SELECT value FROM json_each(:ids))
), payments_wanted AS (
    SELECT id AS invoice_id FROM picked WHERE id IS NOT NULL
), paid AS /*include payments_of*/
SELECT i.id, i.client_id, i.number, i.amount, i.amount_minor, i.currency, i.status, i.sent_at, i.due_date, i.paid_at, i.dunning_hold_until, i.pdf_path, i.amount_open, i.amount_paid,
       r.paid_e4, r.credited_e4, r.paid_last, r.currency_low AS paid_currency_low,
       r.currency_high AS paid_currency_high, r.unreadable AS payments_unreadable,
       /*include payment_state*/ AS payment_state
FROM picked i LEFT JOIN paid r ON r.invoice_id = i.id
