-- The contracts of reserved alerts that must be rendered again (their message was never
-- stored), as extract_contracts reads them.
SELECT id, vendor, title, amount, amount_minor, currency, renewal_date, notify_email, status
FROM contracts
WHERE id = ANY(CAST(:ids AS text[]))
