"""dueflow's own tables (the ledger, the quarantine), versioned with Alembic.

`dueflow init-db` creates a new ledger or upgrades an existing one in place, with its rows
(`tasks.adapters.db.init_db`); `dueflow check` says when the ledger is behind. The version
is kept in `dueflow_schema_version` (not Alembic's default `alembic_version`, which the
company's own application may use in the same schema).

A new migration: `alembic -c sql/migrations/alembic.ini revision -m "what changes"`, then
write its `upgrade()` for both PostgreSQL and SQLite (SQLite changes a CHECK or a column
type by rebuilding the table: `op.batch_alter_table`). tests/integration/test_migrations.py
upgrades a ledger made by every earlier release.
"""

VERSION_TABLE = "dueflow_schema_version"

# The newest revision under versions/, also here so that a night can see its ledger is
# current with one SELECT, without loading Alembic (160 ms a process); a new migration
# moves it (tests/unit/test_migration_head.py checks it is Alembic's head).
HEAD = "0012"
