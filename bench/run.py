"""dueflow benchmark, one command:

    .venv/bin/python -m bench.run                       # full scale: 1M contracts, 1M invoices
    .venv/bin/python -m bench.run --small               # quick check (about a minute)
    .venv/bin/python -m bench.run --contracts 1000000 --invoices 1000000 --emails 2000 \\
        --json bench/out/results.json

It generates the data with COPY into its own PostgreSQL database (`dueflow_bench`,
created if missing), starts an SMTP sink in another process and a Prefect server,
then measures decide, reserve, deliver, the whole nightly run (steady night and
first-run surge), peak RSS, and the naive per-row pattern, each in a fresh process.
It prints a table with each target's PASS/FAIL and writes every figure as JSON.
Counts are verified against the generator's own simulation of the rules; a failed
check makes the exit code 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import date
from multiprocessing import get_context
from pathlib import Path
from typing import Any, TypeVar

DEFAULT_URL = "postgresql+psycopg2://postgres@127.0.0.1:5432/dueflow_bench"
SMALL_URL = DEFAULT_URL + "_small"
PROTECTED_DATABASES = frozenset({"postgres", "test", "root", "template0", "template1"})
T = TypeVar("T")

TARGETS = {
    "decide_seconds": 2.0,
    "reserve_keys_per_second": 100_000,
    "reserve_vs_naive": 25.0,
    "deliver_vs_raw": 0.70,
    "peak_rss_mb": 1536.0,
    "steady_night_seconds": 60.0,
    "quiet_process_vs_naive": 1.5,
    "steady_vs_naive": 1.5,
    "import_above_prefect_seconds": 0.3,
    "reserve_vs_floor": 0.80,
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true",
                        help="quick check: 20k contracts, 20k invoices, 2k clients, 10k reserve keys,"
                             " 200 emails; in its own database (dueflow_bench_small)")
    parser.add_argument("--contracts", type=int, default=1_000_000)
    parser.add_argument("--invoices", type=int, default=1_000_000)
    parser.add_argument("--clients", type=int, default=50_000)
    parser.add_argument("--emails", type=int, default=2_000, help="M, emails for the delivery figure")
    parser.add_argument("--reserve-keys", type=int, default=100_000, help="N, keys for the reserve figure")
    parser.add_argument("--naive-reserve-keys", type=int, default=5_000,
                        help="keys for the per-row reserve pattern (its rate is per key)")
    parser.add_argument("--naive-fraction", type=float, default=1.0,
                        help="share of the source rows the naive night processes; <1 extrapolates")
    parser.add_argument("--surge-deliver-cap", type=int, default=5_000,
                        help="in the surge, deliver at most this many emails per job (the rest stay"
                             " pending and the uncapped time is extrapolated); 0: no cap")
    parser.add_argument("--no-surge", action="store_true", help="skip the first-run surge")
    parser.add_argument("--baseline-tree", default=None,
                        help="a directory holding another dueflow tree as dueflow/ (e.g. the last commit):"
                             " the process night and the imports are measured for it too, in this run")
    parser.add_argument("--import-repeats", type=int, default=9)
    parser.add_argument("--invoice-age-days", type=int, default=None,
                        help="invoices are sent over this many days before the bench date (default 540);"
                             " 60 gives many open invoices not yet due")
    parser.add_argument("--decide-repeats", type=int, default=3)
    parser.add_argument("--history-days", type=int, default=365, help="nights the ledger history covers")
    parser.add_argument("--as-of", type=date.fromisoformat, default=date(2027, 6, 15))
    parser.add_argument("--seed", type=int, default=6)
    parser.add_argument("--database-url", default=DEFAULT_URL)
    parser.add_argument("--reuse-data", action="store_true",
                        help="keep the source tables when they already hold this exact data set")
    parser.add_argument("--profile-dir", default=None,
                        help="also write cProfile dumps of decide and of each nightly run here")
    parser.add_argument("--json", default="bench/out/results.json", help="where to write the figures")
    args = parser.parse_args(argv)
    if args.small:
        args.contracts, args.invoices, args.clients = 20_000, 20_000, 2_000
        if args.database_url == DEFAULT_URL:  # keep the full run's data for --reuse-data
            args.database_url = SMALL_URL
        args.reserve_keys, args.naive_reserve_keys, args.emails = 10_000, 1_000, 200
    return args


# --------------------------------------------------------------------------- plumbing

def isolated(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run fn in a fresh process (spawn): its peak RSS and imports are its own."""
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        return pool.submit(fn, *args, **kwargs).result()


