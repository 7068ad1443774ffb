"""The machine line every benchmark prints: two fixed workloads, so that figures from
different days can be compared (the same 2-core VM kind has measured twice as slow on one
day as on another), and the PostgreSQL settings that move them."""

from __future__ import annotations

import os
import time
from typing import Any

# The database the benchmarks use when not told otherwise (bench.nights makes its own).
DEFAULT_URL = "postgresql+psycopg2://postgres@127.0.0.1:5432/dueflow_nights_1x"


def machine_speed(engine: Any) -> dict[str, Any]:
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
    return {"cpus": os.cpu_count(), "python_loop_10m_seconds": round(python_seconds, 3),
            "postgres_count_5m_seconds": round(postgres_seconds, 3), "postgres": settings}


def describe_machine(machine: dict[str, Any]) -> str:
    pg = machine.get("postgres", {})
    return (f"{machine['cpus']} CPUs; a Python loop of 10M additions {machine['python_loop_10m_seconds']} s,"
            f" PostgreSQL count(*) of 5M generated rows {machine['postgres_count_5m_seconds']} s;"
            f" PostgreSQL {pg.get('server_version')}, shared_buffers {pg.get('shared_buffers')},"
            f" synchronous_commit {pg.get('synchronous_commit')}")
