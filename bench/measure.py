"""The measurements. Each public function runs in a fresh process (see bench.run), so
its peak RSS is its own, and returns plain JSON-able dicts.

Every measurement goes through dueflow's own code: the SQL files via `sql.statement`,
`tasks.db`, `tasks.decide`, `tasks.compose`, `tasks.deliver`, `tasks.mail` and the
flow `flows.nightly_alerts.nightly_alerts`.
"""

from __future__ import annotations

import cProfile
import hashlib
import io
import json
import os
import pstats
import resource
import smtplib
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import date, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd
from sqlalchemy import text

from bench.generate import DELAYS, ESCALATION_TO, LEADS, MAIL_FROM
from bench.naive import Candidate, naive_night, reserve_per_row
from dueflow.sql import statement
from dueflow.tasks.adapters import db
from dueflow.tasks.core.addresses import Mailbox
from dueflow.tasks.core.decide import (
    due_dunning_steps,
    due_renewal_alerts,
    renewal_window,
    settled_apart,
    with_settled,
)

T = TypeVar("T")
SENDER = Mailbox(MAIL_FROM)


def peak_rss_mb() -> float:
    """Peak resident set size of this process image, in MiB.

    /proc/self/status VmHWM, not getrusage: ru_maxrss survives exec on Linux, so a
    spawned child would report the peak of the parent it was forked from."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def timed(fn: Callable[[], T]) -> tuple[T, float]:
    started = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - started


def profiled(fn: Callable[[], T], path: Path, top: int = 40) -> T:
    """Run `fn` under cProfile; write `path` (.prof) and a text summary beside it."""
    profile = cProfile.Profile()
    result = profile.runcall(fn)
    path.parent.mkdir(parents=True, exist_ok=True)
    profile.dump_stats(str(path))
    out = io.StringIO()
    stats = pstats.Stats(profile, stream=out).sort_stats("cumulative")
    stats.print_stats(top)
    stats.sort_stats("tottime").print_stats(top)
    path.with_suffix(".txt").write_text(out.getvalue())
    return result


def tree_fingerprint(root: str = ".") -> dict[str, str]:
    """sha256 (first 12 hex) of every source file the flow runs, to tie figures to a tree."""
    files = sorted(p for pattern in ("tasks/**/*.py", "tasks/templates/*", "flows/*.py", "blocks/*.py",
                                     "sql/**/*.sql")
                   for p in Path(root).glob(pattern))
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest()[:12] for p in files}


# --------------------------------------------------------------------------- decide

def explain_ms(url: str, sql: str, params: dict[str, Any]) -> float:
    """Server-side execution time of one query (EXPLAIN ANALYZE), in ms."""
    with db.engine_for(url).connect() as conn:
        conn.execute(text(statement("extract_no_jit", "postgresql")))  # as tasks.db.extract_frame runs it
        plan = conn.execute(text("EXPLAIN (ANALYZE, FORMAT JSON) " + sql), params).scalar_one()
    return round(float(plan[0]["Execution Time"]), 1)


def extract_reader() -> Callable[..., pd.DataFrame]:
    """The function tasks.steps extracts with (db.extract_frame in newer trees)."""
    return getattr(db, "extract_frame", db.read_frame)  # type: ignore[no-any-return]


def _extract_and_decide(url: str, as_of: date) -> dict[str, Any]:
    """Exactly what tasks.steps does for both jobs, timed piece by piece."""
    engine = db.engine_for(url)
    start, end = renewal_window(as_of, LEADS)
    t: dict[str, float] = {}
    read = extract_reader()
    contracts, t["extract_contracts"] = timed(lambda: read(
        engine, statement("extract_contracts", db.dialect(engine)),
        {"window_start": start.isoformat(), "window_end": end.isoformat(), "as_of": as_of.isoformat(),
         "leads": json.dumps(sorted(LEADS))}))
    history, t["renewal_history"] = timed(lambda: db.renewal_history_of(engine, contracts, as_of))
    invoices, t["extract_invoices"] = timed(lambda: read(engine, statement("extract_invoices"), {}))
    clients, t["extract_clients"] = timed(
        lambda: read(engine, statement("extract_clients", db.dialect(engine)), {}))
    dunning_history, t["dunning_history"] = timed(
        lambda: read(engine, statement("dunning_history"), {}))
    def decide_renewals() -> Any:  # as tasks.steps.decide_renewals does
        unsettled, settled = settled_apart(contracts)
        return with_settled(due_renewal_alerts(unsettled, history, as_of, LEADS), settled, as_of)

    renewals, t["decide_renewals"] = timed(decide_renewals)
    dunning, t["decide_dunning"] = timed(lambda: due_dunning_steps(
        invoices, clients, dunning_history, as_of, DELAYS, "UTC", ESCALATION_TO))
    extract = sum(v for k, v in t.items() if not k.startswith("decide"))
    decide = t["decide_renewals"] + t["decide_dunning"]
    return {
        "seconds": {k: round(v, 3) for k, v in t.items()}
        | {"extract": round(extract, 3), "decide": round(decide, 3), "total": round(extract + decide, 3)},
        "rows": {
            "contracts_extracted": len(contracts), "renewal_history": len(history),
            "invoices_extracted": len(invoices), "clients_extracted": len(clients),
            "dunning_history": len(dunning_history),
            "renewal_due": len(renewals.due), "renewal_to_reserve": len(renewals.to_reserve),
            "renewal_quarantined": len(renewals.quarantined),
            "dunning_due": len(dunning.due), "dunning_to_reserve": len(dunning.to_reserve),
            "dunning_quarantined": len(dunning.quarantined),
        },
    }


def measure_decide(url: str, as_of: date, repeats: int, profile_dir: str | None = None) -> dict[str, Any]:
    """Extract + decide for both jobs, `repeats` times (the first one may hit a cold cache)."""
    runs = [_extract_and_decide(url, as_of) for _ in range(repeats)]
    totals = sorted(r["seconds"]["total"] for r in runs)
    median = runs[[r["seconds"]["total"] for r in runs].index(totals[len(totals) // 2])]
    start, end = renewal_window(as_of, LEADS)
    params = {"window_start": start.isoformat(), "window_end": end.isoformat(), "as_of": as_of.isoformat(),
              "leads": json.dumps(sorted(LEADS)), "pairs": "[]"}
    server_ms = {
        name: explain_ms(url, statement(*name_and_dialect), params)
        for name, name_and_dialect in {
            "extract_contracts": ("extract_contracts", "postgresql"),
            "renewal_history": ("renewal_history_of", "postgresql"),
            "extract_invoices": ("extract_invoices", None),
            "extract_clients": ("extract_clients", "postgresql"),
            "dunning_history": ("dunning_history", None),
        }.items()
    }
    if profile_dir:
        profiled(lambda: _extract_and_decide(url, as_of), Path(profile_dir) / "decide.prof")
    with db.engine_for(url).connect() as conn:
        source_rows = conn.execute(text(
            "SELECT (SELECT count(*) FROM contracts) + (SELECT count(*) FROM invoices)")).scalar_one()
    return {"reader": f"tasks.db.{extract_reader().__name__}",
            "median": median, "totals": [r["seconds"]["total"] for r in runs],
            "server_ms": server_ms, "source_rows": int(source_rows), "peak_rss_mb": peak_rss_mb()}


# --------------------------------------------------------------------------- reserve

def synthetic_candidates(count: int, prefix: str, as_of: date) -> pd.DataFrame:
    """`count` renewal candidates that collide with nothing in the generated data."""
    ids = [f"{prefix}-{i:07d}" for i in range(count)]
    cycles = [(as_of + timedelta(days=20 + i % 10)).isoformat() for i in range(count)]
    return pd.DataFrame({
        "key": [f"renewal/{s}/{c}/30d" for s, c in zip(ids, cycles, strict=True)],
        "subject_id": ids, "cycle": cycles, "step": "30d", "step_rank": 30,
        "recipient": [f"owner{i}@corp.example" for i in range(count)], "previous_by": None,
    }).loc[:, list(db.CANDIDATE_COLUMNS)]


def as_naive_candidates(frame: pd.DataFrame) -> list[Candidate]:
    return [Candidate(r.key, r.subject_id, r.cycle, r.step, int(r.step_rank), r.recipient)
            for r in frame.itertuples(index=False)]


def delete_run_rows(url: str, *flow_run_ids: str) -> int:
    with db.engine_for(url).begin() as conn:
        result = conn.execute(text("DELETE FROM dueflow_ledger WHERE flow_run_id = ANY(:ids)"),
                              {"ids": list(flow_run_ids)})
        return int(result.rowcount)


FLOOR_COLUMNS = "key, job, subject_id, cycle, step, step_rank, recipient, as_of, flow_run_id"


def reserve_floor(engine: Any, candidates: pd.DataFrame, as_of: date) -> float:
    """The floor of a reservation: the same kind of rows, already in the server (a
    temporary table, not timed), inserted into the ledger with all its indexes by a bare
    INSERT … SELECT … ON CONFLICT (key) DO NOTHING — no checks, no RETURNING — then rolled
    back. Returns the INSERT's seconds."""
    frame = candidates.assign(job="renewal", as_of=as_of.isoformat(), flow_run_id="bench-floor").loc[
        :, FLOOR_COLUMNS.split(", ")].sort_values("key")
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        cursor.execute(f"CREATE TEMP TABLE bench_floor AS SELECT {FLOOR_COLUMNS} FROM dueflow_ledger LIMIT 0")
        cursor.copy_expert(f"COPY bench_floor ({FLOOR_COLUMNS}) FROM STDIN WITH (FORMAT csv)",
                           io.StringIO(frame.to_csv(header=False, index=False)))
        cursor.execute("ANALYZE bench_floor")
        raw.commit()
        started = time.perf_counter()
        cursor.execute(f"INSERT INTO dueflow_ledger ({FLOOR_COLUMNS}) SELECT {FLOOR_COLUMNS}"
                       " FROM bench_floor ON CONFLICT (key) DO NOTHING")
        seconds = time.perf_counter() - started
        raw.rollback()
        cursor.execute("DROP TABLE bench_floor")
        raw.commit()
    finally:
        raw.close()
    return seconds