def ensure_database(url: str) -> None:
    """Create the bench database if it does not exist (never one of the protected ones)."""
    import psycopg2
    from sqlalchemy import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() != "postgresql":
        raise SystemExit("the benchmark needs PostgreSQL (COPY, arrays)")
    if parsed.database in PROTECTED_DATABASES:
        raise SystemExit(f"refusing to use the database {parsed.database!r}: use a database of its own")
    conn = psycopg2.connect(host=parsed.host, port=parsed.port or 5432, user=parsed.username,
                            password=parsed.password, dbname="postgres")
    try:
        conn.autocommit = True
        cur = conn.cursor()
        cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (parsed.database,))
        if cur.fetchone() is None:
            cur.execute(f'CREATE DATABASE "{parsed.database}"')
    finally:
        conn.close()


@contextmanager
def prefect_server() -> Iterator[tuple[str, float]]:
    """A temporary Prefect server (SQLite) for the whole benchmark; yields its API URL and
    how long it took to start (excluded from every figure)."""
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    started = time.perf_counter()
    with prefect_test_harness(server_startup_timeout=120):
        api_url = str(PREFECT_API_URL.value())
        os.environ["PREFECT_API_URL"] = api_url  # for the measuring processes
        yield api_url, time.perf_counter() - started


def execute(url: str, *statements: str, params: dict[str, Any] | None = None) -> None:
    from sqlalchemy import text

    from dueflow.tasks.adapters import db

    with db.engine_for(url).begin() as conn:
        for sql in statements:
            conn.execute(text(sql), params or {})


# --------------------------------------------------------------------------- report

@dataclass
class Figure:
    name: str
    seconds: float | None = None
    count: int | None = None
    unit: str = ""
    value: str = ""  # shown instead of the rate (ratios, MB)
    target: str = ""
    ok: bool | None = None
    note: str = ""

    @property
    def rate(self) -> float | None:
        if self.seconds and self.count is not None:
            return self.count / self.seconds
        return None

    def cells(self) -> list[str]:
        rate = self.value or (f"{self.rate:,.0f} {self.unit}/s" if self.rate is not None else "")
        result = "" if self.ok is None else ("PASS" if self.ok else "FAIL")
        return [self.name, f"{self.seconds:.3f}" if self.seconds is not None else "",
                f"{self.count:,}" if self.count is not None else "", rate, self.target, result, self.note]


def table(figures: list[Figure]) -> str:
    header = ["figure", "seconds", "count", "rate / value", "target", "result", "note"]
    rows = [header] + [f.cells() for f in figures]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


class Checks:
    """Correctness checks of the benchmark itself (counts), separate from the targets."""

    def __init__(self) -> None:
        self.results: list[dict[str, Any]] = []

    def expect(self, name: str, actual: Any, expected: Any) -> None:
        self.results.append({"check": name, "ok": actual == expected, "actual": actual,
                             "expected": expected})

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [c for c in self.results if not c["ok"]]


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# --------------------------------------------------------------------------- main

