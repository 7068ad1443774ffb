-- The invoices of reserved dunning steps that must be rendered again.
SELECT id, client_id, number, amount, amount_minor, currency, status, sent_at, due_date, paid_at, dunning_hold_until, pdf_path
FROM invoices
WHERE id = ANY(CAST(:ids AS text[]))
