"""Bench-only experiments behind the proposals: each times dueflow's current code against
a candidate replacement, on the data a `python -m bench.run` left in the bench database
(its history ledger), and checks that the replacement gives the same result.

    .venv/bin/python -m bench.experiments [--only NAME ...] [--json bench/out/experiments.json]

Nothing here changes dueflow's files: the replacements live in this module. Rows the
experiments add to the ledger are tagged and deleted; the surge experiment sets the
ledger aside and restores it.
"""

from __future__ import annotations

import argparse
import io
import json
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import Any

import pandas as pd
from sqlalchemy import Engine, text

from bench.generate import DELAYS, ESCALATION_TO, LEADS
from bench.measure import delete_run_rows, synthetic_candidates, timed
from bench.run import DEFAULT_URL
from sql import statement
from tasks import db
from tasks.decide import due_dunning_steps, due_renewal_alerts, renewal_window

# --------------------------------------------------------------------------- replacements

def read_frame_copy(engine: Engine, sql: str, params: Mapping[str, Any]) -> pd.DataFrame:
    """Proposed tasks.db.read_frame on PostgreSQL: COPY (query) TO STDOUT as CSV, parsed by
    pandas' C reader, instead of one Python object per value (Decimal, datetime, Row).
    Values arrive as text where pandas cannot infer a number; decide parses them anyway."""
    compiled = text(sql).compile(dialect=engine.dialect)
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        query = cursor.mogrify(compiled.string, compiled.construct_params(dict(params))).decode()
        buffer = io.BytesIO()
        cursor.copy_expert(f"COPY ({query}) TO STDOUT WITH (FORMAT csv, HEADER)", buffer)
        raw.commit()
    finally:
        raw.close()
    buffer.seek(0)
    return pd.read_csv(buffer, keep_default_na=False, na_values=[""], dtype_backend="numpy_nullable")


def read_frame_tuples(engine: Engine, sql: str, params: Mapping[str, Any]) -> pd.DataFrame:
    """Proposed tasks.db.read_frame: the same query through SQLAlchemy, but the rows handed
    to pandas as plain tuples. pd.DataFrame(list of Row) takes a per-row slow path."""
    with engine.connect() as conn:
        result = conn.execute(text(sql), dict(params))
        columns = list(result.keys())
        return pd.DataFrame.from_records([tuple(row) for row in result], columns=columns)


def read_frame_cursor(engine: Engine, sql: str, params: Mapping[str, Any]) -> pd.DataFrame:
    """Alternative: the DBAPI cursor directly (no SQLAlchemy Row objects)."""
    compiled = text(sql).compile(dialect=engine.dialect)
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        cursor.execute(compiled.string, compiled.construct_params(dict(params)))
        columns = [d[0] for d in cursor.description]
        rows = cursor.fetchall()
        raw.commit()
    finally:
        raw.close()
    return pd.DataFrame.from_records(rows, columns=columns)


def pg_array(values: Sequence[object]) -> str:
    """One PostgreSQL array literal ('{"a","b",NULL}'): a single text parameter that the
    server parses with array_in, instead of psycopg2's ARRAY['a','b',...] expression of
    one constant per element that the parser and planner walk one by one."""
    def item(value: object) -> str:
        if value is None:
            return "NULL"
        return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
    return "{" + ",".join(map(item, values)) + "}"


def reserve_literals(engine: Engine, job: str, candidates: pd.DataFrame, as_of: date,
                     flow_run_id: str | None, status: str = "pending") -> set[str]:
    """tasks.db.reserve (PostgreSQL branch) with the arrays passed as literals; same SQL."""
    frame = candidates.reindex(columns=list(db.CANDIDATE_COLUMNS)).astype(object)
    frame = frame.where(frame.notna(), None)
    params: dict[str, Any] = {"as_of": as_of.isoformat(), "flow_run_id": flow_run_id, "status": status}
    names = {"keys": "key", "subject_ids": "subject_id", "cycles": "cycle", "steps": "step",
             "step_ranks": "step_rank", "recipients": "recipient", "previous_by": "previous_by"}
    params |= {param: pg_array(frame[column].tolist()) for param, column in names.items()}
    with engine.begin() as conn:
        conn.execute(text("SELECT pg_advisory_xact_lock(hashtext(:lock))"),
                     {"lock": f"dueflow.reserve.{job}"})
        rows = conn.execute(text(statement(db.RESERVE_STATEMENT[job], "postgresql")), params)
        return {row[0] for row in rows}