class Phases:
    """Runs each measurement in its own process; a phase that raises is recorded
    (and reported) instead of ending the benchmark."""

    def __init__(self, results: dict[str, Any]) -> None:
        self.results = results

    def run(self, name: str, fn: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any] | None:
        started = time.perf_counter()
        try:
            result = isolated(fn, *args)
        except Exception as exc:
            log(f"  {name} FAILED: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
            self.results[name] = {"error": f"{type(exc).__name__}: {exc}"[:5000]}
            return None
        log(f"  {name} done in {time.perf_counter() - started:.1f} s")
        self.results[name] = result
        return result


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # Prefect reads its settings at import: keep its home out of the user's and its
    # INFO chatter off the terminal (as `dueflow run` does). The LLM stays off.
    os.environ["PREFECT_HOME"] = tempfile.mkdtemp(prefix="dueflow-bench-prefect-")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    os.environ.pop("OPENAI_API_KEY", None)

    from bench import generate as gen
    from bench import measure
    from bench.smtp_sink import SinkProcess
    from dueflow.tasks.adapters import db

    url, as_of = args.database_url, args.as_of
    results: dict[str, Any] = {"config": {k: str(v) for k, v in vars(args).items()},
                               "targets": TARGETS, "machine": {"cpus": os.cpu_count()}}
    checks = Checks()
    phases = Phases(results)
    results["tree_at_start"] = measure.tree_fingerprint()

    ensure_database(url)
    engine = db.engine_for(url)
    results["machine"] |= machine_speed(engine)
    log(f"machine: {describe_machine(results['machine'])}")
    scale = gen.Scale(args.contracts, args.invoices, args.clients, as_of, args.history_days, args.seed,
                      args.invoice_age_days or gen.INVOICE_AGE_DAYS)
    log(f"building the data set in memory ({args.contracts:,} contracts, {args.invoices:,} invoices)")
    data = gen.build(scale)
    expected = data.expected
    reuse = args.reuse_data and gen.sources_loaded(engine, scale)
    tables: tuple[str, ...] = () if reuse else gen.SOURCE_TABLES
    if not (reuse and gen.ledger_loaded(engine, scale)):
        tables = (*tables, "dueflow_ledger")
    started = time.perf_counter()
    load_seconds: dict[str, float] = {}
    if tables:
        log(f"loading {', '.join(tables)} with COPY")
        load_seconds = gen.load(engine, data, tables)
    else:
        log("reusing the data already loaded (--reuse-data)")
        gen.vacuum_analyze(engine)
    gen.mark_ledger(engine, None)  # until the end of the run restores it
    load_seconds["total"] = round(time.perf_counter() - started, 2)
    results["dataset"] = {"expected": asdict(expected), "stats": data.stats, "load_seconds": load_seconds,
                          "sources_reused": reuse, "tables": gen.table_sizes(engine)}
    del data
    log(f"data ready in {load_seconds['total']:.0f} s: {json.dumps(results['dataset']['tables'])}")
    log(f"expected tonight: {asdict(expected)}")

    with SinkProcess() as sink, prefect_server() as (api_url, server_seconds):
        os.environ |= {
            "DUEFLOW_DATABASE_URL": url, "DUEFLOW_MAIL_URL": sink.url, "DUEFLOW_MAIL_FROM": gen.MAIL_FROM,
            "DUEFLOW_ESCALATION_TO": gen.ESCALATION_TO, "DUEFLOW_TIMEZONE": "UTC",
        }
        results["prefect_server"] = {"api_url": api_url, "startup_seconds": round(server_seconds, 2)}
        log(f"SMTP sink on {sink.url} (pid {sink.pid}); Prefect server up in {server_seconds:.1f} s"
            " (not counted)")

        log("imports: prefect alone, `from prefect import flow`, the flow module, each in a fresh process")
        phases.run("imports", measure.measure_imports, args.import_repeats)
        if args.baseline_tree:
            phases.run("imports_baseline", measure.measure_imports, args.import_repeats, args.baseline_tree)

        log("decide: extract + decide")
        if decide := phases.run("decide", measure.measure_decide, url, as_of, args.decide_repeats,
                                args.profile_dir):
            rows = decide["median"]["rows"]
            checks.expect("decide: renewal due rows", rows["renewal_due"], expected.renewal_due)
            checks.expect("decide: renewal keys to reserve", rows["renewal_to_reserve"],
                          expected.renewal_new)
            checks.expect("decide: renewal quarantined", rows["renewal_quarantined"],
                          expected.renewal_quarantined)
            checks.expect("decide: dunning keys to reserve", rows["dunning_to_reserve"],
                          expected.dunning_new)
            checks.expect("decide: dunning quarantined", rows["dunning_quarantined"],
                          expected.dunning_quarantined)

        log(f"reserve: {args.reserve_keys:,} keys in one statement, and per row")
        if reserve := phases.run("reserve", measure.measure_reserve, url, as_of, args.reserve_keys,
                                 args.naive_reserve_keys):
            checks.expect("reserve: first run wins every key", reserve["first_won"], args.reserve_keys)
            checks.expect("reserve: re-run wins none", reserve["rerun_won"], 0)
            checks.expect("reserve per row: first run wins every key", reserve["naive_first_won"],
                          args.naive_reserve_keys)
            checks.expect("reserve per row: re-run wins none", reserve["naive_rerun_won"], 0)

        log(f"deliver: {args.emails:,} emails, dueflow vs raw smtplib")
        before = sink.received
        if deliver := phases.run("deliver", measure.measure_deliver, url, sink.url, args.emails, as_of):
            checks.expect("deliver: flow path statuses", deliver["dueflow_statuses"], {"sent": args.emails})
            checks.expect("deliver: ledger after the flow path", deliver["ledger_after_flow"],
                          {"sent": args.emails})
            checks.expect("deliver: direct batch statuses", deliver["direct_statuses"],
                          {"sent": args.emails})
            checks.expect("deliver: ledger after the null-transport batch", deliver["ledger_only_statuses"],
                          {"sent": args.emails})
            checks.expect("deliver: the sink received every message",
                          sink.wait_for(before + deliver["expected_received"]) - before,
                          deliver["expected_received"])

        log(f"naive night: row by row over {args.naive_fraction:.0%} of the source rows")
        before = sink.received
        if naive := phases.run("naive_night", measure.measure_naive_night, url, sink.url, as_of,
                               args.naive_fraction, True):
            checks.expect("naive night: the sink received what it sent",
                          sink.wait_for(before + naive["sent"]) - before, naive["sent"])
            log("naive night again, as a process (sends nothing)")
            before = sink.received
            quiet = phases.run("naive_quiet_process", measure.measure_naive_process, url, sink.url, as_of)
            if quiet:
                checks.expect("naive quiet night: exit code", quiet["returncode"], 0)
                checks.expect("naive quiet night: sent", quiet.get("sent"), 0)
                time.sleep(0.5)
                checks.expect("naive quiet night: the sink received nothing", sink.received - before, 0)
        execute(url, "DELETE FROM dueflow_ledger WHERE flow_run_id = 'bench-naive'")
        gen.vacuum_analyze(engine, ("dueflow_ledger",))

        log("nightly run: steady night")
        before = sink.received
        profile = (lambda name: str(Path(args.profile_dir) / name)) if args.profile_dir else (lambda _: None)
        if steady := phases.run("steady_night", measure.measure_nightly, as_of,
                                profile("nightly_steady.prof")):
            counts = steady["counts"]
            checks.expect("steady: new keys won", counts["won"], expected.steady_new)
            checks.expect("steady: due", counts["due"], expected.renewal_due + expected.dunning_new)
            checks.expect("steady: sent", counts["sent"], expected.steady_new)
            checks.expect("steady: failed + pending", counts["failed"] + counts["pending"], 0)
            checks.expect("steady: quarantined", counts["quarantined"], expected.quarantined)
            checks.expect("steady: the sink received every email",
                          sink.wait_for(before + counts["sent"]) - before, counts["sent"])

        log("nightly run: the same night again (must send nothing)")
        before = sink.received
        if repeat := phases.run("steady_night_repeat", measure.measure_nightly, as_of):
            checks.expect("repeat: won", repeat["counts"]["won"], 0)
            # Tonight's dunning steps are not due again (their wait starts tonight).
            checks.expect("repeat: already handled", repeat["counts"]["already_handled"],
                          expected.renewal_due)
            time.sleep(0.5)
            checks.expect("repeat: the sink received nothing", sink.received - before, 0)
        trees = [("quiet_process", None)] + ([("quiet_process_baseline", args.baseline_tree)]
                                             if args.baseline_tree else [])
        for _ in range(2):  # alternated, twice: the machine's noise hits both trees alike
            for name, tree in trees:
                log(f"nothing-new night as a process: `dueflow run` ({tree or 'working tree'})")
                before = sink.received
                run = phases.run(name + ("" if name not in results else "_2"), measure.measure_process_night,
                                 as_of, tree)
                if run:
                    checks.expect(f"{name}: exit code", run["returncode"], 0)
                    time.sleep(0.5)
                    checks.expect(f"{name}: the sink received nothing", sink.received - before, 0)
        execute(url, "DELETE FROM dueflow_ledger WHERE as_of = :as_of", "TRUNCATE dueflow_quarantine",
                params={"as_of": as_of})

        if not args.no_surge:
            log("nightly run: first-run surge (empty ledger)"
                + (f", at most {args.surge_deliver_cap:,} emails delivered per job"
                   if args.surge_deliver_cap else ""))
            # A fresh ledger, as `dueflow init-db` leaves it on a first install (never analyzed).
            gen.stash_ledger(engine)
            before = sink.received
            if surge := phases.run("surge_night", measure.measure_nightly, as_of,
                                   profile("nightly_surge.prof"), args.surge_deliver_cap or None):
                counts = surge["counts"]
                checks.expect("surge: keys won (delivered + left pending by the cap)",
                              counts["won"] + surge["not_delivered_cap"], expected.surge_new)
                checks.expect("surge: ledger unsent = not delivered because of the cap",
                              surge["ledger_pending"] + surge.get("ledger_unsent", 0),
                              surge["not_delivered_cap"])
                checks.expect("surge: sent", counts["sent"], expected.surge_new - surge["not_delivered_cap"])
                checks.expect("surge: the sink received every email",
                              sink.wait_for(before + counts["sent"], 30) - before, counts["sent"])
            gen.restore_ledger(engine)
        gen.vacuum_analyze(engine, ("dueflow_ledger",))
        gen.mark_ledger(engine, scale)
    engine.dispose()
    results["tree_at_end"] = measure.tree_fingerprint()
    changed = sorted(k for k in results["tree_at_start"].keys() | results["tree_at_end"].keys()
                     if results["tree_at_start"].get(k) != results["tree_at_end"].get(k))
    results["tree_changed_during_run"] = changed

    figures = build_figures(results)
    results["figures"] = [asdict(f) | {"rate": f.rate} for f in figures]
    results["checks"] = checks.results
    print()
    print(f"machine: {describe_machine(results['machine'])}")
    print(table(figures))
    print()
    if changed:
        print(f"WARNING: these files changed while the benchmark ran: {', '.join(changed)}")
    errors = [name for name, value in results.items() if isinstance(value, dict) and "error" in value]
    if errors:
        print(f"PHASE(S) FAILED: {', '.join(errors)} (see the JSON for the errors)")
    if checks.failed:
        print(f"{len(checks.failed)} CHECK(S) FAILED:")
        for c in checks.failed:
            print(f"  {c['check']}: got {c['actual']}, expected {c['expected']}")
    else:
        print(f"all {len(checks.results)} correctness checks passed")
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, default=str))
    print(f"figures written to {path}")
    return 1 if checks.failed or errors else 0


