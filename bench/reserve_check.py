"""The reservation against its floor, for information (issue 26 withdrew its target):

    .venv/bin/python -m bench.reserve_check     # on the ledger of bench.nights' 1x database

Alternates, ROUNDS times, each on KEYS renewal keys new to the ledger and after a
CHECKPOINT: the floor — the same rows, already in the server, inserted into the ledger
with all its indexes by a bare INSERT … SELECT … ON CONFLICT (key) DO NOTHING, no checks,
no RETURNING, rolled back —; the reservation as `db.reserve` runs it (lock, plan settings,
one statement, the keys won returned); and the same statement without its WHERE clause —
the check that no more urgent lead of the cycle is in the ledger
(sql/fragments/renewal_no_more_urgent), which keeps the lead order (G3) against stale and
racing runs. The third is a measurement only, never a way to reserve. Every key it
inserts is deleted at the end.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import time
from datetime import date, timedelta
from typing import Any

from sqlalchemy import text

from bench.machine import DEFAULT_URL, describe_machine, machine_speed
from dueflow.sql import statement
from dueflow.tasks.adapters import db
from dueflow.tasks.core.frames import pd

RUN_ID = "bench-reserve-check"
FLOOR_COLUMNS = "key, job, subject_id, cycle, step, step_rank, recipient, as_of, flow_run_id"


def synthetic_candidates(count: int, prefix: str, as_of: date) -> pd.DataFrame:
    """`count` renewal candidates that collide with nothing in the ledger."""
    ids = [f"{prefix}-{i:07d}" for i in range(count)]
    cycles = [(as_of + timedelta(days=20 + i % 10)).isoformat() for i in range(count)]
    return pd.DataFrame({
        "key": [f"renewal/{s}/{c}/30d" for s, c in zip(ids, cycles, strict=True)],
        "subject_id": ids, "cycle": cycles, "step": "30d", "step_rank": 30,
        "recipient": [f"owner{i}@corp.example" for i in range(count)], "previous_by": None,
    }).loc[:, list(db.CANDIDATE_COLUMNS)]


def checkpoint(engine: Any) -> None:
    """Write out the dirty buffers (not timed): 100,000 inserted rows dirty more pages than
    the default shared_buffers hold, and whichever statement ran next paid for writing out
    the previous one's."""
    with engine.connect() as conn:
        conn.execute(text("CHECKPOINT"))
        conn.commit()


def reserve_floor(engine: Any, candidates: pd.DataFrame, as_of: date) -> float:
    """The INSERT's seconds, rolled back (the rows are copied to a temporary table first,
    not timed)."""
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


def reserve_with(engine: Any, sql: str, candidates: pd.DataFrame, as_of: date) -> int:
    """db.reserve's PostgreSQL path (lock, plan settings, one statement) with `sql` as the
    statement; returns the keys won."""
    params = {"as_of": as_of.isoformat(), "flow_run_id": RUN_ID, "status": "pending"}
    with db.writing(engine) as conn:
        conn.execute(text(statement("reserve_lock", "postgresql")), {"lock": "dueflow.reserve.renewal"})
        conn.execute(text(statement("reserve_plan", "postgresql")))
        won = conn.execute(text(sql), params | db.reserve_arrays(db.candidate_columns(candidates)))
        return len(won.all())


def measure(url: str, keys: int, rounds: int, as_of: date) -> dict[str, list[float]]:
    engine = db.engine_for(url)
    checked = statement("reserve_renewals", "postgresql")
    unchecked = checked[:checked.index("\nWHERE ")] + "\n" + checked[checked.index("\nON CONFLICT") + 1:]
    run = os.urandom(3).hex()  # keys no earlier run inserted (and deleted)
    seconds: dict[str, list[float]] = {"floor": [], "reservation": [], "without the ordering check": []}
    try:
        for n in range(rounds):
            checkpoint(engine)
            seconds["floor"].append(reserve_floor(
                engine, synthetic_candidates(keys, f"bench-cf{n}-{run}", as_of), as_of))
            for name, sql in (("reservation", checked), ("without the ordering check", unchecked)):
                checkpoint(engine)
                candidates = synthetic_candidates(keys, f"bench-c{name[0]}{n}-{run}", as_of)
                started = time.perf_counter()
                won = reserve_with(engine, sql, candidates, as_of)
                seconds[name].append(time.perf_counter() - started)
                assert won == keys, f"{name}: won {won} of {keys}"
    finally:
        with engine.begin() as conn:
            conn.execute(text("DELETE FROM dueflow_ledger WHERE flow_run_id = :id"), {"id": RUN_ID})
        engine.dispose()
    return seconds


def report(seconds: dict[str, list[float]], keys: int) -> list[str]:
    floor = statistics.median(seconds["floor"])
    lines = []
    for name, runs in seconds.items():
        share = "" if name == "floor" else f"  {floor / statistics.median(runs):4.0%} of the floor's speed"
        lines.append(f"{name:28} median {statistics.median(runs):6.3f} s of {[round(s, 3) for s in runs]}"
                     f"{share}")
    lines.append(f"({keys:,} new keys a round)")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=DEFAULT_URL)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--as-of", type=date.fromisoformat, default=date(2027, 6, 15))
    args = parser.parse_args(argv)
    engine = db.engine_for(args.database_url)
    print("machine:", describe_machine(machine_speed(engine)))
    engine.dispose()
    print("\n".join(report(measure(args.database_url, args.keys, args.rounds, args.as_of), args.keys)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
