-- The clients of the invoices in invoices_by_id.
SELECT id, name, email, locale, notes, dunning_paused, dunning_paused_until, cc_email, dunning_profile
FROM clients
WHERE id = ANY(CAST(:ids AS text[]))