def machine_speed(engine: Any) -> dict[str, Any]:
    """Two fixed workloads, so that figures from different machines can be compared:
    the same 2-core VM kind has measured twice as slow on one day as on another."""
    from sqlalchemy import text

    started = time.perf_counter()
    total = 0
    for i in range(10_000_000):
        total += i
    python_seconds = time.perf_counter() - started
    with engine.connect() as conn:
        started = time.perf_counter()
        conn.execute(text("SELECT count(*) FROM generate_series(1, 5000000)")).scalar_one()
        postgres_seconds = time.perf_counter() - started
        settings = {name: conn.execute(text("SELECT current_setting(:name)"), {"name": name}).scalar_one()
                    for name in ("server_version", "shared_buffers", "work_mem", "synchronous_commit")}
    return {"python_loop_10m_seconds": round(python_seconds, 3),
            "postgres_count_5m_seconds": round(postgres_seconds, 3), "postgres": settings}


def describe_machine(machine: dict[str, Any]) -> str:
    pg = machine.get("postgres", {})
    return (f"{machine['cpus']} CPUs; a Python loop of 10M additions {machine['python_loop_10m_seconds']} s,"
            f" PostgreSQL count(*) of 5M generated rows {machine['postgres_count_5m_seconds']} s;"
            f" PostgreSQL {pg.get('server_version')}, shared_buffers {pg.get('shared_buffers')},"
            f" synchronous_commit {pg.get('synchronous_commit')}")


