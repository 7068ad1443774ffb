"""Alembic's environment for dueflow's own tables: run on the connection dueflow gives it
(`tasks.adapters.db.init_db`), inside dueflow's transaction, so that a migration either
happens whole or not at all (both PostgreSQL and SQLite have transactional DDL)."""

from alembic import context

from dueflow.sql.migrations import VERSION_TABLE

config = context.config
connection = config.attributes["connection"]
context.configure(
    connection=connection,
    version_table=VERSION_TABLE,
    version_table_schema=config.attributes.get("ledger_schema"),
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
