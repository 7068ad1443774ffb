"""Database access: engines, schema, and every statement that touches the ledger.

This is the one module where dueflow writes to the database; the statements that
carry a guarantee are read from `sql/`.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, date, datetime
from functools import cache
from typing import Any

import pandas as pd
from sqlalchemy import Engine, bindparam, create_engine, event, inspect, make_url, text
from sqlalchemy.exc import ArgumentError, NoSuchModuleError

from blocks.settings import ConfigError
from sql import statement

# What a job hands to `reserve`: the ledger row to insert, plus `previous_by`, the
# latest as_of the previous step may carry for this step to be due (dunning only).
CANDIDATE_COLUMNS = ("key", "subject_id", "cycle", "step", "step_rank", "recipient", "previous_by")


@cache
def engine_for(url: str) -> Engine:
    """One engine per URL and process; SQLite gets WAL and serialised writers."""
    try:
        parsed = make_url(url)
        if parsed.drivername == "postgresql":
            # SQLAlchemy 2.1 defaults to psycopg 3; dueflow ships psycopg2.
            parsed = parsed.set(drivername="postgresql+psycopg2")
        if parsed.get_backend_name() == "sqlite":
            engine = create_engine(parsed, connect_args={"timeout": 60})
            _configure_sqlite(engine)
        else:
            engine = create_engine(parsed, pool_pre_ping=True, pool_size=8, max_overflow=8)
    except (ArgumentError, NoSuchModuleError, ValueError, ImportError) as exc:
        raise ConfigError(f"DUEFLOW_DATABASE_URL is not a usable database URL: {exc}") from None
    return engine


def _configure_sqlite(engine: Engine) -> None:
    # pysqlite's own transaction handling defers BEGIN; we take the write lock at
    # BEGIN (IMMEDIATE) so that check-then-insert in one transaction is atomic.
    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA busy_timeout=60000")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def dialect(engine: Engine) -> str:
    return "postgresql" if engine.dialect.name == "postgresql" else "sqlite"


# Ledger columns added after the first release: init_db adds them to an existing ledger.
LEDGER_ADDED_COLUMNS = {"sending_at": "timestamptz"}


def init_db(engine: Engine) -> None:
    """Create the source tables and the ledger if they are missing, and add ledger
    columns newer than the ledger (idempotent)."""
    script = re.sub(r"--[^\n]*", "", statement("schema"))  # the schema has no '--' in literals
    with engine.begin() as conn:
        for ddl in filter(None, (part.strip() for part in script.split(";"))):
            conn.exec_driver_sql(ddl)
        have = {column["name"] for column in inspect(conn).get_columns("dueflow_ledger")}
        for name, kind in LEDGER_ADDED_COLUMNS.items():
            if name not in have:
                conn.exec_driver_sql(f"ALTER TABLE dueflow_ledger ADD COLUMN {name} {kind}")


def read_frame(engine: Engine, sql: str, params: Mapping[str, Any]) -> pd.DataFrame:
    """Run one query and return its rows as a DataFrame (no per-row Python work)."""
    with engine.connect() as conn:
        result = conn.execute(text(sql), dict(params))
        return pd.DataFrame(result.fetchall(), columns=list(result.keys()))


def pg_array(values: Iterable[Any]) -> str:
    """A PostgreSQL array literal ('{"a","b",NULL}') of the values' text, None as NULL, for
    CAST(:x AS text[]) and friends: several times faster than letting psycopg2 adapt a
    list of 100,000 strings."""
    items = list(values)
    if items.count(None) == len(items):  # e.g. previous_by of renewals
        return "{" + ",".join(["NULL"] * len(items)) + "}"
    if None in items:
        return "{" + ",".join("NULL" if v is None else _quoted(str(v)) for v in items) + "}"
    # Escape and quote the joined text at once (C speed; twice as fast again), then
    # split it back at the separators: escaping is per character.
    joined = "\x00".join(map(str, items))
    if joined.count("\x00") != len(items) - 1:
        raise ValueError("text for PostgreSQL cannot contain NUL characters")
    return "{" + _quoted(joined).replace("\x00", '","') + "}"


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _nullable_list(column: pd.Series) -> list[Any]:
    """The column's values as Python objects, missing ones (NaN, NA, NaT) as None."""
    return column.astype(object).where(column.notna(), None).tolist()


