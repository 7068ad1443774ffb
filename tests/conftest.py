"""Shared fixtures: real databases (SQLite file and PostgreSQL), a real SMTP server,
and one Prefect test server for the whole session."""

from __future__ import annotations

import os
import tempfile

# Prefect reads its settings at import: keep its home, logs and server out of the user's.
os.environ["PREFECT_HOME"] = tempfile.mkdtemp(prefix="dueflow-prefect-")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
# The test server keeps its state in SQLite; its task-run recorder writing events
# while the next flow run is created makes the API answer 503 and the client sleep
# ~2 s. The tests assert on dueflow's ledger and mailbox, not on task-run records.
os.environ.setdefault("PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_ENABLED", "false")

import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text

from dueflow.tasks.adapters import db
from tests.smtp_server import SmtpSink

PG_URL = os.environ.get("DUEFLOW_TEST_PG_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/test")
REQUIRE_PG = os.environ.get("DUEFLOW_REQUIRE_PG") == "1"


def _pg_unavailable() -> str | None:
    try:
        engine = create_engine(PG_URL)
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        engine.dispose()
    except Exception as exc:
        return f"PostgreSQL not reachable at {PG_URL}: {str(exc).splitlines()[0]}"
    return None


_PG_PROBLEM = _pg_unavailable()


def require_pg() -> None:
    if _PG_PROBLEM:
        if REQUIRE_PG:
            pytest.fail(_PG_PROBLEM + " (DUEFLOW_REQUIRE_PG=1)")
        pytest.skip(_PG_PROBLEM)


_skipped_pg_tests: list[str] = []


def pytest_runtest_logreport(report) -> None:
    if report.skipped and "pg" in report.keywords:
        _skipped_pg_tests.append(report.nodeid)


def pytest_sessionfinish(session, exitstatus) -> None:
    # CI sets DUEFLOW_REQUIRE_PG=1: a PostgreSQL test that did not run is a failure.
    if REQUIRE_PG and _skipped_pg_tests:
        print(f"\n{len(_skipped_pg_tests)} PostgreSQL test(s) were skipped: "
              + ", ".join(_skipped_pg_tests[:5]))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL schema for one test, dropped afterwards."""
    require_pg()
    schema = f"dueflow_t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    url = f"{PG_URL}?options=-csearch_path%3D{schema}"
    try:
        yield url
    finally:
        db.engine_for(url).dispose()
        with admin.connect() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


@pytest.fixture
def sqlite_url(tmp_path) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'dueflow.db'}"
    yield url
    db.engine_for(url).dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.pg)])
def db_url(request) -> str:
    """An initialised, empty database on each backend."""
    url = request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")
    db.init_db(db.engine_for(url))
    return url


@pytest.fixture(scope="session")
def prefect_server() -> Iterator[str]:
    """One Prefect test server for the session; yields its API URL."""
    from prefect.settings import (
        PREFECT_API_URL,
        PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
        temporary_settings,
    )
    from prefect.testing.utilities import prefect_test_harness

    # Heartbeats detect crashed runs in production; here their thread only adds up
    # to a second to the end of every flow run.
    with (
        prefect_test_harness(server_startup_timeout=60),
        temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}),
    ):
        yield str(PREFECT_API_URL.value())


@pytest.fixture
def smtp_sink() -> Iterator[SmtpSink]:
    sink = SmtpSink()
    sink.start()
    try:
        yield sink
    finally:
        sink.stop()


@pytest.fixture
def run_env(monkeypatch, db_url, smtp_sink, prefect_server):
    """Environment of a flow run against this test's database and SMTP sink."""
    monkeypatch.setenv("DUEFLOW_DATABASE_URL", db_url)
    monkeypatch.setenv("DUEFLOW_MAIL_URL", f"smtp://127.0.0.1:{smtp_sink.port}")
    monkeypatch.setenv("DUEFLOW_MAIL_FROM", "alerts@dueflow.test")
    monkeypatch.delenv("DUEFLOW_TIMEZONE", raising=False)
    return db_url


@pytest.fixture
def mail_env(smtp_sink, prefect_server) -> dict[str, str]:
    """Environment of a `dueflow` process mailing this test's SMTP sink."""
    return {"DUEFLOW_MAIL_URL": f"smtp://127.0.0.1:{smtp_sink.port}",
            "DUEFLOW_MAIL_FROM": "alerts@dueflow.test", "PREFECT_API_URL": prefect_server}


@pytest.fixture
def cli_env(db_url, mail_env) -> dict[str, str]:
    return mail_env | {"DUEFLOW_DATABASE_URL": db_url}
