-- SQLite flavour: dates are text, so a malformed date (date() gives NULL) comes along too,
-- to be quarantined.
status IS NOT 'cancelled'
AND (date(renewal_date) IS NULL OR date(renewal_date) BETWEEN :window_start AND :window_end)
