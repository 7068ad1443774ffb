"""Memory and time of exporting the ledger with `dueflow ledger` (issue 15):

    .venv/bin/python -m bench.ledger_export                      # the bench database's ledger
    .venv/bin/python -m bench.ledger_export --rows 2000000       # a synthetic ledger of 2M rows
    .venv/bin/python -m bench.ledger_export --rows 200000 --formats csv,parquet

Each export runs as a real `dueflow ledger --format F --output FILE` process; its peak RSS
is the kernel's figure for that process (os.wait4). Two references run the same way: the
floor (`--limit 1`: the interpreter, pandas, SQLAlchemy, no rows) and the pre-streaming way
(the same query read whole into one DataFrame). Streaming holds one chunk at a time, so its
peak stays near the floor however many rows the ledger has.

Without --rows it reads the ledger `python -m bench.nights` left in its 1x database; with --rows N
it fills the schema `ledger_export_bench` of that database with N synthetic rows first.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

from bench.machine import DEFAULT_URL

SCHEMA = "ledger_export_bench"
WHOLE = """
import sys
from dueflow.sql import statement
from dueflow.tasks.adapters import db
from dueflow.tasks.ledger_export import LedgerFilter
frame = db.read_frame(db.engine_for(sys.argv[1]), statement("ledger_export"), LedgerFilter().params())
print(len(frame))
"""


def fill(url: str, rows: int) -> str:
    """A fresh schema holding `rows` ledger rows like a year of nights; its URL."""
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE"))
        conn.execute(text(f"CREATE SCHEMA {SCHEMA}"))
    admin.dispose()
    scoped = f"{url}?options=-csearch_path%3D{SCHEMA}"
    from dueflow.tasks.adapters import db

    db.init_db(db.engine_for(scoped))
    with db.engine_for(scoped).begin() as conn:
        conn.execute(text("""
            INSERT INTO dueflow_ledger (key, job, subject_id, cycle, step, step_rank, as_of, status,
                                        attempts, recipient, subject, smtp_response, flow_run_id,
                                        sent_at, attempt_as_of, message_id)
            SELECT 'renewal/c-' || n || '/2027-03-01/30d', 'renewal', 'c-' || n, '2027-03-01', '30d',
                   30, DATE '2026-06-15' + (n % 365), CASE WHEN n % 50 = 0 THEN 'failed' ELSE 'sent' END,
                   1, 'owner-' || n || '@example.com',
                   'Contract renewal in 30 days: Vendor ' || n || ' — Hosting plan (renews 1 March 2027)',
                   '250 2.0.0 Ok: queued as ' || md5(n::text), md5((n / 1000)::text),
                   now(), DATE '2026-06-15' + (n % 365), '<' || md5(n::text) || '@dueflow.example>'
            FROM generate_series(1, :n) AS n"""), {"n": rows})
    db.engine_for(scoped).dispose()
    return scoped


def run_one(args: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run one process to its end through a fresh probe process, so that the probe's
    RUSAGE_CHILDREN is that process's alone: seconds, peak RSS (MB), the end of its output."""
    probe = [sys.executable, "-c", (
        "import json, resource, subprocess, sys, time\n"
        "t = time.monotonic()\n"
        "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "print(json.dumps({'code': p.returncode, 'seconds': round(time.monotonic() - t, 2),"
        " 'peak_rss_mb': round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1),"
        " 'stdout': p.stdout.strip()[-300:], 'stderr': p.stderr.strip()[-300:]}))"), *args]
    out = subprocess.run(probe, env=env, capture_output=True, text=True, check=True)
    result = json.loads(out.stdout)
    if result.pop("code") != 0:
        raise RuntimeError(f"{' '.join(args)} failed: {result['stderr']}")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ledger_export", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default=DEFAULT_URL)
    parser.add_argument("--rows", type=int, default=None,
                        help="fill a scratch schema with this many synthetic ledger rows first")
    parser.add_argument("--formats", default="csv,json,parquet")
    parser.add_argument("--json", default="bench/out/ledger_export.json", help="where to write the figures")
    args = parser.parse_args(argv)

    url = fill(args.database_url, args.rows) if args.rows else args.database_url
    engine = create_engine(url)
    with engine.connect() as conn:
        count = conn.execute(text("SELECT count(*) FROM dueflow_ledger")).scalar_one()
    engine.dispose()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUEFLOW_")} | {
        "DUEFLOW_DATABASE_URL": url, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    cli = [sys.executable, "-m", "dueflow.flows.cli", "ledger"]
    figures: dict[str, Any] = {"ledger_rows": count}
    with tempfile.TemporaryDirectory() as folder:
        figures["floor (--limit 1)"] = run_one([*cli, "--format", "csv", "--limit", "1", "--output",
                                                f"{folder}/floor.csv"], env)
        for fmt in args.formats.split(","):
            path = Path(folder) / f"ledger.{fmt}"
            figures[f"export {fmt}"] = run_one([*cli, "--format", fmt, "--output", str(path)], env) | {
                "file_mb": round(path.stat().st_size / 2**20, 1)}
        figures["whole (read into one DataFrame)"] = run_one([sys.executable, "-c", WHOLE, url], env)

    print(f"ledger rows: {count:,}")
    print(f"{'measure':<34} {'seconds':>8} {'peak RSS':>10} {'rows/s':>10} {'file':>9}")
    for name, figure in figures.items():
        if name == "ledger_rows":
            continue
        rate = f"{count / figure['seconds']:,.0f}" if name.startswith("export") else ""
        size = f"{figure['file_mb']} MB" if "file_mb" in figure else ""
        print(f"{name:<34} {figure['seconds']:>8.2f} {figure['peak_rss_mb']:>7.1f} MB {rate:>10} {size:>9}")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
