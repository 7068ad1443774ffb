-- The clients of the invoices in invoices_by_id.
SELECT id, name, email, locale, notes, dunning_paused, cc_email
FROM clients
WHERE id = ANY(CAST(:ids AS text[]))