# sql/reserve_dunning.postgresql.sql with the live-row checks as one correlated EXISTS:
# both lookups go through primary keys whatever the planner believes about the candidates
# (the joins turn into a seq scan of clients per candidate when it expects one row).
RESERVE_DUNNING_EXISTS = """
INSERT INTO dueflow_ledger (key, job, subject_id, cycle, step, step_rank, recipient, as_of, flow_run_id,
                            status)
SELECT c.key, 'dunning', c.subject_id, c.cycle, c.step, c.step_rank, c.recipient,
       CAST(:as_of AS date), :flow_run_id, :status
FROM unnest(CAST(:keys AS text[]), CAST(:subject_ids AS text[]), CAST(:cycles AS text[]),
            CAST(:steps AS text[]), CAST(:step_ranks AS integer[]), CAST(:recipients AS text[]),
            CAST(:previous_by AS date[]))
     AS c(key, subject_id, cycle, step, step_rank, recipient, previous_by)
WHERE EXISTS (SELECT 1 FROM invoices i JOIN clients cl ON cl.id = i.client_id
              WHERE i.id = c.subject_id AND i.status = 'sent' AND i.paid_at IS NULL
                AND cl.dunning_paused IS NOT TRUE)
  AND COALESCE((SELECT MAX(l.step_rank) FROM dueflow_ledger l
                WHERE l.job = 'dunning' AND l.subject_id = c.subject_id), 0) = c.step_rank - 1
  AND (c.step_rank = 1 OR EXISTS (
        SELECT 1 FROM dueflow_ledger l
        WHERE l.job = 'dunning' AND l.subject_id = c.subject_id
          AND l.step_rank = c.step_rank - 1 AND l.as_of <= c.previous_by))
ON CONFLICT (key) DO NOTHING
RETURNING key
"""

STORE_MESSAGES_UNNEST = """
UPDATE dueflow_ledger l
SET recipient = m.recipient, subject = m.subject, body_text = m.body_text, body_html = m.body_html,
    message_id = m.message_id, draft_source = m.draft_source, draft_note = m.draft_note,
    attempts = l.attempts + 1, updated_at = CURRENT_TIMESTAMP
FROM unnest(CAST(:key AS text[]), CAST(:recipient AS text[]), CAST(:subject AS text[]),
            CAST(:body_text AS text[]), CAST(:body_html AS text[]), CAST(:message_id AS text[]),
            CAST(:draft_source AS text[]), CAST(:draft_note AS text[]))
     AS m(key, recipient, subject, body_text, body_html, message_id, draft_source, draft_note)
WHERE l.key = m.key AND l.status = 'pending'
"""


def store_messages_unnest(engine: Engine, messages: Sequence[Mapping[str, Any]]) -> None:
    """Proposed tasks.db.store_messages on PostgreSQL: one UPDATE … FROM unnest for the
    whole night instead of psycopg2's executemany (one round trip per row)."""
    if not messages:
        return
    columns = ("key", "recipient", "subject", "body_text", "body_html", "message_id",
               "draft_source", "draft_note")
    params = {c: pg_array([m.get(c) for m in messages]) for c in columns}
    with engine.begin() as conn:
        conn.execute(text(STORE_MESSAGES_UNNEST), params)


# --------------------------------------------------------------------------- experiments

def best_of(fn: Callable[[], Any], repeats: int = 3) -> tuple[Any, float]:
    results = [timed(fn) for _ in range(repeats)]
    return results[0][0], min(t for _, t in results)


def decisions_equal(a: Any, b: Any) -> bool:
    def keyed(d: Any) -> pd.DataFrame:
        return d.due[["key", "handled", "recipient"]].astype(str).sort_values("key").reset_index(drop=True)

    def bad(d: Any) -> pd.DataFrame:
        return d.quarantined.astype(str).sort_values(["source_id", "reason"]).reset_index(drop=True)

    return keyed(a).equals(keyed(b)) and bad(a).equals(bad(b))


