-- SQLite flavour of contracts_by_id.postgresql.sql.
SELECT id, vendor, title, amount, amount_minor, currency, date(renewal_date) AS renewal_date, notify_email, status
FROM contracts
WHERE id IN (SELECT value FROM json_each(:ids))
