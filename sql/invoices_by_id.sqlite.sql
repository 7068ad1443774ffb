-- SQLite flavour of invoices_by_id.postgresql.sql.
SELECT id, client_id, number, amount, amount_minor, currency, status, sent_at, due_date, paid_at, dunning_hold_until, pdf_path
FROM invoices
WHERE id IN (SELECT value FROM json_each(:ids))