def exp_read_frame(url: str, as_of: date) -> dict[str, Any]:
    """The five extract queries with db.read_frame vs COPY→read_csv vs raw cursor, and
    the decisions taken from each (must be identical)."""
    engine = db.engine_for(url)
    start, end = renewal_window(as_of, LEADS)
    queries = {
        "extract_contracts": (statement("extract_contracts", "postgresql"),
                              {"window_start": start.isoformat(), "window_end": end.isoformat()}),
        "renewal_history": (statement("renewal_history"), {"as_of": as_of.isoformat()}),
        "extract_invoices": (statement("extract_invoices"), {}),
        "extract_clients": (statement("extract_clients"), {}),
        "dunning_history": (statement("dunning_history"), {}),
    }
    out: dict[str, Any] = {}
    frames: dict[str, dict[str, pd.DataFrame]] = {}
    readers: tuple[tuple[str, Callable[..., pd.DataFrame]], ...] = (
        ("read_frame", db.read_frame), ("tuples", read_frame_tuples), ("copy_csv", read_frame_copy),
        ("raw_cursor", read_frame_cursor))
    for label, reader in readers:
        frames[label] = {}
        seconds = {}
        for name, (sql, params) in queries.items():
            frames[label][name], seconds[name] = best_of(
                lambda s=sql, p=params, r=reader: r(engine, s, p))
        out[label] = {"seconds": {k: round(v, 3) for k, v in seconds.items()},
                      "total": round(sum(seconds.values()), 3)}

    def decide(f: dict[str, pd.DataFrame]) -> tuple[Any, Any]:
        return (due_renewal_alerts(f["extract_contracts"], f["renewal_history"], as_of, LEADS),
                due_dunning_steps(f["extract_invoices"], f["extract_clients"], f["dunning_history"],
                                  as_of, DELAYS, "UTC", ESCALATION_TO))

    base = decide(frames["read_frame"])
    for label in ("tuples", "copy_csv", "raw_cursor"):
        (renewals, dunning), seconds = timed(lambda lb=label: decide(frames[lb]))
        out[label]["decide_seconds"] = round(seconds, 3)
        out[label]["same_decisions"] = (decisions_equal(renewals, base[0])
                                        and decisions_equal(dunning, base[1]))
    _, out["read_frame"]["decide_seconds"] = timed(lambda: decide(frames["read_frame"]))
    return out


def exp_reserve(url: str, as_of: date, keys: int) -> dict[str, Any]:
    """db.reserve vs the same statement fed with array literals, 100k new keys each, and
    where the time goes (client-side quoting vs server)."""
    engine = db.engine_for(url)
    out: dict[str, Any] = {}
    for label, reserve in (("db.reserve", db.reserve), ("array_literals", reserve_literals)):
        tag = f"bench-exp-{label}"
        delete_run_rows(url, tag)
        candidates = synthetic_candidates(keys, f"bench-x{len(out)}", as_of)
        won, first = timed(lambda r=reserve, c=candidates, t=tag: r(engine, "renewal", c, as_of, t))
        rewon, again = timed(lambda r=reserve, c=candidates, t=tag: r(engine, "renewal", c, as_of, t))
        out[label] = {"first_seconds": round(first, 3), "first_won": len(won),
                      "keys_per_second": round(keys / first), "rerun_seconds": round(again, 3),
                      "rerun_won": len(rewon)}
        delete_run_rows(url, tag)
    # Client side only: how long psycopg2 takes to quote the lists into the SQL text.
    candidates = synthetic_candidates(keys, "bench-q", as_of)
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        lists = {c: candidates[c].tolist() for c in ("key", "subject_id", "cycle", "step", "recipient")}
        _, out["psycopg2_quote_lists_seconds"] = timed(
            lambda: cursor.mogrify("SELECT %s, %s, %s, %s, %s", list(lists.values())))
        _, out["pg_array_literals_seconds"] = timed(lambda: [pg_array(v) for v in lists.values()])
        raw.rollback()
    finally:
        raw.close()
    return out


