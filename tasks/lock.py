"""The second fence of G5: one active run per database.

PostgreSQL: a session-level advisory lock on a connection held for the whole run.
SQLite: an exclusive `flock` on a file beside the database. Both are released by
the operating system or the server when the process dies, so a crashed run never
leaves a stale lock behind. G1 does not depend on this lock: the ledger's key is
the guard; the lock only keeps a second run from doing (harmless) work.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, text

RUN_LOCK_ID = 0x6475_6566  # 'duef': the advisory lock key of a dueflow run


def run_lock_enabled() -> bool:
    return os.environ.get("DUEFLOW_RUN_LOCK", "on").strip().lower() not in ("off", "0", "false", "no")


@contextmanager
def run_lock(engine: Engine) -> Iterator[bool]:
    """Yield True while this process holds the run lock, False if another run holds it."""
    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            acquired = bool(conn.execute(text("SELECT pg_try_advisory_lock(:id)"),
                                         {"id": RUN_LOCK_ID}).scalar())
            conn.commit()
            try:
                yield acquired
            finally:
                if acquired:
                    conn.execute(text("SELECT pg_advisory_unlock(:id)"), {"id": RUN_LOCK_ID})
                    conn.commit()
        return
    database = engine.url.database
    if not database or database == ":memory:":
        yield True  # a private in-memory database cannot be shared by two runs
        return
    with open(f"{database}.run-lock", "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
