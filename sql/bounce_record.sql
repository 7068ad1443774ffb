-- One delivery status notification matched to its ledger row (tasks/core/bounces.py). The
-- report's identity is its primary key: reading the same mailbox twice adds nothing.
INSERT INTO dueflow_bounces (report_id, key, message_id, kind, status_code, diagnostic, recipient,
                             seen_at, source)
VALUES (:report_id, :key, :message_id, :kind, :status_code, :diagnostic, :recipient, :seen_at, :source)
ON CONFLICT (report_id) DO NOTHING
