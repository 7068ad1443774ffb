-- SQLite flavour of dunning_candidate.postgresql.sql: a start that date() cannot read, or
-- reads as another day (2027-02-30 is read as March 2nd), comes along to be quarantined;
-- dates are text with their own offsets: :start_by_text, two days later, is the bound.
o.id IN (SELECT subject_id FROM dated)
OR (NOT EXISTS (SELECT 1 FROM steps s WHERE s.subject_id = o.id)
    AND (o.start_text IS NULL
         OR date(o.start_text) IS NULL
         OR date(o.start_text) <> substr(o.start_text, 1, 10)
         OR o.start_text < :start_by_text))