RESERVE_ROUNDS = 3


def checkpoint(engine: Any) -> None:
    """Write out the dirty buffers (not timed): 100,000 inserted rows dirty more pages than
    the default shared_buffers hold, and whichever statement ran next paid for writing
    out the previous one's (a reservation right after the floor: up to 4× its time)."""
    with engine.connect() as conn:
        conn.execute(text("CHECKPOINT"))
        conn.commit()


def measure_reserve(url: str, as_of: date, keys: int, naive_keys: int) -> dict[str, Any]:
    """db.reserve on `keys` new candidates against the floor, alternated RESERVE_ROUNDS
    times (medians), then again on the last round's keys (all conflicts); the per-row
    pattern on `naive_keys` other candidates, twice as well. Every round of either takes
    keys of its own: a key inserted and rolled back (or deleted) leaves a dead index entry
    that the next insert of that key must visit — measured on the bench's ledger, a
    reservation of keys the floor had just rolled back three times took 1.4–5 times as
    long as one of fresh keys, which made the ratio a measure of that, not of reserve —
    and each starts after a CHECKPOINT. The keys are new to the ledger in every benchmark
    run too: VACUUM skips index cleanup when few pages hold dead rows, so the index entries
    of an earlier run's deleted keys can stay (the likely reason the bench's reservation of
    reused keys took 2–3 times as long as the same code on new keys, its re-run 5 times),
    and a real night never reserves a key that was deleted."""
    import statistics

    engine = db.engine_for(url)
    run = os.urandom(3).hex()  # keys no earlier run inserted (and deleted)
    naive = as_naive_candidates(synthetic_candidates(naive_keys, f"bench-n-{run}", as_of))
    delete_run_rows(url, "bench-reserve", "bench-naive-reserve")
    # Not timed: the rows earlier benchmark runs inserted and deleted leave dead heap and
    # index entries that the statements visit (an index-only scan of the reservation's
    # cycles made 1.2 million heap fetches): every run starts from a vacuumed ledger. It
    # also warms the pool: connecting is not reserving.
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM (INDEX_CLEANUP ON) dueflow_ledger"))
    floors: list[float] = []
    firsts: list[float] = []
    won_counts: list[int] = []
    for n in range(RESERVE_ROUNDS):
        checkpoint(engine)
        floors.append(reserve_floor(engine, synthetic_candidates(keys, f"bench-f{n}-{run}", as_of), as_of))
        checkpoint(engine)
        bulk = synthetic_candidates(keys, f"bench-r{n}-{run}", as_of)
        won, first = timed(lambda bulk=bulk: db.reserve(engine, "renewal", bulk, as_of, "bench-reserve"))
        firsts.append(first)
        won_counts.append(len(won))
    rewon, again = timed(lambda: db.reserve(engine, "renewal", bulk, as_of, "bench-reserve"))
    naive_won, naive_first = timed(lambda: reserve_per_row(url, naive, as_of, "bench-naive-reserve"))
    naive_rewon, naive_again = timed(lambda: reserve_per_row(url, naive, as_of, "bench-naive-reserve"))
    deleted = delete_run_rows(url, "bench-reserve", "bench-naive-reserve")
    with engine.connect() as conn:  # what db.reserve may add after a big reservation
        _, analyze = timed(lambda: conn.execute(text("ANALYZE dueflow_ledger")))
        conn.commit()
    return {
        "analyze_ledger_seconds": round(analyze, 3),
        "floor_seconds": round(statistics.median(floors), 3), "floor_runs": [round(f, 3) for f in floors],
        "keys": keys, "first_won": min(won_counts), "first_seconds": round(statistics.median(firsts), 3),
        "first_runs": [round(f, 3) for f in firsts],
        "rerun_won": len(rewon), "rerun_seconds": round(again, 3),
        "naive_keys": naive_keys, "naive_first_won": naive_won, "naive_first_seconds": round(naive_first, 3),
        "naive_rerun_won": naive_rewon, "naive_rerun_seconds": round(naive_again, 3),
        "cleanup_deleted": deleted, "peak_rss_mb": peak_rss_mb(),
    }


