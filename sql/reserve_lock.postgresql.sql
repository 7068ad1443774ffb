-- Serialises the reservations of one job on one ledger (milliseconds), so that the
-- ordering checks of reserve_*.postgresql.sql see every reservation committed before them.
SELECT pg_advisory_xact_lock(hashtext(:lock), hashtext(current_schema()))
