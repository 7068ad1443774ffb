-- SQLite flavour of extract_contracts.postgresql.sql (dates read through date()).
SELECT id, vendor, title, amount, currency, date(renewal_date) AS renewal_date, notify_email, status
FROM contracts
WHERE /*include contract_may_be_due*/
   OR id IN (SELECT id FROM contracts WHERE /*include contract_may_be_due*/)