# --------------------------------------------------------------------------- deliver

def _prepared_emails(url: str, prefix: str, count: int, as_of: date) -> list[Any]:
    """Reserve `count` synthetic alerts and store their rendered messages, as the flow does
    before delivery; return the OutgoingEmails."""
    from dueflow.tasks.core.render import compose_renewal_alerts

    engine = db.engine_for(url)
    candidates = synthetic_candidates(count, prefix, as_of)
    won = db.reserve(engine, "renewal", candidates, as_of, prefix)
    assert len(won) == count, f"reserved {len(won)} of {count} {prefix} keys"
    due = candidates.assign(
        vendor="Vendor bench", title="Bench contract", amount="1250.50", currency="EUR",
        renewal_date=pd.to_datetime(candidates["cycle"]).dt.date, days_left=30)
    composed = compose_renewal_alerts(due, "en", SENDER)
    emails, failures = composed.emails, composed.failures
    assert not failures, failures[:3]
    db.store_messages(engine, [e.as_row() for e in emails])
    return emails


_EMAILS: dict[str, list[Any]] = {}


def _bench_deliver_flow() -> Any:
    from prefect import flow
    from prefect.task_runners import ThreadPoolTaskRunner

    from dueflow.flows.nightly_alerts import DELIVERY_WORKERS
    from dueflow.tasks.deliver import deliver

    @flow(name="bench-deliver", task_runner=ThreadPoolTaskRunner(max_workers=DELIVERY_WORKERS))
    def bench_deliver(batch: str, mail_url: str, url: str, as_of: date) -> tuple[list[Any], float]:
        """tasks.deliver.deliver exactly as nightly_alerts calls it (emails come from memory,
        not from flow parameters, so Prefect does not serialise them)."""
        started = time.perf_counter()
        deliveries = deliver(_items(_EMAILS[batch]), _settings(mail_url, url, as_of), DELIVERY_WORKERS)
        return deliveries, time.perf_counter() - started

    return bench_deliver


