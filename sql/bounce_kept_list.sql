-- Messages of the bounce mailbox kept aside, most recent first (`dueflow bounces --kept`).
SELECT reason, detail, message_id, key, seen_at, source, recorded_at
FROM dueflow_bounce_kept
ORDER BY recorded_at DESC, report_id
