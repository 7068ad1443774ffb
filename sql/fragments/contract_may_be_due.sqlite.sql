-- SQLite flavour: dates are text, so a malformed date (date() gives NULL, or reads it as
-- another day: 2027-02-30 as March 2nd) comes along too, to be quarantined. date() reads a
-- value with an offset at UTC, a day off the business zone's date at most: the window is a
-- day wider each side, and the rules decide exactly (tasks.core.validate.business_dates).
status IS NOT 'cancelled'
AND (date(renewal_date) IS NULL OR date(renewal_date) <> substr(renewal_date, 1, 10)
     OR date(renewal_date) BETWEEN date(:window_start, '-1 day') AND date(:window_end, '+1 day'))