RESERVE_STATEMENT = {"renewal": "reserve_renewals", "dunning": "reserve_dunning"}


def extract_frame(engine: Engine, sql: str, params: Mapping[str, Any]) -> pd.DataFrame:
    """One extraction query as a DataFrame of text columns (NULL → NA); the decide
    functions parse dates, amounts and flags themselves, vectorised. On PostgreSQL the
    rows stream through COPY … TO STDOUT as CSV: building a Python object per cell
    (Decimal, date, datetime) cost more than the query on a million-row night."""
    if dialect(engine) != "postgresql":
        return read_frame(engine, sql, params)
    compiled = str(text(sql).compile(dialect=engine.dialect))  # :name → %(name)s
    raw = engine.raw_connection()
    try:
        with raw.cursor() as cursor:
            query = cursor.mogrify(compiled, dict(params)).decode()
            buffer = io.StringIO()
            cursor.copy_expert(f"COPY ({query}) TO STDOUT WITH (FORMAT csv, HEADER true)", buffer)
        raw.rollback()
    finally:
        raw.close()
    buffer.seek(0)
    return pd.read_csv(buffer, dtype="string", keep_default_na=False, na_values=[""])


def reserve(
    engine: Engine,
    job: str,
    candidates: pd.DataFrame,
    as_of: date,
    flow_run_id: str | None,
    status: str = "pending",
) -> set[str]:
    """Insert the candidates' ledger rows in one statement; return the keys this run won.
    `status="adopted"` records them as handled without sending (taking over existing data)."""
    if candidates.empty:
        return set()
    # Sorted by key, the primary-key inserts walk the btree in order instead of landing
    # on random pages: about twice as fast for 100,000 keys.
    frame = candidates.reindex(columns=list(CANDIDATE_COLUMNS)).sort_values("key")
    columns = {name: _nullable_list(frame[name]) for name in CANDIDATE_COLUMNS}
    columns["step_rank"] = [int(v) for v in columns["step_rank"]]
    params: dict[str, Any] = {"as_of": as_of.isoformat(), "flow_run_id": flow_run_id,
                              "status": status}
    with engine.begin() as conn:
        if dialect(engine) == "postgresql":
            # Serialise reservations of one job (milliseconds) so the ordering
            # checks in the statement see every reservation committed before it.
            conn.execute(text("SELECT pg_advisory_xact_lock(hashtext(:lock))"),
                         {"lock": f"dueflow.reserve.{job}"})
            # The unnested candidates are materialised; at the default 4 MB a night of
            # 100,000 spills them to a temporary file.
            conn.execute(text("SET LOCAL work_mem = '64MB'"))
            params |= {
                "keys": pg_array(columns["key"]),
                "subject_ids": pg_array(columns["subject_id"]),
                "cycles": pg_array(columns["cycle"]),
                "steps": pg_array(columns["step"]),
                "step_ranks": pg_array(columns["step_rank"]),
                "recipients": pg_array(columns["recipient"]),
                "previous_by": pg_array(columns["previous_by"]),
            }
            rows = conn.execute(text(statement(RESERVE_STATEMENT[job], "postgresql")), params)
        else:
            conn.exec_driver_sql(
                "CREATE TEMP TABLE IF NOT EXISTS candidate (key text PRIMARY KEY, subject_id text,"
                " cycle text, step text, step_rank integer, recipient text, previous_by text)"
            )
            conn.exec_driver_sql("DELETE FROM candidate")
            conn.exec_driver_sql(
                "INSERT INTO candidate VALUES (?, ?, ?, ?, ?, ?, ?)",
                list(zip(*columns.values(), strict=True)),
            )
            rows = conn.execute(text(statement(RESERVE_STATEMENT[job], "sqlite")), params)
        won = {row[0] for row in rows}
    return won


# The arrays sql/store_messages.postgresql.sql takes, and the message field in each.
STORE_ARRAYS = {"keys": "key", "recipients": "recipient", "subjects": "subject",
                "bodies_text": "body_text", "bodies_html": "body_html",
                "message_ids": "message_id", "draft_sources": "draft_source",
                "draft_notes": "draft_note"}
