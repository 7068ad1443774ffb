-- SQLite flavour of clients_by_id.postgresql.sql.
SELECT id, name, email, locale, notes, dunning_paused, dunning_paused_until, cc_email, dunning_profile
FROM clients
WHERE id IN (SELECT value FROM json_each(:ids))
