-- The figures of the runs of the nights before one, newest night first: what a night
-- compares itself with (tasks/core/guard.py adds up each night's runs).
SELECT as_of, figures, choice, up_to, approved_by, approved_at
FROM dueflow_nights
WHERE as_of < :before
ORDER BY as_of DESC, recorded_at DESC
LIMIT :limit
