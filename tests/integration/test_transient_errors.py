"""Which database errors are worth another try (db.transient), read from the drivers' error
codes — SQLite's busy lock, a PostgreSQL session the server ended — never from their
messages; a refusal (a statement timeout, a syntax error) is not one."""

from __future__ import annotations

import sqlite3

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from dueflow.tasks.adapters import db, db_errors


def raised(run) -> DBAPIError:
    with pytest.raises(DBAPIError) as caught:
        run()
    return caught.value


def test_sqlites_busy_write_lock_is_transient(tmp_path):
    path = tmp_path / "busy.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x int)")
    holder.execute("BEGIN IMMEDIATE")
    engine = db.engine_for(f"sqlite:///{path}", lock_timeout=0.05)
    try:
        def write() -> None:
            with db.writing(engine) as conn:
                conn.execute(text("INSERT INTO t VALUES (1)"))

        busy = raised(write)
        assert db_errors.transient(busy)
        holder.execute("ROLLBACK")
        with engine.connect() as conn:
            missing = raised(lambda: conn.execute(text("SELECT * FROM no_such_table")))
        assert not db_errors.transient(missing)
    finally:
        holder.close()
        engine.dispose()


@pytest.mark.pg
def test_a_postgresql_session_the_server_ended_is_transient_a_refusal_is_not(pg_url):
    engine = db.engine_for(pg_url)
    admin = db.engine_for(pg_url)
    try:
        with engine.connect() as conn:
            pid = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
            with admin.connect() as other:
                other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
            ended = raised(lambda: conn.execute(text("SELECT 1")))
        assert db_errors.transient(ended)
        with engine.connect() as conn:
            conn.execute(text("SET statement_timeout = 10"))
            timed_out = raised(lambda: conn.execute(text("SELECT pg_sleep(1)")))
        assert db_errors.sqlstate(timed_out) == db_errors.CANCELED and not db_errors.transient(timed_out)
        with engine.connect() as conn:
            wrong = raised(lambda: conn.execute(text("SELEC 1")))
        assert not db_errors.transient(wrong)
    finally:
        engine.dispose()
        admin.dispose()
