-- SQLite flavour of extract_clients.postgresql.sql: dunning_paused as SQLite writes it out
-- as text, exactly what sql/fragments/invoice_open.sqlite.sql compares (0, 1, 0.0, 'true' …).
SELECT id, name, email, locale, notes, CAST(dunning_paused AS TEXT) AS dunning_paused
FROM clients
WHERE id IN (
    SELECT client_id FROM invoices
    WHERE paid_at IS NULL AND (status IS NULL OR status NOT IN ('draft', 'paid', 'void')))