def ok_phase(results: dict[str, Any], name: str) -> dict[str, Any] | None:
    value = results.get(name)
    return value if isinstance(value, dict) and "error" not in value else None


def decide_figures(d: dict[str, Any]) -> list[Figure]:
    s, r, server = d["median"]["seconds"], d["median"]["rows"], d["server_ms"]
    extracted = sum(v for k, v in r.items() if k.endswith(("extracted", "history")))
    queries = [("extract_contracts", "contracts_extracted"), ("renewal_history", "renewal_history"),
               ("extract_invoices", "invoices_extracted"), ("extract_clients", "clients_extracted"),
               ("dunning_history", "dunning_history")]
    return [
        Figure("decide: extract (5 queries → DataFrames)", s["extract"], extracted, "rows",
               note=f"{d.get('reader', 'tasks.db.read_frame')}; source tables: {d['source_rows']:,} rows"),
        *[Figure(f"  {q}", s[q], r[rows], "rows", note=f"server {server[q]:.0f} ms (EXPLAIN ANALYZE)")
          for q, rows in queries],
        Figure("decide: decide (pure pandas)", s["decide"],
               r["contracts_extracted"] + r["invoices_extracted"], "rows",
               note=f"renewals {s['decide_renewals']:.3f} s, dunning {s['decide_dunning']:.3f} s"),
        Figure("decide: extract + decide, both jobs", s["total"], d["source_rows"], "source rows",
               target=f"≤ {TARGETS['decide_seconds']:.0f} s", ok=s["total"] <= TARGETS["decide_seconds"],
               note=f"median of {len(d['totals'])}: {d['totals']}; "
                    f"due {r['renewal_due'] + r['dunning_due']:,}, "
                    f"new {r['renewal_to_reserve'] + r['dunning_to_reserve']:,}"),
    ]


