"""One engine per URL and process, however many threads ask for it first at once: the
delivery threads of a fresh Dask worker do (tests/e2e/test_scale_out.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers.runs import ROOT

# A process of its own: SQLAlchemy has not imported the PostgreSQL dialect yet when 16
# threads, released together, ask for the engine.
COLD_START = """
import sys, threading
from dueflow.tasks.adapters import db
start, engines, errors = threading.Barrier(16), [], []
def ask():
    start.wait()
    try:
        engines.append(db.engine_for(sys.argv[1]))
    except Exception as exc:
        errors.append(repr(exc))
threads = [threading.Thread(target=ask) for _ in range(16)]
for t in threads: t.start()
for t in threads: t.join()
print(len({id(e) for e in engines}), len(engines), errors)
"""


@pytest.mark.pg
def test_threads_asking_at_once_share_one_engine(pg_url):
    for _ in range(3):
        done = subprocess.run([sys.executable, "-c", COLD_START, pg_url], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "1 16 []", done.stdout  # one engine, no error


ADDRESS = "payables@client-secret.example"


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.pg)])
def test_a_database_error_never_carries_the_statements_values(backend, tmp_path, request):
    """issue 36: a statement_timeout printed ~99 lines with the SQL's parameters — client
    addresses — to the terminal and Prefect's logs. Errors name the statement, not its values,
    through SQLAlchemy and through the COPY read of the extracts alike."""
    from sqlalchemy import text
    from sqlalchemy.exc import DBAPIError

    from dueflow.tasks.adapters import db

    url = f"sqlite:///{tmp_path / 'e.db'}" if backend == "sqlite" else request.getfixturevalue("pg_url")
    engine = db.engine_for(url)
    failing = "SELECT no_such_column FROM no_such_table WHERE :address <> ''"
    with pytest.raises(DBAPIError) as through_sqlalchemy, engine.connect() as conn:
        conn.execute(text(failing), {"address": ADDRESS})
    with pytest.raises(DBAPIError) as through_the_extract:
        db.extract_frame(engine, failing, {"address": ADDRESS})
    for caught in (through_sqlalchemy, through_the_extract):
        shown = str(caught.value)
        assert "no_such_table" in shown and ADDRESS not in shown, shown


@pytest.mark.pg
def test_an_extract_never_writes_whatever_a_mapping_expression_calls(pg_url):
    """issue 36: a mapping expression calling a function that writes wrote rows into the
    company's table during a night. Extracts run READ ONLY: the write is refused, one error,
    and the table is untouched."""
    from sqlalchemy import text
    from sqlalchemy.exc import DBAPIError

    from dueflow.tasks.adapters import db

    engine = db.engine_for(pg_url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE audit_log (at timestamptz DEFAULT now())"))
        conn.execute(text("CREATE FUNCTION logged_id(x text) RETURNS text LANGUAGE sql AS"
                          " 'INSERT INTO audit_log DEFAULT VALUES; SELECT x'"))
    with pytest.raises(DBAPIError) as refused:
        db.extract_frame(engine, "SELECT logged_id('c-1') AS id", {})
    assert "read-only transaction" in str(refused.value)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM audit_log")).scalar() == 0
    assert db.extract_frame(engine, "SELECT 'c-1' AS id", {})["id"].tolist() == ["c-1"]  # reads still read


def test_the_flows_preflight_is_taken_once_from_the_command_that_just_made_it(tmp_path, monkeypatch):
    """`dueflow run` plans every statement of the night before it starts the flow; the flow's
    own check a moment later, on the same database, takes that one (once), and plans again
    after it, or for another database, or when asked without the command's check."""
    from dueflow.tasks.adapters import db, sources
    from tests.helpers.factories import sourced

    planned: list[str] = []
    explain = sources.explain_night
    monkeypatch.setattr(sources, "explain_night", lambda engine, found: planned.append("x") or explain(
        engine, found))
    databases = []
    for name in ("a", "b"):
        url = f"sqlite:///{tmp_path / name}.db"
        db.init_db(db.engine_for(url), sample_tables=True)
        databases.append(sourced(url))
    one, other = databases
    db.preflight(one)  # the command's check
    db.preflight(one, checked_just_before=True)  # the flow's: taken
    assert planned == ["x"]
    db.preflight(one, checked_just_before=True)  # taken once only
    db.preflight(one)
    db.preflight(other, checked_just_before=True)  # another database: planned
    db.preflight(one, checked_just_before=False)
    assert planned == ["x"] * 5
    monkeypatch.setattr(db, "CHECKED_FOR", 0.0)
    db.preflight(one)
    db.preflight(one, checked_just_before=True)  # too long ago: planned
    assert planned == ["x"] * 7
