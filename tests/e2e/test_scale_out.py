"""Past one machine, for real (docs/deployment.md, "Past one machine"): two Prefect process workers
running the nightly deployment against one PostgreSQL, and delivery on a Dask cluster
of two worker processes — also when one of them dies mid-batch. No mocks: a real
`prefect server start`, real `prefect worker start` processes, real Dask worker
processes, a real SMTP server and PostgreSQL.

Slow (about two minutes on two cores): the Prefect server and each worker start in
their own process, every flow run of a process worker is a fresh Python process
importing Prefect and pandas, and each Dask worker process imports them once. All
need PostgreSQL: SQLite cannot be shared by machines.
"""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from email import message_from_bytes, policy
from pathlib import Path
from typing import IO, Any, TypeVar
from uuid import UUID

import dask
import pytest
from aiosmtpd.controller import Controller
from distributed import Client, LocalCluster, get_task_stream
from prefect import get_client
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
from prefect.client.schemas.objects import FlowRun
from prefect.deployments import run_deployment
from prefect.settings import PREFECT_API_URL, temporary_settings
from prefect_dask import DaskTaskRunner
from sqlalchemy import text

from dueflow.flows.nightly_alerts import nightly_alerts
from dueflow.tasks.adapters import db
from dueflow.tasks.core.report import RunSummary
from tests.helpers.concurrency import wait_for
from tests.helpers.factories import contract, insert
from tests.helpers.runs import stop
from tests.helpers.smtp_server import SmtpSink, _Handler

ROOT = Path(__file__).resolve().parents[2]
PREFECT = str(Path(sys.executable).parent / "prefect")
AS_OF = date(2027, 1, 1)
# The session's real Prefect server lives in one worker: its tests run there.
pytestmark = pytest.mark.xdist_group("prefect-server")
POOL = "dueflow-scale"
WORKERS = ("worker-a", "worker-b")
RUNS = 4  # flow runs triggered at once: two per worker (each worker has --limit 2)
TERMINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}

T = TypeVar("T")


def due_contracts(url: str, n: int) -> set[str]:
    """`n` contracts, each due for one lead on AS_OF; their idempotency keys."""
    leads = [60, 30, 15]
    rows = [contract(f"c{i:03d}", AS_OF + timedelta(days=leads[i % 3])) for i in range(n)]
    insert(url, "contracts", rows)
    return {f"renewal/{r['id']}/{r['renewal_date']}/{leads[i % 3]}d" for i, r in enumerate(rows)}


def assert_delivered_once(sink: SmtpSink, url: str, expected: set[str]) -> None:
    received = sink.keys()
    duplicates = sorted(k for k, n in Counter(received).items() if n > 1)
    assert not duplicates, f"delivered more than once: {duplicates[:5]}"
    assert set(received) == expected
    ledger = db.ledger_rows(db.engine_for(url))
    assert set(ledger["key"]) == expected
    assert set(ledger["status"]) == {"sent"}
    assert set(ledger["attempts"]) == {1}


# --- 1. Several Prefect process workers, one PostgreSQL -------------------------------


def _tail(path: Path, lines: int = 40) -> str:
    text = path.read_text(encoding="utf-8", errors="replace")
    return f"--- {path.name} ---\n" + "\n".join(text.splitlines()[-lines:])


@pytest.fixture
def prefect_api(prefect_server_process) -> tuple[str, dict[str, str]]:
    """The session's real `prefect server start`."""
    return prefect_server_process