def _items(emails: list[Any]) -> list[Any]:
    from dueflow.tasks.deliver import Recipient

    return [Recipient(e.key, e.recipient) for e in emails]


def _settings(mail_url: str, url: str, as_of: date) -> Any:
    from dueflow.tasks.adapters.db import Database
    from dueflow.tasks.adapters.mail import parse_mail_url
    from dueflow.tasks.deliver import DeliverySettings

    return DeliverySettings(parse_mail_url(mail_url), SENDER, Database(url), as_of)


def ledger_status_counts(url: str, flow_run_id: str) -> dict[str, int]:
    with db.engine_for(url).connect() as conn:
        rows = conn.execute(text("SELECT status, count(*) FROM dueflow_ledger WHERE flow_run_id = :f"
                                 " GROUP BY status"), {"f": flow_run_id}).all()
    return {str(s): int(n) for s, n in rows}


class NullTransport:
    """Accepts every email at once: what is left of deliver_batch is its own overhead."""

    def send(self, email: Any) -> Any:
        from dueflow.tasks.core.statuses import SendResult, SendStatus

        return SendResult(SendStatus.SENT, smtp_response="250 OK (null transport)")

    def __enter__(self) -> NullTransport:
        return self

    def __exit__(self, *_exc: object) -> None:
        return None


