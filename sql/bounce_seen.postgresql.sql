-- Which of these reports dueflow has already recorded (matched or kept aside).
SELECT report_id FROM dueflow_bounces WHERE report_id = ANY (CAST(:ids AS text[]))
UNION ALL
SELECT report_id FROM dueflow_bounce_kept WHERE report_id = ANY (CAST(:ids AS text[]))