@pytest.fixture
def process_workers(prefect_api, tmp_path: Path) -> Iterator[list[Path]]:
    """A process work pool and two `prefect worker start` processes on it, as an operator
    starts them on two machines; yields their log files."""
    _, env = prefect_api
    made = subprocess.run([PREFECT, "work-pool", "create", POOL, "--type", "process"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stdout + made.stderr
    # --limit 2: a worker runs at most two flow runs at once, so four runs in flight at
    # once need both workers. Polling every 2 s (default 10) only makes the test quicker.
    worker_env = env | {"PREFECT_WORKER_QUERY_SECONDS": "2", "PREFECT_LOGGING_LEVEL": "INFO"}
    logs = [tmp_path / f"{name}.log" for name in WORKERS]
    files: list[IO[bytes]] = [log.open("wb") for log in logs]
    workers = [subprocess.Popen([PREFECT, "worker", "start", "--pool", POOL, "--name", name,
                                 "--limit", "2"], env=worker_env, stdout=out, stderr=subprocess.STDOUT)
               for name, out in zip(WORKERS, files, strict=True)]
    try:
        yield logs
    finally:
        stop(workers)
        for out in files:
            out.close()


def deploy(env: dict[str, str]) -> UUID:
    """Deploy the nightly flow from this checkout to the pool. No concurrency limit and
    the run lock off (in `env`): the runs must really overlap here."""
    source = nightly_alerts.from_source(source=str(ROOT),
                                        entrypoint="flows/nightly_alerts.py:nightly_alerts")
    return source.deploy(name="scale-out", work_pool_name=POOL, job_variables={"env": env},
                         concurrency_limit=None, build=False, push=False, print_next_steps=False)


def state(run: FlowRun) -> str | None:
    return run.state_type.value if run.state_type else None


def ledger_waiters(url: str) -> int:
    """Sessions blocked on a lock on the ledger table, as PostgreSQL sees them."""
    with db.engine_for(url).connect() as conn:
        return conn.execute(text(
            "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'dueflow_ledger'::regclass"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        )).scalar_one()


@pytest.mark.pg
def test_two_process_workers_share_one_postgresql(prefect_api, process_workers, pg_url,
                                                   smtp_sink):
    api, _ = prefect_api
    engine = db.engine_for(pg_url)
    db.init_db(engine, sample_tables=True)
    expected = due_contracts(pg_url, 60)

    def details() -> str:
        return "\n".join(_tail(log) for log in process_workers)

    # Prefect's own client: it retries the 503s of a busy SQLite-backed server.
    with temporary_settings(updates={PREFECT_API_URL: api}), get_client(sync_client=True) as client:
        deployment_id = deploy({
            "DUEFLOW_DATABASE_URL": pg_url, "DUEFLOW_MAIL_URL": f"smtp://127.0.0.1:{smtp_sink.port}",
            "DUEFLOW_MAIL_FROM": "alerts@dueflow.test", "DUEFLOW_RUN_LOCK": "off"})
        # Hold the ledger closed for writes until all four runs wait on it: every run is
        # then provably in flight at once, on whichever worker took it, before any reserves.
        barrier = engine.connect()
        held = barrier.begin()
        try:
            barrier.execute(text("LOCK TABLE dueflow_ledger IN EXCLUSIVE MODE"))
            run_ids = [run_deployment(deployment_id, parameters={"as_of": AS_OF}, timeout=0,
                                      as_subflow=False).id for _ in range(RUNS)]
            wait_for(lambda: ledger_waiters(pg_url) == RUNS, "four runs blocked on the ledger",
                     details=details)
        finally:
            held.commit()  # the four runs now race for the same keys
            barrier.close()

        def finished() -> list[FlowRun] | None:
            runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=run_ids)))
            return runs if len(runs) == RUNS and all(state(r) in TERMINAL for r in runs) else None

        runs = wait_for(finished, "the four runs to end", details=details)

    # Each run ended as a night ends: Completed, or "Needs attention" — of the Failed type by
    # default when it saw emails pending (here: the keys another run was sending at that moment).
    assert all((state(r), r.state.name) in (("COMPLETED", "Completed"), ("COMPLETED", "Needs attention"),
                                            ("FAILED", "Needs attention")) for r in runs), details()
    # Each worker labels the runs it submits; with --limit 2, four runs in flight at
    # once were necessarily split two and two.
    by_worker = Counter(r.labels.get("prefect.worker.name") for r in runs)
    assert by_worker == dict.fromkeys(WORKERS, 2), by_worker
    assert len({r.infrastructure_pid for r in runs}) == RUNS  # four flow-run processes
    assert_delivered_once(smtp_sink, pg_url, expected)
    ledger = db.ledger_rows(engine)
    assert set(ledger["flow_run_id"]) <= {str(i) for i in run_ids}  # reserved by these runs


# --- 2. Delivery on a distributed task runner ------------------------------------------


@dataclass
class BatchSink(SmtpSink):
    """An SMTP sink whose gate holds a connection's messages only after its first
    `pass_first`: a batch can have delivered some emails when it is stopped."""

    pass_first: int = 0

    def start(self) -> None:
        self._controller = Controller(_PassFirst(self), hostname="127.0.0.1", port=self.port)
        self._controller.start()


class _PassFirst(_Handler):
    sink: BatchSink

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        seen = getattr(session, "dueflow_messages", 0)  # aiosmtpd: one session per connection
        session.dueflow_messages = seen + 1
        if seen >= self.sink.pass_first:
            return await super().handle_DATA(server, session, envelope)
        with self.sink.lock:
            self.sink.messages.append(message_from_bytes(envelope.content, policy=policy.default))
        return "250 OK queued"


@pytest.fixture
def batch_sink() -> Iterator[BatchSink]:
    sink = BatchSink()
    sink.start()
    try:
        yield sink
    finally:
        sink.stop()


# Dask's default: a lost worker's tasks run again on another worker. The rerun batch
# finds its rows claimed (`sending_at`) and sends none of them again.
ALLOWED_FAILURES = 3


@pytest.fixture(scope="module")
def dask_cluster() -> Iterator[Client]:
    """Two Dask worker processes of two threads each, as an operator's cluster would be;
    shared by the tests below (a killed worker is restarted by its nanny)."""
    with (dask.config.set({"distributed.scheduler.allowed-failures": ALLOWED_FAILURES}),
          LocalCluster(n_workers=2, processes=True, threads_per_worker=2, dashboard_address=None)
          as cluster, Client(cluster) as client):
        yield client


