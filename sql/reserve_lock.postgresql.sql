-- Serialises the reservations of one job (milliseconds), so that the ordering checks of
-- reserve_*.postgresql.sql see every reservation committed before them.
SELECT pg_advisory_xact_lock(hashtext(:lock))
