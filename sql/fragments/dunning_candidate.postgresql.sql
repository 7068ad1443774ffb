-- An open invoice row (o: id, start_text, textual) whose next dunning step may be due
-- tonight, or that must be read to be quarantined: its last step in the ledger got out long
-- enough ago (ranks 1 and 2), or it has no step yet and its start — sent_at or due_date as
-- text — is before :start_by (the day after the last start that is due), missing, or not
-- an ISO date and time. The night reads this with the session's TimeZone set to the
-- business time zone, so a timestamp's text starts with its business date; a text column
-- holds its own offsets, up to two days away: :start_by_text is two days later.
-- tasks.core.dunning_rule.dunning_may_be_due is the exact rule, over the rows this lets through
-- (tested to pick the same invoices).
o.id IN (SELECT subject_id FROM dated)
OR (NOT EXISTS (SELECT 1 FROM steps s WHERE s.subject_id = o.id)
    AND (o.start_text IS NULL
         OR o.start_text !~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}([ T][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)?)?( ?([+-][0-9]{2}(:?[0-9]{2})?|Z))?$'
         OR o.start_text < CASE WHEN o.textual THEN CAST(:start_by_text AS text)
                                ELSE CAST(:start_by AS text) END))