@pytest.fixture
def dask_client(dask_cluster: Client, pg_url: str, batch_sink: BatchSink,
                monkeypatch: pytest.MonkeyPatch) -> Client:
    """The cluster with both workers up and the product imported in each (a cold import
    on a busy machine must not be what holds a batch at the SMTP gate), and the flow's
    environment pointing at this test's database and SMTP sink."""
    dask_cluster.wait_for_workers(2, timeout=120)
    dask_cluster.run(importlib.import_module, "dueflow.tasks.deliver")
    db.init_db(db.engine_for(pg_url), sample_tables=True)
    monkeypatch.setenv("DUEFLOW_DATABASE_URL", pg_url)
    monkeypatch.setenv("DUEFLOW_MAIL_URL", f"smtp://127.0.0.1:{batch_sink.port}")
    monkeypatch.setenv("DUEFLOW_MAIL_FROM", "alerts@dueflow.test")
    monkeypatch.delenv("DUEFLOW_TIMEZONE", raising=False)
    return dask_cluster


def run_on_dask(client: Client) -> RunSummary:
    """The nightly flow with delivery on the cluster, reached by address as in production
    (docs/deployment.md): the runner connects to it instead of starting its own."""
    runner = DaskTaskRunner(address=client.scheduler.address)
    return nightly_alerts.with_options(task_runner=runner)(as_of=AS_OF)


@dataclass
class Gate:
    held: int = 0  # batches held at the shut gate at once
    error: BaseException | None = None  # raised by `then`


def when_blocked(sink: SmtpSink, batches: int, then: Callable[[], None] = lambda: None) -> Gate:
    """In a thread: wait until `batches` batches are held at the shut SMTP gate (each
    batch blocks at its first DATA), call `then`, open the gate."""
    gate = Gate()

    def watch() -> None:
        deadline = time.monotonic() + 120
        while len(sink.data_seen) < batches and time.monotonic() < deadline:
            time.sleep(0.05)
        gate.held = len(sink.data_seen)
        try:
            then()
        except BaseException as exc:  # surfaced by the test, in its own thread
            gate.error = exc
        finally:
            sink.gate.set()

    sink.gate.clear()
    threading.Thread(target=watch, daemon=True).start()
    return gate


@pytest.mark.pg
def test_delivery_on_a_dask_cluster(prefect_server, pg_url, batch_sink, dask_client):
    expected = due_contracts(pg_url, 80)  # four deliver-batch tasks of 20 (DELIVERY_WORKERS)
    # Each batch is one thread in one Dask worker and blocks at its first DATA while the
    # gate is shut. Two threads per worker: three batches held at once means at least
    # two worker processes are delivering at the same time.
    gate = when_blocked(batch_sink, 3)
    with get_task_stream(client=dask_client) as stream:
        summary = run_on_dask(dask_client)

    assert gate.held >= 3, gate
    assert (summary.sent, summary.failed, summary.pending) == (len(expected), 0, 0)
    assert_delivered_once(batch_sink, pg_url, expected)
    # Dask's own record of where each task ran, and the pid of each worker process.
    pids: dict[str, int] = dask_client.run(os.getpid)
    keys = [t["key"] for t in stream.data]
    assert len(keys) == 4 and all(k.startswith("deliver_batch-") for k in keys), keys
    ran_on = {pids[t["worker"]] for t in stream.data}
    assert len(ran_on) == 2 and os.getpid() not in ran_on, (ran_on, pids)


@pytest.mark.pg
def test_a_lost_dask_workers_batch_run_again_sends_nothing_twice(
        prefect_server, pg_url, batch_sink, dask_client):
    expected = due_contracts(pg_url, 80)
    batch_sink.pass_first = 1  # each batch delivers one email, then waits at the gate
    pids: dict[str, int] = dask_client.run(os.getpid)
    victim = next(iter(pids))

    def kill_one_worker() -> None:
        # Both workers hold a batch at the gate now; one dies as a machine would.
        os.kill(pids[victim], signal.SIGKILL)
        wait_for(lambda: victim not in dask_client.scheduler_info()["workers"],
                 "the scheduler to notice the lost worker")

    gate = when_blocked(batch_sink, 3, kill_one_worker)
    summary = run_on_dask(dask_client)

    assert gate.held >= 3 and gate.error is None, gate
    received = batch_sink.keys()
    twice = sorted(k for k, n in Counter(received).items() if n > 1)
    assert not twice, f"a lost worker's batch was run again and sent twice: {twice[:5]}"
    # Dask did run the lost batches again; they found their rows claimed.
    again = summary.rows[summary.rows["detail"].fillna("").str.contains("not sent again")]
    assert not again.empty, summary.rows
    ledger = db.ledger_rows(db.engine_for(pg_url))
    assert set(ledger["key"]) == expected
    sent = set(ledger.loc[ledger["status"] == "sent", "key"])
    pending = set(ledger.loc[ledger["status"] == "pending", "key"])
    assert sent | pending == expected
    # The lost batches are reported pending; the ledger agrees, bar an outcome the dead
    # worker managed to write before it died.
    reported = set(summary.rows.loc[summary.rows["status"] == "pending", "key"])
    assert pending and pending <= reported
    assert sent <= set(received)  # nothing is marked sent that was not received
    assert set(received) - sent <= pending  # delivered but unrecorded: pending, never lost
