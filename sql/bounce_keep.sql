-- A message of the bounce mailbox that matches no ledger row or cannot be read: kept aside
-- with its reason and counted, never dropped; once per message.
INSERT INTO dueflow_bounce_kept (report_id, reason, detail, message_id, key, seen_at, source)
VALUES (:report_id, :reason, :detail, :message_id, :key, :seen_at, :source)
ON CONFLICT (report_id) DO NOTHING
