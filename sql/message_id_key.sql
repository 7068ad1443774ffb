-- The database's secret that makes each Message-ID unguessable (migration 0007); read once a night.
SELECT value FROM dueflow_secrets WHERE name = 'message_id'
