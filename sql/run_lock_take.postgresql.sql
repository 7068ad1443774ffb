-- The run lock (G5's second fence): a session advisory lock, held for the whole run on a
-- connection of its own and released by the server if the session dies.
SELECT pg_try_advisory_lock(:id)
