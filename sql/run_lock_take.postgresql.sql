-- The run lock (G5's second fence): a session advisory lock, held for the whole run on a
-- connection of its own and released by the server if the session dies. Keyed by the
-- ledger's schema as well: two dueflow installations in one database (staging and
-- production schemas) do not lock each other out.
SELECT pg_try_advisory_lock(:id, hashtext(current_schema()))
