-- The clients of the invoices extracted by extract_invoices.sql.
SELECT id, name, email, locale, notes, dunning_paused, dunning_paused_until, cc_email, dunning_profile
FROM clients
WHERE id IN (
    SELECT client_id FROM invoices
    WHERE paid_at IS NULL AND (status IS NULL OR status NOT IN ('draft', 'paid', 'void')))
