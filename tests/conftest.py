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
# Nor does any test of the session's server read its events, schedules or automations: the
# services behind them cost a third of the server's CPU per flow run (measured: 3.7 s → 2.4 s
# for 20 runs). tests/e2e/test_prefect_ui.py checks events on a server process of its own
# with every service on (prefect_server_process starts it without these variables).
os.environ.update({name: os.environ.get(name, "false") for name in [
    *(f"PREFECT_SERVER_SERVICES_{service}_ENABLED" for service in (
        "EVENT_PERSISTER", "EVENT_LOGGER", "TRIGGERS", "SCHEDULER", "LATE_RUNS", "FOREMAN",
        "CANCELLATION_CLEANUP", "PAUSE_EXPIRATIONS", "REPOSSESSOR", "DB_VACUUM")),
    "PREFECT_SERVER_EVENTS_STREAM_OUT_ENABLED"]})
# The tests run on fixed nights (2027): every run of the session may take any as_of, as a
# backfill may (docs/parameters.md); tests/e2e/test_run_edges.py turns it off to test the window.
os.environ["DUEFLOW_ALLOW_ANY_AS_OF"] = "on"
# The tests call the flow in Python and read the summary it returns: a run whose emails need
# a person ends Completed "Needs attention" here, as DUEFLOW_ATTENTION_STATE=completed says.
# The default (Failed "Needs attention", what a call then raises) is tested where it shows: in
# the Prefect UI (tests/e2e/test_prefect_ui.py, whose processes do not inherit this), by the CLI
# and in tests/e2e/test_failures.py.
os.environ.setdefault("DUEFLOW_ATTENTION_STATE", "completed")

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings
from sqlalchemy import create_engine, text

from dueflow.tasks.adapters import db
from tests.helpers.smtp_server import SmtpSink

# No per-example deadline: the machines that run the suite are shared and a slow second
# is not a bug; the properties are what the tests hold.
hypothesis_settings.register_profile("dueflow", deadline=None)
hypothesis_settings.load_profile("dueflow")

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

# The MTA tier (tests/e2e/test_postfix_bounces.py): a real Postfix and Dovecot. CI sets
# DUEFLOW_REQUIRE_MTA=1 (.ci/run installs both): there, a tier that cannot run fails.
REQUIRE_MTA = os.environ.get("DUEFLOW_REQUIRE_MTA") == "1"
_skipped_mta_tests: list[str] = []
_mta_seconds: list[float] = []


def require_mta(problem: str | None) -> None:
    """Skip the MTA tier with its one line, or fail it where it is required."""
    if problem:
        if REQUIRE_MTA:
            pytest.fail(problem + " (DUEFLOW_REQUIRE_MTA=1)")
        pytest.skip(problem)


@pytest.hookimpl(trylast=True)  # after the tmp_path plugin has set up its factory
def pytest_configure(config) -> None:
    # The controller starts migrating the session's Prefect database (migrated_prefect_db)
    # while the workers import and collect, unless only the unit layer runs: the worker that
    # first needs it then waits on its lock for what is left.
    if hasattr(config, "workerinput") or all(str(a).startswith("tests/unit") for a in config.args):
        return
    import subprocess
    import sys

    shared = config._tmp_path_factory.getbasetemp()
    config._dueflow_migrating = subprocess.Popen(
        [sys.executable, "-c", f"from tests.helpers.prefect_db import build; build({str(shared)!r})"],
        cwd=config.rootpath, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def pytest_unconfigure(config) -> None:
    migrating = getattr(config, "_dueflow_migrating", None)
    if migrating is not None and migrating.poll() is None:
        migrating.kill()
        migrating.wait()


def pytest_runtest_logreport(report) -> None:
    if report.skipped and "pg" in report.keywords:
        _skipped_pg_tests.append(report.nodeid)
    if "mta" in report.keywords:
        if report.skipped:
            _skipped_mta_tests.append(report.nodeid)
        _mta_seconds.extend(value for name, value in report.user_properties if name == "mta_tier_seconds")


def pytest_terminal_summary(terminalreporter) -> None:
    # The MTA tier's run time: from starting its servers to its last test's end (its tests
    # run on one worker, one after another; a session's Prefect server is not counted).
    if _mta_seconds:
        terminalreporter.write_line(f"MTA tier (a real Postfix and Dovecot): {max(_mta_seconds):.1f} s")


def pytest_sessionfinish(session, exitstatus) -> None:
    # CI sets DUEFLOW_REQUIRE_PG=1: a PostgreSQL test that did not run is a failure.
    if REQUIRE_PG and _skipped_pg_tests:
        print(f"\n{len(_skipped_pg_tests)} PostgreSQL test(s) were skipped: "
              + ", ".join(_skipped_pg_tests[:5]))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    # And DUEFLOW_REQUIRE_MTA=1: an MTA test that did not run is one too.
    if REQUIRE_MTA and _skipped_mta_tests:
        print(f"\n{len(_skipped_mta_tests)} MTA test(s) were skipped: " + ", ".join(_skipped_mta_tests[:5]))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@contextmanager
def pg_schema() -> Iterator[str]:
    """The URL of a fresh PostgreSQL schema, dropped afterwards."""
    require_pg()
    schema = f"dueflow_t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    # Its sessions carry the schema's name, so that a test can cut them and only them.
    url = f"{PG_URL}?options=-csearch_path%3D{schema}&application_name={schema}"
    try:
        yield url
    finally:
        db.engine_for(url).dispose()
        with admin.connect() as conn:
            # Whatever still holds a session on this schema (an engine made with other
            # settings, a child process) lets go of it: 30 idle pools exhaust PostgreSQL.
            conn.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                              " WHERE application_name = :name AND pid <> pg_backend_pid()"),
                         {"name": schema})
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL schema for one test, dropped afterwards."""
    with pg_schema() as url:
        yield url


@pytest.fixture
def sqlite_url(tmp_path) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'dueflow.db'}"
    yield url
    db.engine_for(url).dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.pg)])
def db_url(request) -> str:
    """An initialised, empty database on each backend."""
    url = request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")
    db.init_db(db.engine_for(url), sample_tables=True)
    return url


@pytest.fixture(scope="session")
def migrated_prefect_db(tmp_path_factory) -> Path:
    """A Prefect server database already migrated, made once for the session's workers
    (tests/helpers/prefect_db.py): copy it into a server's home before starting it."""
    from tests.helpers.prefect_db import build

    base = tmp_path_factory.getbasetemp()
    return build(base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base)


