-- Releases the run lock taken by run_lock_take.
SELECT pg_advisory_unlock(:id, hashtext(current_schema()))