def exp_store_messages(url: str, as_of: date, count: int) -> dict[str, Any]:
    """db.store_messages (executemany) vs one UPDATE … FROM unnest, `count` rows each."""
    from tasks.compose import compose_renewal_alerts

    engine = db.engine_for(url)
    out: dict[str, Any] = {}
    for label, store in (("db.store_messages", db.store_messages),
                         ("update_from_unnest", store_messages_unnest)):
        tag = f"bench-exp-store-{len(out)}"
        delete_run_rows(url, tag)
        candidates = synthetic_candidates(count, f"bench-s{len(out)}", as_of)
        db.reserve(engine, "renewal", candidates, as_of, tag)
        due = candidates.assign(vendor="Vendor", title="Contract", amount=1250.5, currency="EUR",
                                renewal_date=pd.to_datetime(candidates["cycle"]).dt.date, days_left=30)
        emails, _ = compose_renewal_alerts(due, "en", "alerts@dueflow.bench")
        rows = [e.as_row() for e in emails]
        _, seconds = timed(lambda s=store, r=rows: s(engine, r))
        with engine.connect() as conn:
            stored = conn.execute(text(
                "SELECT count(*) FROM dueflow_ledger WHERE flow_run_id = :t"
                " AND body_text IS NOT NULL AND attempts = 1"), {"t": tag}).scalar_one()
        out[label] = {"seconds": round(seconds, 3), "rows_per_second": round(count / seconds),
                      "rows_stored": int(stored)}
        delete_run_rows(url, tag)
    return out


def exp_unsettled_index(url: str) -> dict[str, Any]:
    """Per-key UPDATE … AND status = 'pending' after a big reservation with stale
    statistics, in a scratch schema: the partial index on (status) is chosen and each
    UPDATE scans every pending row. Compares the index definitions and the ANALYZE fix."""
    admin = db.engine_for(url)
    with admin.begin() as conn:
        conn.exec_driver_sql("DROP SCHEMA IF EXISTS bench_exp CASCADE")
        conn.exec_driver_sql("CREATE SCHEMA bench_exp")
    scratch = f"{url}?options=-csearch_path%3Dbench_exp"
    engine = db.engine_for(scratch)
    out: dict[str, Any] = {}
    variants = [
        ("index (status) — sql/schema.sql today", None, False),
        ("same + ANALYZE after the reservation", None, True),
        ("index (status, key)", "(status, key)", False),
    ]
    for label, columns, analyze in variants:
        with engine.begin() as conn:
            conn.exec_driver_sql("DROP TABLE IF EXISTS dueflow_ledger")
        db.init_db(engine)
        with engine.begin() as conn:
            if columns:
                conn.exec_driver_sql("DROP INDEX dueflow_ledger_unsettled")
                conn.exec_driver_sql(f"CREATE INDEX dueflow_ledger_unsettled ON dueflow_ledger {columns}"
                                     " WHERE status IN ('pending', 'failed')")
            conn.exec_driver_sql(
                "INSERT INTO dueflow_ledger (key, job, subject_id, cycle, step, step_rank, as_of, status)"
                " SELECT 'h' || g, 'renewal', 's' || g, '2026-07-01', '30d', 30, '2026-06-15', 'sent'"
                " FROM generate_series(1, 500000) g")
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("VACUUM ANALYZE dueflow_ledger")
        with engine.begin() as conn:  # tonight's reservation: 50,000 pending rows
            conn.exec_driver_sql(
                "INSERT INTO dueflow_ledger (key, job, subject_id, cycle, step, step_rank, as_of)"
                " SELECT 'k' || g, 'renewal', 's' || g, '2027-07-01', '30d', 30, '2027-06-15'"
                " FROM generate_series(1, 50000) g")
            if analyze:
                conn.exec_driver_sql("ANALYZE dueflow_ledger")
        rows = [{"key": f"k{i}", "recipient": "r@x.example", "subject": "s", "body_text": "b" * 400,
                 "body_html": "h" * 700, "message_id": f"<{i}@x>"} for i in range(1, 2001)]
        _, seconds = timed(lambda r=rows: db.store_messages(engine, r))
        with engine.connect() as conn:
            plan = conn.execute(text("EXPLAIN UPDATE dueflow_ledger SET attempts = attempts + 1"
                                     " WHERE key = 'k777' AND status = 'pending'")).scalars().all()
        out[label] = {"store_2000_seconds": round(seconds, 3), "ms_per_row": round(seconds / 2, 3),
                      "plan": plan[1].strip()}
    engine.dispose()
    with admin.begin() as conn:
        conn.exec_driver_sql("DROP SCHEMA bench_exp CASCADE")
    return out


