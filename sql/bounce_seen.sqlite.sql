-- Which of these reports dueflow has already recorded (matched or kept aside).
SELECT report_id FROM dueflow_bounces WHERE report_id IN (SELECT value FROM json_each(:ids))
UNION ALL
SELECT report_id FROM dueflow_bounce_kept WHERE report_id IN (SELECT value FROM json_each(:ids))
