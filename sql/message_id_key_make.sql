-- The database's Message-ID secret when it has none (init-db, after the migrations): a
-- ledger whose secrets table was emptied gets a new one; an existing one is never replaced.
INSERT INTO dueflow_secrets (name, value) VALUES ('message_id', :value) ON CONFLICT (name) DO NOTHING
