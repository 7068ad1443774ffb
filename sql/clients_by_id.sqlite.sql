-- SQLite flavour of clients_by_id.postgresql.sql.
SELECT id, name, email, locale, notes, dunning_paused
FROM clients
WHERE id IN (SELECT value FROM json_each(:ids))