STORE_CHUNK = 5_000  # messages per statement: keeps each set of array literals to a few MB


def store_messages(engine: Engine, messages: Sequence[Mapping[str, Any]]) -> None:
    """Write the rendered messages onto their reserved rows before any is sent (G2)."""
    if not messages:
        return
    rows = [{"draft_source": None, "draft_note": None} | dict(m) for m in messages]
    engine_dialect = dialect(engine)
    update = text(statement("store_messages", engine_dialect))
    with engine.begin() as conn:
        if engine_dialect == "sqlite":  # executemany stays in process: no round trips
            conn.execute(update, rows)
            return
        for start in range(0, len(rows), STORE_CHUNK):
            chunk = rows[start:start + STORE_CHUNK]
            conn.execute(update, {param: pg_array(row[field] for row in chunk)
                                  for param, field in STORE_ARRAYS.items()})


def claim_sending(engine: Engine, keys: Sequence[str]) -> set[str]:
    """Claim pending rows for one delivery, just before it sends; returns the keys it
    may send. A batch executed twice gets nothing the second time."""
    if not keys:
        return set()
    engine_dialect = dialect(engine)
    values = pg_array(keys) if engine_dialect == "postgresql" else json.dumps(list(keys))
    with engine.begin() as conn:
        rows = conn.execute(text(statement("claim_sending", engine_dialect)), {"keys": values})
        return {row[0] for row in rows}


def ledger_status(engine: Engine, keys: Sequence[str]) -> dict[str, str]:
    """The current status of each of these keys that is in the ledger."""
    if not keys:
        return {}
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT key, status FROM dueflow_ledger WHERE key IN :keys")
                            .bindparams(bindparam("keys", expanding=True)), {"keys": list(keys)})
        return {key: status for key, status in rows}


RECORD_OUTCOME = text(
    """
    UPDATE dueflow_ledger
    SET status = :status, smtp_response = :smtp_response, error = :error,
        permanent = :permanent, retry_after = :retry_after,
        sent_at = CASE WHEN :status = 'sent' THEN CURRENT_TIMESTAMP ELSE sent_at END,
        updated_at = CURRENT_TIMESTAMP
    WHERE key = :key AND status = 'pending'
    """
)


