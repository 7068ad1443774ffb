-- SQLite has no arrays: a reservation's candidates go through this temporary table, in
-- the reservation's own BEGIN IMMEDIATE transaction.
CREATE TEMP TABLE IF NOT EXISTS candidate (key text PRIMARY KEY, subject_id text, subject_form text,
                                           cycle text,
                                           step text, step_rank integer, recipient text,
                                           previous_by text, payment_state text)
