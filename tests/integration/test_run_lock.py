"""The run lock (G5's second fence) on real SQLite and PostgreSQL: a second holder is
refused while the first holds it, admitted once it lets go; on PostgreSQL two ledgers in
two schemas of one database do not lock each other out."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine

from dueflow.tasks.adapters import db
from dueflow.tasks.adapters.lock import run_lock
from tests.conftest import pg_schema


def _second_engine(url: str):
    # Another connection pool, as another process would have: the lock is per session.
    return create_engine(db.engine_for(url).url)


def test_one_holder_at_a_time_and_free_again_after(db_url: str) -> None:
    first, second = db.engine_for(db_url), _second_engine(db_url)
    try:
        with run_lock(first) as held:
            assert held
            with run_lock(second) as also:
                assert not also
        with run_lock(second) as after:
            assert after
    finally:
        second.dispose()


@pytest.mark.pg
def test_two_schemas_in_one_database_hold_their_own_locks(pg_url: str) -> None:
    with (pg_schema() as other_url, run_lock(db.engine_for(pg_url)) as here,
          run_lock(db.engine_for(other_url)) as there):
        assert here and there
