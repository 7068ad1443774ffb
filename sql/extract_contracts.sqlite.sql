-- SQLite flavour of extract_contracts.postgresql.sql. SQLite stores dates as text,
-- so a malformed date (date() gives NULL) is extracted too, to be quarantined.
SELECT id, vendor, title, amount, currency, date(renewal_date) AS renewal_date, notify_email, status
FROM contracts
WHERE status IS NOT 'cancelled'
  AND (date(renewal_date) IS NULL OR date(renewal_date) BETWEEN :window_start AND :window_end)