def reserve_figures(v: dict[str, Any]) -> list[Figure]:
    bulk_rate = v["keys"] / v["first_seconds"]
    floor = v.get("floor_seconds")
    naive_rate = v["naive_keys"] / v["naive_first_seconds"]
    naive_rerun_rate = v["naive_keys"] / v["naive_rerun_seconds"]
    return [
        Figure("reserve: first run (all new)", v["first_seconds"], v["first_won"], "keys",
               target=f"≥ {TARGETS['reserve_keys_per_second']:,} keys/s",
               ok=bulk_rate >= TARGETS["reserve_keys_per_second"],
               note=f"{v['keys']:,} candidates; median of {v.get('first_runs')}; a plain ANALYZE of"
                    f" the ledger takes {v.get('analyze_ledger_seconds', float('nan')):.2f} s"),
        *([Figure("reserve floor: bare INSERT … SELECT … ON CONFLICT DO NOTHING", floor, v["keys"], "keys",
                  note="rows of the same shape from a temporary table into the ledger with its indexes;"
                       f" rolled back; median of {v.get('floor_runs')}, alternated with the reservations"),
           Figure("reserve vs floor (throughput)", value=f"{floor / v['first_seconds']:.0%}",
                  target=f"≥ {TARGETS['reserve_vs_floor']:.0%}",
                  ok=floor / v["first_seconds"] >= TARGETS["reserve_vs_floor"])] if floor else []),
        Figure("reserve: re-run (all conflicts)", v["rerun_seconds"], v["keys"], "keys",
               note=f"won {v['rerun_won']}"),
        Figure("reserve per row: first run", v["naive_first_seconds"], v["naive_keys"], "keys",
               note="SELECT + INSERT + COMMIT per key"),
        Figure("reserve per row: re-run", v["naive_rerun_seconds"], v["naive_keys"], "keys",
               note="SELECT per key"),
        Figure("reserve: bulk vs per row (first run)", value=f"{bulk_rate / naive_rate:.1f}×",
               target=f"≥ {TARGETS['reserve_vs_naive']:.0f}×",
               ok=bulk_rate / naive_rate >= TARGETS["reserve_vs_naive"],
               note=f"re-run: {(v['keys'] / v['rerun_seconds']) / naive_rerun_rate:.1f}×"),
    ]