def measure_deliver(url: str, mail_url: str, count: int, as_of: date) -> dict[str, Any]:
    """M emails through dueflow's delivery path inside a Prefect flow run, against one plain
    smtplib connection sending the same messages; plus a breakdown without Prefect."""
    import dueflow.tasks.deliver as deliver_module
    from dueflow.tasks.adapters.mail import open_transport, parse_mail_url
    from dueflow.tasks.core.message import message_bytes

    mail = parse_mail_url(mail_url)
    prefixes = ("bench-deliver", "bench-deliver-direct", "bench-deliver-ledger")
    delete_run_rows(url, *prefixes)
    _EMAILS["flow"] = emails = _prepared_emails(url, "bench-deliver", count, as_of)
    direct = _prepared_emails(url, "bench-deliver-direct", count, as_of)
    ledger_only = _prepared_emails(url, "bench-deliver-ledger", count, as_of)
    result: dict[str, Any] = {"emails": count}

    payloads, result["build_message_seconds"] = timed(
        lambda: [message_bytes(e, SENDER) for e in emails])
    result["message_bytes"] = sum(map(len, payloads)) // len(payloads)

    def raw_smtp() -> int:
        conn = smtplib.SMTP(mail.host, mail.port, timeout=30)
        conn.ehlo()
        for email, payload in zip(emails, payloads, strict=True):
            conn.sendmail(MAIL_FROM, [email.recipient], payload)
        conn.quit()
        return len(payloads)

    _, result["raw_smtp_seconds"] = timed(raw_smtp)

    flow_fn = _bench_deliver_flow()
    (deliveries, inside), result["flow_call_seconds"] = timed(lambda: flow_fn("flow", mail_url, url, as_of))
    result["dueflow_seconds"] = inside
    result["dueflow_statuses"] = pd.Series([d.status for d in deliveries]).value_counts().to_dict()
    result["ledger_after_flow"] = ledger_status_counts(url, "bench-deliver")

    # Breakdown, no Prefect: one batch on one thread; the transport alone; the ledger alone.
    direct_deliveries, result["direct_batch_seconds"] = timed(
        lambda: deliver_module.deliver_batch.fn(_items(direct), _settings(mail_url, url, as_of)))
    result["direct_statuses"] = pd.Series([d.status for d in direct_deliveries]).value_counts().to_dict()

    def transport_only() -> None:
        with open_transport(mail, SENDER) as transport:
            for email in direct:
                transport.send(email)

    _, result["transport_only_seconds"] = timed(transport_only)
    real_open = deliver_module.open_transport
    deliver_module.open_transport = lambda *_args: NullTransport()  # type: ignore[assignment,return-value]
    try:
        _, result["ledger_only_seconds"] = timed(
            lambda: deliver_module.deliver_batch.fn(_items(ledger_only), _settings(mail_url, url, as_of)))
    finally:
        deliver_module.open_transport = real_open
    result["ledger_only_statuses"] = ledger_status_counts(url, "bench-deliver-ledger")
    # Messages the sink must have received: raw + flow + direct batch + transport only.
    result["expected_received"] = 4 * count
    result["cleanup_deleted"] = delete_run_rows(url, *prefixes)
    result["peak_rss_mb"] = peak_rss_mb()
    return result


