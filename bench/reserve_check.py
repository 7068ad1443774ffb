"""What the reservation's ordering check costs (issue 14: reservation ≥ 80 % of its floor):

    .venv/bin/python -m bench.reserve_check            # on the ledger `python -m bench.run` left

Alternates, ROUNDS times, each on 100,000 keys new to the ledger and after a CHECKPOINT:
the floor (bench.measure.reserve_floor), the reservation as `db.reserve` runs it, and the
same statement without its WHERE clause — the check that no more urgent lead of the cycle
is in the ledger (sql/fragments/renewal_no_more_urgent), which keeps the lead order (G3)
against stale and racing runs. The third is a measurement only, never a way to reserve.
Every key it inserts is deleted at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from datetime import date
from typing import Any

from sqlalchemy import text

from bench import measure
from bench.run import DEFAULT_URL
from dueflow.sql import statement
from dueflow.tasks.adapters import db

RUN_ID = "bench-reserve-check"


def reserve_with(engine: Any, sql: str, candidates: Any, as_of: date) -> int:
    """db.reserve's PostgreSQL path (lock, plan settings, one statement) with `sql` as the
    statement; returns the keys won."""
    params = {"as_of": as_of.isoformat(), "flow_run_id": RUN_ID, "status": "pending"}
    with db.writing(engine) as conn:
        conn.execute(text(statement("reserve_lock", "postgresql")), {"lock": "dueflow.reserve.renewal"})
        conn.execute(text(statement("reserve_plan", "postgresql")))
        won = conn.execute(text(sql), params | db.reserve_arrays(db.candidate_columns(candidates)))
        return len(won.all())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=DEFAULT_URL)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--as-of", type=date.fromisoformat, default=date(2027, 6, 15))
    args = parser.parse_args(argv)
    engine, as_of = db.engine_for(args.database_url), args.as_of
    checked = statement("reserve_renewals", "postgresql")
    unchecked = checked[:checked.index("\nWHERE ")] + "\n" + checked[checked.index("\nON CONFLICT") + 1:]
    run = os.urandom(3).hex()  # keys no earlier run inserted (and deleted)
    seconds: dict[str, list[float]] = {"floor": [], "reservation": [], "without the ordering check": []}
    try:
        for n in range(args.rounds):
            measure.checkpoint(engine)
            seconds["floor"].append(measure.reserve_floor(
                engine, measure.synthetic_candidates(args.keys, f"bench-cf{n}-{run}", as_of), as_of))
            for name, sql in (("reservation", checked), ("without the ordering check", unchecked)):
                measure.checkpoint(engine)
                candidates = measure.synthetic_candidates(args.keys, f"bench-c{name[0]}{n}-{run}", as_of)
                started = time.perf_counter()
                won = reserve_with(engine, sql, candidates, as_of)
                seconds[name].append(time.perf_counter() - started)
                assert won == args.keys, f"{name}: won {won} of {args.keys}"
    finally:
        deleted = measure.delete_run_rows(args.database_url, RUN_ID)
    floor = statistics.median(seconds["floor"])
    for name, runs in seconds.items():
        share = "" if name == "floor" else f"  {floor / statistics.median(runs):4.0%} of the floor"
        print(f"{name:28} median {statistics.median(runs):6.3f} s of {[round(s, 3) for s in runs]}{share}")
    print(f"({args.keys:,} keys a round; {deleted:,} rows deleted afterwards)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