def exp_surge_reserve(url: str, as_of: date) -> dict[str, Any]:
    """The surge's reservations on a fresh ledger (the history set aside), statement by
    statement, with the plan of the dunning reservation."""
    from bench.generate import restore_ledger, stash_ledger

    engine = db.engine_for(url)
    start, end = renewal_window(as_of, LEADS)
    stash_ledger(engine)
    out: dict[str, Any] = {}
    try:
        contracts = db.read_frame(engine, statement("extract_contracts", "postgresql"),
                                  {"window_start": start.isoformat(), "window_end": end.isoformat()})
        history = db.read_frame(engine, statement("renewal_history"), {"as_of": as_of.isoformat()})
        renewals = due_renewal_alerts(contracts, history, as_of, LEADS).to_reserve
        invoices = db.read_frame(engine, statement("extract_invoices"), {})
        clients = db.read_frame(engine, statement("extract_clients"), {})
        dunning_history = db.read_frame(engine, statement("dunning_history"), {})
        dunning = due_dunning_steps(invoices, clients, dunning_history, as_of, DELAYS, "UTC",
                                    ESCALATION_TO).to_reserve
        won_r, out["renewal_seconds"] = timed(lambda: db.reserve(engine, "renewal", renewals, as_of, "x"))
        out["renewal_keys"] = len(won_r)
        with engine.connect() as conn:
            out["ledger_stats_after_renewals"] = conn.execute(text(
                "SELECT relpages, reltuples FROM pg_class WHERE relname = 'dueflow_ledger'")).one()._asdict()
        # The dunning statement: its plan, the EXISTS variant (rolled back), then db.reserve.
        frame = dunning.reindex(columns=list(db.CANDIDATE_COLUMNS)).astype(object)
        frame = frame.where(frame.notna(), None)
        params = {"as_of": as_of.isoformat(), "flow_run_id": "x", "status": "pending"} | {
            p: pg_array(frame[c].tolist()) for p, c in (
                ("keys", "key"), ("subject_ids", "subject_id"), ("cycles", "cycle"), ("steps", "step"),
                ("step_ranks", "step_rank"), ("recipients", "recipient"), ("previous_by", "previous_by"))}
        with engine.connect() as conn:
            plan = conn.execute(text("EXPLAIN " + statement("reserve_dunning", "postgresql")),
                                params).scalars().all()
            conn.rollback()
        out["dunning_plan"] = plan
        with engine.connect() as conn:
            rows, out["dunning_exists_seconds"] = timed(
                lambda: conn.execute(text(RESERVE_DUNNING_EXISTS), params).all())
            out["dunning_exists_keys"] = len(rows)
            conn.rollback()
        won_d, out["dunning_seconds"] = timed(lambda: db.reserve(engine, "dunning", dunning, as_of, "x"))
        out["dunning_keys"] = len(won_d)
    finally:
        restore_ledger(engine)
    return out


EXPERIMENTS: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {
    "read_frame": lambda a: exp_read_frame(a.database_url, a.as_of),
    "reserve": lambda a: exp_reserve(a.database_url, a.as_of, a.reserve_keys),
    "store_messages": lambda a: exp_store_messages(a.database_url, a.as_of, a.store_rows),
    "unsettled_index": lambda a: exp_unsettled_index(a.database_url),
    "surge_reserve": lambda a: exp_surge_reserve(a.database_url, a.as_of),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.experiments", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", choices=sorted(EXPERIMENTS), default=None)
    parser.add_argument("--as-of", type=date.fromisoformat, default=date(2027, 6, 15))
    parser.add_argument("--database-url", default=DEFAULT_URL)
    parser.add_argument("--reserve-keys", type=int, default=100_000)
    parser.add_argument("--store-rows", type=int, default=20_000)
    parser.add_argument("--json", default="bench/out/experiments.json")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {}
    for name in args.only or EXPERIMENTS:
        print(f"[{time.strftime('%H:%M:%S')}] experiment {name}", flush=True)
        results[name] = EXPERIMENTS[name](args)
        print(json.dumps(results[name], indent=2, default=str), flush=True)
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, default=str))
    print(f"written to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