# --------------------------------------------------------------------------- nightly run

def _task_breakdown(flow_run_id: str | None) -> dict[str, dict[str, float]]:
    """Per task name: runs, summed run time and wall span, read back from the Prefect API."""
    if not flow_run_id:
        return {}
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    runs: list[Any] = []
    with get_client(sync_client=True) as client:
        for _ in range(20):  # task runs reach the API through events, a little later
            runs = client.read_task_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])), limit=200)
            if runs and all(r.end_time for r in runs):
                break
            time.sleep(0.5)
    out: dict[str, dict[str, float]] = {}
    for name in sorted({r.name.rsplit("-", 1)[0] for r in runs}):
        spans = sorted((r.start_time.timestamp(), r.end_time.timestamp()) for r in runs
                       if r.name.rsplit("-", 1)[0] == name and r.start_time and r.end_time)
        if spans:
            out[name] = {"runs": len(spans), "sum_seconds": round(sum(e - s for s, e in spans), 3),
                         "wall_seconds": round(busy_seconds(spans), 3)}
    return out


def busy_seconds(spans: list[tuple[float, float]]) -> float:
    """Length of the union of sorted (start, end) intervals: wall time with >= 1 run active."""
    total, current_start, current_end = 0.0, spans[0][0], spans[0][1]
    for start, end in spans[1:]:
        if start > current_end:
            total += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    return total + current_end - current_start


def measure_nightly(as_of: date, profile_path: str | None = None,
                    deliver_cap: int | None = None) -> dict[str, Any]:
    """`nightly_alerts(as_of=…)` end to end, in this fresh process, against the Prefect
    server and the database/SMTP sink named by the environment."""
    import_started = time.perf_counter()
    import dueflow.flows.nightly_alerts as nightly

    import_seconds = time.perf_counter() - import_started
    capped = 0
    if deliver_cap is not None:
        import dueflow.tasks.jobs as jobs  # where the flow's steps call deliver

        real_deliver = jobs.deliver

        def capped_deliver(emails: Any, *args: Any, **kwargs: Any) -> Any:
            """Deliver at most `deliver_cap` emails per call (one call per job); the
            rest stay `pending` in the ledger, reported as not delivered."""
            nonlocal capped
            capped += max(0, len(emails) - deliver_cap)
            return real_deliver(list(emails)[:deliver_cap], *args, **kwargs)

        jobs.deliver = capped_deliver  # type: ignore[assignment]
    run = lambda: nightly.nightly_alerts(as_of=as_of)  # noqa: E731
    if profile_path:
        summary, seconds = timed(lambda: profiled(run, Path(profile_path)))
    else:
        summary, seconds = timed(run)
    return {
        "seconds": round(seconds, 3), "import_seconds": round(import_seconds, 3),
        "counts": summary.counts(), "ledger_pending": summary.ledger_pending,
        "ledger_unsent": summary.ledger_unsent,
        "ledger_failed": summary.ledger_failed, "flow_run_id": summary.flow_run_id,
        "rows": len(summary.rows), "not_delivered_cap": capped,
        "tasks": _task_breakdown(summary.flow_run_id), "peak_rss_mb": peak_rss_mb(),
    }


