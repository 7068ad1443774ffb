"""The second fence of G5: one active run per ledger (database, and schema on PostgreSQL).

PostgreSQL: a session-level advisory lock on a connection held for the whole run.
SQLite: an exclusive `flock` on a file beside the database. Both are released by
the operating system or the server when the process dies, so a crashed run never
leaves a stale lock behind. G1 does not depend on this lock: the ledger's key is
the guard; the lock only keeps a second run from doing (harmless) work.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, text
from sqlalchemy.exc import SQLAlchemyError

from dueflow.sql import statement

RUN_LOCK_ID = 0x6475_6566  # 'duef': the advisory lock key of a dueflow run (with the schema)


@contextmanager
def run_lock(engine: Engine, warnings: list[str] | None = None) -> Iterator[bool]:
    """Yield True while this process holds the run lock, False if another run holds it.
    Losing the database connection while holding it is not an error of the run: the
    server released the lock with the session; a warning is appended to `warnings`."""
    if engine.dialect.name == "postgresql":
        conn = engine.connect()
        acquired = bool(conn.execute(text(statement("run_lock_take", "postgresql")),
                                     {"id": RUN_LOCK_ID}).scalar())
        conn.commit()
        try:
            yield acquired
        finally:
            try:
                if acquired:
                    conn.execute(text(statement("run_lock_release", "postgresql")), {"id": RUN_LOCK_ID})
                    conn.commit()
                conn.close()
            except SQLAlchemyError as exc:
                if warnings is not None:
                    warnings.append("the run lock's database connection was lost before the run"
                                    f" released it (the server released it): {str(exc).splitlines()[0]}")
                with contextlib.suppress(SQLAlchemyError):
                    conn.invalidate()
        return
    database = engine.url.database
    if not database or database == ":memory:":
        yield True  # a private in-memory database cannot be shared by two runs
        return
    with open(f"{database}.run-lock", "a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
