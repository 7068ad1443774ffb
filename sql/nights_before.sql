-- The figures of the nights before one, newest first (each night's latest run first): what
-- a night compares itself with.
SELECT as_of, figures, choice, up_to, approved_by, approved_at
FROM dueflow_nights
WHERE as_of < :before
ORDER BY as_of DESC, recorded_at DESC
LIMIT :limit
