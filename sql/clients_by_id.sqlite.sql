-- SQLite flavour of clients_by_id.postgresql.sql.
SELECT id, name, email, locale, notes, dunning_paused, cc_email
FROM clients
WHERE id IN (SELECT value FROM json_each(:ids))