@pytest.fixture(scope="session")
def prefect_server(migrated_prefect_db) -> Iterator[str]:
    """One Prefect test server for the session; yields its API URL."""
    from contextlib import ExitStack
    from unittest import mock

    import prefect.testing.utilities as harness
    from prefect.settings import (
        PREFECT_API_URL,
        PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
        temporary_settings,
    )

    from tests.helpers.prefect_db import seed

    def migrated_folder(*args, **kwargs) -> str:
        # The harness keeps its server's database in a folder of its own, as prefect-test.db:
        # that database starts as a copy of the migrated one.
        folder = tempfile.mkdtemp(*args, **kwargs)
        seed(Path(folder) / "prefect-test.db", migrated_prefect_db)
        return folder

    # Heartbeats detect crashed runs in production; here their thread only adds up
    # to a second to the end of every flow run.
    with ExitStack() as stack:
        with mock.patch.object(harness, "mkdtemp", migrated_folder):
            stack.enter_context(harness.prefect_test_harness(server_startup_timeout=300))
        stack.enter_context(temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}))
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


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def dueflow_cli(monkeypatch, capsys, prefect_server, tmp_path) -> Callable[..., CliResult]:
    """The `dueflow` command run in this process (`main(argv)`), as an operator's shell
    would run it: the environment given, nothing else of DUEFLOW_*, in `cwd`. For what a
    process boundary does not change; signals and races use real processes (tests/helpers/runs.py)."""
    from dueflow.flows.cli import main

    def run(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> CliResult:
        kept = ("DUEFLOW_ALLOW_ANY_AS_OF", "DUEFLOW_ATTENTION_STATE")  # the session's, above
        for name in [n for n in os.environ if n.startswith("DUEFLOW_") and n not in kept]:
            monkeypatch.delenv(name)
        for name, value in (env or {}).items():
            if name != "PYTHONPATH":
                monkeypatch.setenv(name, value)
        monkeypatch.chdir(cwd or tmp_path)
        capsys.readouterr()
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse refusing the arguments
            code = int(exc.code or 0)
        out, err = capsys.readouterr()
        return CliResult(code, out, err)

    return run


@pytest.fixture(scope="session")
def prefect_server_process(tmp_path_factory, migrated_prefect_db) -> Iterator[tuple[str, dict[str, str]]]:
    """One real `prefect server start` for every test that needs a server of its own
    process (deployments, workers, the UI's API); yields its API URL and an environment
    for the processes that talk to it. Tests tell their runs apart by deployment."""
    import subprocess
    import sys

    import httpx

    from tests.helpers.concurrency import wait_for
    from tests.helpers.prefect_db import seed_home
    from tests.helpers.smtp_server import free_port

    home = seed_home(tmp_path_factory.mktemp("prefect-server"), migrated_prefect_db)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "DUEFLOW_"))}
    env |= {"PREFECT_HOME": str(home), "DUEFLOW_ALLOW_ANY_AS_OF": "on", "PREFECT_UI_ENABLED": "false",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_LOGGING_LEVEL": "WARNING",
            # The recorder's writes make the SQLite-backed API answer 503 (and clients
            # sleep) while several runs create task runs; tests read what they need.
            "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_ENABLED": "false"}
    port = free_port()
    prefect = str(Path(sys.executable).parent / "prefect")
    server = subprocess.Popen([prefect, "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    api = f"http://127.0.0.1:{port}/api"
    try:
        wait_for(lambda: httpx.get(f"{api}/health", timeout=2).status_code == 200, "prefect server")
        yield api, env | {"PREFECT_API_URL": api}
    finally:
        server.terminate()
        server.wait(30)
