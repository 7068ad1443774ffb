-- Renewal candidates: only rows that can be due tonight (renewal date inside the
-- widest lead window) plus rows whose date is missing, so they get quarantined.
SELECT id, vendor, title, amount, currency, renewal_date, notify_email, status
FROM contracts
WHERE status IS DISTINCT FROM 'cancelled'
  AND (renewal_date IS NULL OR renewal_date BETWEEN CAST(:window_start AS date) AND CAST(:window_end AS date))