def utc_stamp(moment: datetime) -> str:
    """One text form for timestamps dueflow compares itself (both backends)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S+00:00")


def outcome_row(
    key: str,
    status: str,
    smtp_response: str | None,
    error: str | None,
    *,
    permanent: bool = False,
    retry_after: datetime | None = None,
) -> dict[str, Any]:
    """Parameters of RECORD_OUTCOME for one send: `sent`, `failed` (retryable after
    `retry_after` unless `permanent`), or still `pending` with the error."""
    return {"key": key, "status": status, "smtp_response": smtp_response, "error": error,
            "permanent": permanent,
            "retry_after": utc_stamp(retry_after) if retry_after and not permanent else None}


def record_outcomes(engine: Engine, outcomes: Sequence[Mapping[str, Any]]) -> None:
    """Settle rows after their sends, in one transaction (rows built by `outcome_row`)."""
    if outcomes:
        with engine.begin() as conn:
            conn.execute(RECORD_OUTCOME, [dict(o) for o in outcomes])


def claim_retries(
    engine: Engine, as_of: date, flow_run_id: str | None, max_attempts: int
) -> pd.DataFrame:
    """Atomically claim the failed rows due for another attempt; returns their stored
    messages (key, job, recipient, subject, body_text, body_html, message_id)."""
    params = {"as_of": as_of.isoformat(), "flow_run_id": flow_run_id,
              "max_attempts": max_attempts, "now": utc_stamp(datetime.now(UTC))}
    with engine.begin() as conn:
        result = conn.execute(text(statement("claim_retries", dialect(engine))), params)
        return pd.DataFrame(result.fetchall(), columns=list(result.keys()))


def resolve_pending(engine: Engine, key: str, outcome: str, note: str) -> bool:
    """An operator settles a pending row: `sent`, or `failed` (then retryable)."""
    with engine.begin() as conn:
        result = conn.execute(
            text(
                "UPDATE dueflow_ledger SET status = :outcome, error = :note, permanent = false,"
                " retry_after = NULL, updated_at = CURRENT_TIMESTAMP,"
                " sent_at = CASE WHEN :outcome = 'sent' THEN CURRENT_TIMESTAMP ELSE sent_at END"
                " WHERE key = :key AND status = 'pending'"
            ),
            {"key": key, "outcome": outcome, "note": note},
        )
        return result.rowcount == 1


# The columns dueflow reads; a user's own tables must have at least these.
REQUIRED_COLUMNS = {
    "contracts": {"id", "vendor", "title", "amount", "currency", "renewal_date", "notify_email",
                  "status"},
    "clients": {"id", "name", "email", "locale", "notes", "dunning_paused"},
    "invoices": {"id", "client_id", "number", "amount", "currency", "status", "sent_at",
                 "due_date", "paid_at"},
    "dueflow_ledger": {"key", "status", "permanent", "retry_after", "draft_source", "sending_at"},
    "dueflow_quarantine": {"job", "source_id", "reason"},
}


def schema_problems(engine: Engine) -> list[str]:
    """What is missing for a run: tables, or columns of the public contract."""
    inspector = inspect(engine)
    tables = set(inspector.get_table_names())
    problems = [f"table {name} is missing" for name in REQUIRED_COLUMNS if name not in tables]
    for name, needed in REQUIRED_COLUMNS.items():
        if name in tables:
            have = {column["name"] for column in inspector.get_columns(name)}
            if missing := sorted(needed - have):
                problems.append(f"table {name} has no column(s) {', '.join(missing)}")
    return problems


QUARANTINE = text(
    """
    INSERT INTO dueflow_quarantine (job, source_id, reason, first_as_of, last_as_of, flow_run_id)
    VALUES (:job, :source_id, :reason, :as_of, :as_of, :flow_run_id)
    ON CONFLICT (job, source_id, reason) DO UPDATE
    SET last_as_of = excluded.last_as_of, flow_run_id = excluded.flow_run_id,
        times_seen = dueflow_quarantine.times_seen + 1
    """
)


def quarantine(
    engine: Engine, job: str, rows: pd.DataFrame, as_of: date, flow_run_id: str | None
) -> None:
    """Keep bad rows with their reason (G6), one row per (job, source row, reason)."""
    if rows.empty:
        return
    params = [
        {"job": job, "source_id": str(source_id), "reason": reason,
         "as_of": as_of.isoformat(), "flow_run_id": flow_run_id}
        for source_id, reason in zip(rows["source_id"], rows["reason"], strict=True)
    ]
    with engine.begin() as conn:
        conn.execute(QUARANTINE, params)


LEDGER_COLUMNS = (
    "key", "status", "as_of", "attempts", "recipient", "subject", "error",
    "smtp_response", "flow_run_id", "created_at", "updated_at", "sending_at", "sent_at",
)


def ledger_rows(engine: Engine, status: str | None = None) -> pd.DataFrame:
    """Ledger rows, optionally of one status, oldest first."""
    sql = f"SELECT {', '.join(LEDGER_COLUMNS)} FROM dueflow_ledger"
    params = {}
    if status:
        sql += " WHERE status = :status"
        params["status"] = status
    frame = read_frame(engine, sql + " ORDER BY created_at, key", params)
    frame["as_of"] = frame["as_of"].astype(str)
    return frame


def unsettled_rows(engine: Engine, limit: int = 50) -> pd.DataFrame:
    """The oldest pending and failed rows of the whole ledger, for the run report."""
    return read_frame(
        engine,
        "SELECT key, status, attempts, permanent, error, sending_at FROM dueflow_ledger"
        " WHERE status IN ('pending', 'failed') ORDER BY created_at, key LIMIT :limit",
        {"limit": limit},
    )


def unsettled_counts(engine: Engine) -> dict[str, int]:
    """How many rows in the whole ledger are still pending or failed."""
    frame = read_frame(
        engine,
        "SELECT status, COUNT(*) AS n FROM dueflow_ledger WHERE status IN ('pending', 'failed')"
        " GROUP BY status",
        {},
    )
    counts = dict(zip(frame["status"], frame["n"], strict=True))
    return {"pending": int(counts.get("pending", 0)), "failed": int(counts.get("failed", 0))}
