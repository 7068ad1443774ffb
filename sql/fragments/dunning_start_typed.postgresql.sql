-- An open invoice row (o) without a step whose start — sent_at or due_date by :start, a
-- timestamptz, timestamp or date column — may be due tonight: the typed twin of
-- dunning_candidate's text comparison, which an index on the column serves. Read with the
-- session's TimeZone set to the business zone, a date bound is that day's first instant
-- there (a midnight skipped by DST is the first instant of the day), so `< :start_by` is
-- exactly "its business date is before :start_by", as the text of the value says it. What
-- that text does not show as an ISO date comes along as it did: NULL; -infinity and BC
-- dates (below the bound); infinity and years after 9999 in the business zone (the bound
-- is exact: a start in 9999 there is read by neither comparison).
(CAST(:start AS text) = 'sent'
 AND (o.sent_at < CAST(:start_by AS date) OR o.sent_at IS NULL
      OR o.sent_at >= CAST('10000-01-01' AS date)))
OR (CAST(:start AS text) = 'due'
    AND (o.due_date < CAST(:start_by AS date) OR o.due_date IS NULL
         OR o.due_date >= CAST('10000-01-01' AS date)))
