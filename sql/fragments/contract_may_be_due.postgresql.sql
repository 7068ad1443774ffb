-- A contract row that may be due tonight: not cancelled, renewal date inside the widest
-- lead window, or missing (to be quarantined). Unqualified: it reads the nearest FROM.
status IS DISTINCT FROM 'cancelled'
AND (renewal_date IS NULL OR renewal_date BETWEEN CAST(:window_start AS date) AND CAST(:window_end AS date))