def deliver_figures(e: dict[str, Any]) -> list[Figure]:
    m = e["emails"]
    ratio = e["raw_smtp_seconds"] / e["dueflow_seconds"]
    batches = -(-m // min(200, -(-m // 4)))
    return [
        Figure("deliver: raw smtplib, 1 connection", e["raw_smtp_seconds"], m, "emails",
               note=f"pre-built messages, {e['message_bytes']:,} B each"),
        Figure("deliver: dueflow, in a Prefect flow run", e["dueflow_seconds"], m, "emails",
               note=f"tasks.deliver.deliver: {batches} deliver-batch tasks on 4 threads;"
                    f" whole flow call {e['flow_call_seconds']:.2f} s"),
        Figure("deliver: dueflow vs raw", value=f"{ratio:.0%}",
               target=f"≥ {TARGETS['deliver_vs_raw']:.0%}", ok=ratio >= TARGETS["deliver_vs_raw"]),
        Figure("  deliver_batch.fn, 1 thread, no Prefect", e["direct_batch_seconds"], m, "emails"),
        Figure("  SmtpTransport.send only (no ledger)", e["transport_only_seconds"], m, "emails",
               note="builds each message, 1 connection"),
        Figure("  message_bytes() only", e["build_message_seconds"], m, "emails"),
        Figure("  deliver_batch.fn, null transport", e["ledger_only_seconds"], m, "emails",
               note="ledger outcome writes + bookkeeping, no SMTP"),
    ]


def night_figures(key: str, label: str, n: dict[str, Any]) -> list[Figure]:
    c = n["counts"]
    note = (f"won {c['won']:,}, sent {c['sent']:,}, handled {c['already_handled']:,}, "
            f"quarantined {c['quarantined']:,}; RSS {n['peak_rss_mb']:,.0f} MB")
    figures = [Figure(label, n["seconds"], c["due"] + c["quarantined"], "rows", note=note)]
    if key == "steady_night":
        figures[0].target = f"≤ {TARGETS['steady_night_seconds']:.0f} s"
        figures[0].ok = n["seconds"] <= TARGETS["steady_night_seconds"]
    tasks = n["tasks"]
    for task, t in sorted(tasks.items(), key=lambda kv: -kv[1]["wall_seconds"]):
        if t["wall_seconds"] >= 0.03 * n["seconds"]:
            figures.append(Figure(f"  task {task} ×{t['runs']}", t["wall_seconds"], None,
                                  note=f"wall time with a run active; summed {t['sum_seconds']:.2f} s"))
    if n["not_delivered_cap"]:
        delivery = tasks.get("deliver-batch", {}).get("wall_seconds", 0.0)
        rate = c["sent"] / delivery if delivery else 0.0
        extra = n["not_delivered_cap"] / rate if rate else float("nan")
        figures.append(Figure(
            f"{label}, uncapped (EXTRAPOLATED)", n["seconds"] + extra, None,
            note=f"CAPPED: {n['not_delivered_cap']:,} reserved emails not delivered; "
                 f"+{extra:,.0f} s at the run's {rate:,.0f} emails/s"))
    return figures


def import_figures(results: dict[str, Any]) -> list[Figure]:
    f = []
    limit = TARGETS["import_above_prefect_seconds"]
    for key, label in (("imports", ""), ("imports_baseline", " (baseline tree)")):
        if i := ok_phase(results, key):
            m, judged = i["median"], not label
            f.append(Figure(f"import flow module above prefect{label}", value=f"+{i['above_prefect']:.2f} s",
                            target=f"≤ {limit} s" if judged else "",
                            ok=i["above_prefect"] <= limit if judged else None,
                            note=f"fresh processes, median of {len(i['runs']['flow'])}: import prefect"
                                 f" {m['prefect']:.2f} s, the flow module {m['flow']:.2f} s;"
                                 f" `from prefect import flow` (any flow) {m['prefect_flow']:.2f} s,"
                                 f" so the module adds {i['above_prefect_flow']:+.2f} s to that"))
    return f


def quiet_figures(results: dict[str, Any]) -> list[Figure]:
    """The nothing-new night as processes: dueflow (this tree, the baseline) and naive."""
    f: list[Figure] = []
    naive = ok_phase(results, "naive_quiet_process")
    for key, label in (("quiet_process", "this tree"), ("quiet_process_baseline", "baseline tree")):
        runs = [r for r in (ok_phase(results, key), ok_phase(results, key + "_2")) if r]
        if not runs:
            continue
        best = min(r["seconds"] for r in runs)
        f.append(Figure(f"nothing-new night, `dueflow run` process ({label})", best, None,
                        note=f"best of {[r['seconds'] for r in runs]}; real Prefect server"))
        if naive:
            ratio = naive["seconds"] / best
            target = key == "quiet_process"
            f.append(Figure(f"  naive / dueflow, nothing-new night ({label})", value=f"{ratio:.2f}×",
                            target=f"≥ {TARGETS['quiet_process_vs_naive']}×" if target else "",
                            ok=ratio >= TARGETS["quiet_process_vs_naive"] if target else None))
    if naive:
        f.insert(0, Figure("naive nothing-new night, as a process", naive["seconds"],
                           naive.get("rows_processed"), "rows",
                           note=f"python -m bench.naive; ledger SELECTs {naive.get('ledger_selects', 0):,}"))
    return f


def build_figures(results: dict[str, Any]) -> list[Figure]:
    f: list[Figure] = import_figures(results)
    if d := ok_phase(results, "decide"):
        f += decide_figures(d)
    if v := ok_phase(results, "reserve"):
        f += reserve_figures(v)
    if e := ok_phase(results, "deliver"):
        f += deliver_figures(e)
    nights = [(k, label) for k, label in (("steady_night", "nightly: steady night"),
                                          ("steady_night_repeat", "nightly: same night again"),
                                          ("surge_night", "nightly: first-run surge"))
              if ok_phase(results, k)]
    for key, label in nights:
        f += night_figures(key, label, results[key])
    if nights:
        rss = max(results[k]["peak_rss_mb"] for k, _ in nights)
        f.append(Figure("peak RSS, nightly flow process", value=f"{rss:,.0f} MB",
                        target=f"≤ {TARGETS['peak_rss_mb']:,.0f} MB", ok=rss <= TARGETS["peak_rss_mb"],
                        note=f"max over the nightly runs; decide process "
                             f"{d['peak_rss_mb'] if d else float('nan'):,.0f} MB"))
    if nv := ok_phase(results, "naive_night"):
        full = nv["seconds"] / nv["fraction"]
        sample = "" if nv["fraction"] >= 1 else f" ({nv['fraction']:.0%} sample)"
        f.append(Figure(f"naive night, per row{sample}", nv["seconds"], nv["rows_processed"], "rows",
                        note=f"sent {nv['sent']:,}, failed {nv['failed']:,}, "
                             f"ledger SELECTs {nv['ledger_selects']:,}"))
        if st := ok_phase(results, "steady_night"):
            f.append(Figure("naive night vs dueflow steady night", value=f"{full / st['seconds']:.1f}×",
                            target=f"≥ {TARGETS['steady_vs_naive']}×",
                            ok=full / st["seconds"] >= TARGETS["steady_vs_naive"],
                            note=("" if nv["fraction"] >= 1 else f"EXTRAPOLATED to all rows: {full:,.0f} s; ")
                            + f"naive {full:.1f} s / dueflow {st['seconds']:.1f} s"))
    return f + quiet_figures(results)


if __name__ == "__main__":
    sys.exit(main())