def measure_naive_night(url: str, mail_url: str, as_of: date, fraction: float,
                        keep_rows: bool = False) -> dict[str, Any]:
    from dueflow.tasks.adapters.mail import parse_mail_url

    mail = parse_mail_url(mail_url)
    delete_run_rows(url, "bench-naive")
    stats = naive_night(url, mail.host, mail.port, MAIL_FROM, as_of, ESCALATION_TO, LEADS, DELAYS,
                        fraction, "bench-naive")
    deleted = 0 if keep_rows else delete_run_rows(url, "bench-naive")
    return asdict(stats) | {"fraction": fraction, "cleanup_deleted": deleted, "peak_rss_mb": peak_rss_mb()}


# --------------------------------------------------------------------------- as processes

def _timed_process(argv: list[str], pythonpath: str | None = None, timeout: float = 900) -> dict[str, Any]:
    """Wall time of one fresh process, as a deployment or cron would start it (interpreter
    start, imports, the work, exit); `pythonpath` puts another dueflow tree first."""
    import os
    import subprocess

    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    seconds = time.perf_counter() - started
    return {"seconds": round(seconds, 3), "returncode": done.returncode,
            "stdout_tail": done.stdout[-1500:], "stderr_tail": done.stderr[-1500:]}


def dueflow_command() -> list[str]:
    import sys

    return [str(Path(sys.executable).parent / "dueflow")]


def measure_process_night(as_of: date, pythonpath: str | None = None) -> dict[str, Any]:
    """`dueflow run --as-of D` as its own process against the Prefect server, database and
    SMTP sink named by the environment."""
    result = _timed_process([*dueflow_command(), "run", "--as-of", as_of.isoformat()], pythonpath)
    result["tree"] = pythonpath or "working tree"
    return result


def measure_naive_process(url: str, mail_url: str, as_of: date) -> dict[str, Any]:
    """bench/naive.py's night as its own process (interpreter start and imports included)."""
    import sys

    from dueflow.tasks.adapters.mail import parse_mail_url

    mail = parse_mail_url(mail_url)
    result = _timed_process([sys.executable, "-m", "bench.naive", url, mail.host, str(mail.port),
                             as_of.isoformat(), MAIL_FROM, ESCALATION_TO, json.dumps(LEADS),
                             json.dumps(DELAYS)])
    if result["returncode"] == 0:
        result |= json.loads(result["stdout_tail"].strip().splitlines()[-1])
    return result


def measure_imports(repeats: int, pythonpath: str | None = None) -> dict[str, Any]:
    """`import prefect`, `from prefect import flow` (what any flow module needs: Prefect
    loads its flow machinery lazily) and `import dueflow.flows.nightly_alerts`, each in a
    fresh process, alternated `repeats` times; medians (the differences are what the
    flow machinery and the flow module add)."""
    import statistics
    import sys

    modules = {"prefect": "import prefect", "prefect_flow": "from prefect import flow",
               "flow": "import dueflow.flows.nightly_alerts"}
    times: dict[str, list[float]] = {name: [] for name in modules}
    for _ in range(repeats):
        for name, code in modules.items():
            run = _timed_process([sys.executable, "-c", code], pythonpath, timeout=120)
            if run["returncode"] != 0:
                raise RuntimeError(f"{code} failed: {run['stderr_tail']}")
            times[name].append(run["seconds"])
    medians = {k: round(statistics.median(v), 3) for k, v in times.items()}
    return {"runs": times, "median": medians, "above_prefect": round(medians["flow"] - medians["prefect"], 3),
            "above_prefect_flow": round(medians["flow"] - medians["prefect_flow"], 3),
            "tree": pythonpath or "working tree"}
