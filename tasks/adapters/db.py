"""Database access: engines, schema, and every statement that touches the ledger.

This is the one module where dueflow writes to the database; the statements that
carry a guarantee are read from `sql/`.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import secrets
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from functools import cache
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, inspect, make_url, text
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, SQLAlchemyError

from dueflow.blocks.errors import ConfigError
from dueflow.sql import statement
from dueflow.tasks.adapters.db_errors import CANCELED, database_problem, sqlstate, transient
from dueflow.tasks.adapters.sources import ResolvedSources, resolve_sources
from dueflow.tasks.core.bounces import copy_digests
from dueflow.tasks.core.defaults import DB_LOCK_TIMEOUT
from dueflow.tasks.core.frames import pd, records
from dueflow.tasks.core.keys import Job, dunning_key, id_forms, parse_key, renewal_key
from dueflow.tasks.core.message import OutgoingEmail, whole_statements, with_riders
from dueflow.tasks.core.outcomes import utc_stamp
from dueflow.tasks.core.sources import DEFAULT_MAPPING, SourceMapping
from dueflow.tasks.core.text import VALID_UTF8
from dueflow.tasks.core.validate import business_dates

# What a job hands to `reserve`: the ledger row to insert, plus `previous_by`, the
# latest as_of the previous step may carry for this step to be due, and `payment_state`,
# what the extract read the open amount from (dunning only).
CANDIDATE_COLUMNS = ("key", "subject_id", "subject_form", "cycle", "step", "step_rank", "recipient",
                     "previous_by", "payment_state")


def engine_for(url: str, lock_timeout: float = DB_LOCK_TIMEOUT, ledger_schema: str | None = None) -> Engine:
    """One engine per URL and process; SQLite gets WAL, serialised writers, and waits up to
    `lock_timeout` seconds for a file another process is writing to. With `ledger_schema`
    (DUEFLOW_LEDGER_SCHEMA, PostgreSQL), dueflow's own tables are found there first."""
    # One cache key however the caller spells the arguments: `engine_for(url)` and
    # `engine_for(url, 30)` must share one pool, or each holds its own connections. Under a
    # lock: the delivery threads of a fresh Dask worker asked at once, made two pools, and
    # raced SQLAlchemy's first import of the dialect (AttributeError: no attribute 'postgresql').
    with _ENGINES:
        return _engine(url, float(lock_timeout), ledger_schema or None)


_ENGINES = threading.Lock()


@cache
def _engine(url: str, lock_timeout: float, ledger_schema: str | None = None) -> Engine:
    from dueflow.blocks.urls import read_url

    read_url(url, "DUEFLOW_DATABASE_URL")  # a password that moved the host: one line, not shown
    try:
        parsed = make_url(url)
        if parsed.drivername == "postgresql":
            # SQLAlchemy 2.1 defaults to psycopg 3; dueflow ships psycopg2.
            parsed = parsed.set(drivername="postgresql+psycopg2")
        if parsed.get_backend_name() == "sqlite":
            # hide_parameters: an error's text never carries a statement's values (client
            # addresses, ids) into a terminal or Prefect's logs (issue 36).
            engine = create_engine(parsed, connect_args={"timeout": lock_timeout}, hide_parameters=True)
            _configure_sqlite(engine, lock_timeout)
        else:
            # application_name: an operator sees dueflow's sessions in pg_stat_activity
            # (unless the URL names them itself: ?application_name=…).
            names = {} if "application_name" in parsed.query else {"application_name": "dueflow"}
            engine = create_engine(parsed, pool_pre_ping=True, pool_size=8, max_overflow=8,
                                   connect_args=names, hide_parameters=True)
            if ledger_schema:
                _put_ledger_first(engine, ledger_schema)
    except (ArgumentError, NoSuchModuleError, ValueError, ImportError) as exc:
        from dueflow.blocks.urls import scrub, url_secrets

        reason = scrub(str(exc), url_secrets(url, "DUEFLOW_DATABASE_URL"))
        raise ConfigError(f"DUEFLOW_DATABASE_URL is not a usable database URL: {reason}") from None
    if ledger_schema and engine.dialect.name != "postgresql":
        raise ConfigError("DUEFLOW_LEDGER_SCHEMA is for PostgreSQL: SQLite has no schemas (leave it unset)")
    return engine


def _put_ledger_first(engine: Engine, schema: str) -> None:
    # Every session looks for dueflow's own tables (unqualified in sql/) in the ledger
    # schema first; the sources are always read by their qualified names
    # (tasks/adapters/sources.py), so the search path never decides which data is read.
    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        with dbapi_connection.cursor() as cursor:
            cursor.execute("SELECT set_config('search_path', quote_ident(%s) || ', '"
                           " || current_setting('search_path'), false)", (schema,))
        dbapi_connection.commit()


@dataclass(frozen=True)
class Database:
    """Where the sources and the ledger are: what every step and delivery batch is given
    (small and picklable: a batch may run on a Dask worker). `sources` is set once the
    source relations have been found and checked (`with_sources`)."""

    url: str = field(repr=False)  # may hold a password
    lock_timeout: float = DB_LOCK_TIMEOUT
    ledger_schema: str | None = None
    sources: ResolvedSources | None = None

    @property
    def engine(self) -> Engine:
        return engine_for(self.url, self.lock_timeout, self.ledger_schema)

    @property
    def dialect(self) -> str:
        return dialect(self.engine)

    def with_sources(self, mapping: SourceMapping = DEFAULT_MAPPING, source_schema: str | None = None,
                     timezone: str = "UTC") -> Database:
        """This database with its source relations found and checked (SourceError if one
        cannot be read): no row is read, nothing is written."""
        return replace(self, sources=resolve_sources(self.engine, mapping, source_schema, timezone))

    def source_statement(self, name: str) -> str:
        """sql/<name>, reading the sources through their projections."""
        if self.sources is None:
            raise RuntimeError("the sources were not resolved (Database.with_sources)")
        return self.sources.statement(name)


def _surrogate_text(data: bytes) -> str:
    # Text that is not UTF-8 arrives as surrogate escapes instead of stopping the query
    # (G6): the decide functions quarantine the row that holds it.
    return data.decode("utf-8", "surrogateescape")


def _configure_sqlite(engine: Engine, lock_timeout: float) -> None:
    # pysqlite's own transaction handling defers BEGIN; we take the write lock at
    # BEGIN (IMMEDIATE) so that check-then-insert in one transaction is atomic.
    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        dbapi_connection.text_factory = _surrogate_text
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute(f"PRAGMA busy_timeout={int(lock_timeout * 1000)}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection: Any) -> None:
        # Writers take the write lock at BEGIN (IMMEDIATE), so check-then-insert in one
        # transaction is atomic; readers begin DEFERRED and never wait for a writer (WAL).
        write = connection.get_execution_options().get("dueflow_write", False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


@contextmanager
def writing(engine: Engine) -> Iterator[Connection]:
    """A write transaction: committed at the end, rolled back on error; on SQLite it holds
    the write lock from its first statement (BEGIN IMMEDIATE)."""
    with engine.connect().execution_options(dueflow_write=True) as conn, conn.begin():
        yield conn


def dialect(engine: Engine) -> str:
    return "postgresql" if engine.dialect.name == "postgresql" else "sqlite"


def _alembic_config(conn: Connection, ledger_schema: str | None) -> Any:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", "dueflow.sql:migrations")
    config.attributes["connection"] = conn
    config.attributes["ledger_schema"] = ledger_schema
    return config


@dataclass(frozen=True)
class LedgerVersion:
    """The version of dueflow's own tables in a database, and the one this dueflow needs."""

    current: str | None  # None: no ledger (or one older than versioning, not yet adopted)
    head: str

    @property
    def behind(self) -> bool:
        return self.current != self.head

    @property
    def newer(self) -> bool:
        """Made by a later dueflow: a revision this one does not know."""
        return self.current is not None and self.behind and not known_revision(self.current)


def _heads() -> str:
    from alembic.script import ScriptDirectory

    config = _alembic_config(None, None)  # type: ignore[arg-type]
    return ScriptDirectory.from_config(config).get_current_head() or ""


def ledger_version(engine: Engine) -> LedgerVersion:
    """Where dueflow's own tables stand (`dueflow check`); reads, never writes."""
    from alembic.runtime.migration import MigrationContext

    from dueflow.sql.migrations import VERSION_TABLE

    with engine.connect() as conn:
        schema = conn.exec_driver_sql("SELECT current_schema()").scalar() if dialect(engine) == "postgresql" \
            else None
        context = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE,
                                                         "version_table_schema": schema})
        return LedgerVersion(context.get_current_revision(), _heads())


def init_db(engine: Engine, *, sample_tables: bool = False,
            source_schema: str | None = None) -> LedgerVersion:
    """Create dueflow's own tables, or upgrade them in place with their rows (Alembic, in
    one transaction), in the ledger schema; with `sample_tables`, also the sample source
    tables that are missing (`dueflow init-db --with-sample-tables`, `dueflow demo`), in
    `source_schema` when given. Source relations that exist are never touched."""
    from alembic import command

    with writing(engine) as conn:
        ledger_schema = None
        if dialect(engine) == "postgresql":
            # One init-db at a time per database (SQLite: BEGIN IMMEDIATE serialises them).
            conn.execute(text(statement("reserve_lock", "postgresql")), {"lock": "dueflow.init-db"})
            ledger_schema = conn.exec_driver_sql("SELECT current_schema()").scalar()
            if ledger_schema is None:
                raise ConfigError("no schema of the search path exists to hold dueflow's tables: set"
                                  " DUEFLOW_LEDGER_SCHEMA to an existing schema, or create one")
        command.upgrade(_alembic_config(conn, ledger_schema), "head")
        # Made by migration 0007; made again if someone emptied the table (`run` says to init-db).
        conn.execute(text(statement("message_id_key_make")), {"value": secrets.token_hex(32)})
        if sample_tables:
            create_sample_tables(conn, source_schema)
    return ledger_version(engine)


def in_source_schema(conn: Connection, source_schema: str | None) -> None:
    """For the rest of this transaction, unqualified names are the source schema's (the
    sample tables and their rows: `dueflow demo`)."""
    if conn.dialect.name == "postgresql" and source_schema:
        conn.exec_driver_sql("SELECT set_config('search_path', %(path)s, true)",
                             {"path": conn.dialect.identifier_preparer.quote_identifier(source_schema)})


def create_sample_tables(conn: Connection, source_schema: str | None = None) -> None:
    """The sample source tables that are missing (sql/sample_tables.sql)."""
    script = re.sub(r"--[^\n]*", "", statement("sample_tables"))  # no '--' in its literals
    if conn.dialect.name == "sqlite":  # keep every digit of an amount (see the script)
        script = re.sub(r"\bnumeric\b", "text", script)
    in_source_schema(conn, source_schema)
    for ddl in filter(None, (part.strip() for part in script.split(";"))):
        conn.exec_driver_sql(ddl)


def read_frame(engine: Engine, sql: str, params: Mapping[str, Any], dtype: Any = None) -> pd.DataFrame:
    """Run one query and return its rows as a DataFrame (no per-row Python work)."""
    with engine.connect() as conn:
        result = conn.execute(text(sql), dict(params))
        return pd.DataFrame(result.fetchall(), columns=list(result.keys()), dtype=dtype)


def pg_array(values: Iterable[Any]) -> str:
    """A PostgreSQL array literal ('{"a","b",NULL}') of the values' text, None as NULL, for
    CAST(:x AS text[]) and friends: several times faster than letting psycopg2 adapt a
    list of 100,000 strings."""
    items = values if isinstance(values, list) else list(values)
    if not items:
        return "{}"
    try:  # all text, the usual case: joined as they are (str() of each took as long again)
        joined = "\x00".join(items)
    except TypeError:
        if items.count(None) == len(items):  # e.g. previous_by of renewals
            return "{" + ",".join(["NULL"] * len(items)) + "}"
        if None in items:
            return "{" + ",".join("NULL" if v is None else _quoted(str(v)) for v in items) + "}"
        joined = "\x00".join(map(str, items))
    # Escape and quote the joined text at once (C speed; twice as fast again), then
    # split it back at the separators: escaping is per character.
    if joined.count("\x00") != len(items) - 1:
        raise ValueError("text for PostgreSQL cannot contain NUL characters")
    return "{" + _quoted(joined).replace("\x00", '","') + "}"


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _nullable_list(column: pd.Series) -> list[Any]:
    """The column's values as Python objects, missing ones (NaN, NA, NaT) as None."""
    return column.astype(object).where(column.notna(), None).tolist()


RESERVE_STATEMENT = {"renewal": "reserve_renewals", "dunning": "reserve_dunning"}
# Messages about to be stored (the rows of a first night or a surge, all reserved moments
# ago) from which the ledger's statistics are refreshed first (sql/analyze_ledger): by
# store_messages for one call, by tasks.jobs.compose for a night stored chunk by chunk.
ANALYZE_BEFORE_STORING = 10_000


def extract_frame(engine: Engine, sql: str, params: Mapping[str, Any],
                  session_timezone: str | None = None) -> pd.DataFrame:
    """One extraction query as a DataFrame of text columns (NULL → NA); the decide
    functions parse dates, amounts and flags themselves, vectorised. On PostgreSQL the
    rows stream through COPY … TO STDOUT as CSV: building a Python object per cell
    (Decimal, date, datetime) cost more than the query on a million-row night.
    `session_timezone`: PostgreSQL's TimeZone for this read (timestamps' text is then in
    that zone: sql/dunning_candidates compares their dates as text)."""
    if dialect(engine) != "postgresql":
        # Values as SQLite holds them: no column of 0s and NULLs turned into floats.
        return read_frame(engine, sql, params, dtype=object)
    compiled = str(text(sql).compile(dialect=engine.dialect))  # :name → %(name)s
    raw = engine.raw_connection()
    try:
        return _copy_frame(raw, compiled, params, session_timezone)
    except engine.dialect.loaded_dbapi.Error as exc:
        # The driver's own error, as SQLAlchemy would have wrapped it: callers tell a lost
        # connection, a timeout or a permission apart the same way for every statement.
        raise DBAPIError.instance(compiled, dict(params), exc, engine.dialect.loaded_dbapi.Error,
                                  hide_parameters=True,
                                  connection_invalidated=bool(getattr(raw.dbapi_connection, "closed", 0))
                                  ) from exc
    finally:
        raw.close()


def _copy_frame(raw: Any, compiled: str, params: Mapping[str, Any],
                session_timezone: str | None = None) -> pd.DataFrame:
    try:
        with raw.cursor() as cursor:
            # A read of the company's data never writes it, whatever a mapping's expression
            # calls (a function that inserts): the transaction is READ ONLY (issue 36).
            cursor.execute("SET TRANSACTION READ ONLY")
            if session_timezone:  # for this transaction only (rolled back below)
                cursor.execute("SELECT set_config('TimeZone', %s, true)", (session_timezone,))
            # JIT compiling took seconds for queries that run in tens of milliseconds: the
            # per-row index probes of the extracts make their estimated cost look big.
            cursor.execute(statement("extract_no_jit", "postgresql"))
            query = cursor.mogrify(compiled, dict(params)).decode()
            buffer = io.StringIO()
            # NULL as a control character, not as an empty field: an empty string stays ''.
            cursor.copy_expert(f"COPY ({query}) TO STDOUT WITH (FORMAT csv, HEADER true,"
                               f" NULL E'\\x1e')", buffer)
    except Exception:
        with contextlib.suppress(Exception):  # a broken connection cannot roll back either
            raw.rollback()
        raise
    raw.rollback()
    buffer.seek(0)
    frame = pd.read_csv(buffer, dtype="string", keep_default_na=False, na_values=["\x1e"])
    frame.attrs[VALID_UTF8] = True  # PostgreSQL stores no invalid UTF-8: no row to look at
    return frame


def renewal_history_of(engine: Engine, contracts: pd.DataFrame, since: date, timezone: str) -> pd.DataFrame:
    """The leads already reserved for the (contract, cycle) pairs of the extracted rows the
    ledger does not settle (sql/renewal_history_of): index probes, not every cycle ahead. A
    cycle is the renewal date as the rules date it (in the business zone); `since` is the
    first renewal date the night can alert (a renewal on the closed days just past counts)."""
    rows = contracts[contracts["settled_lead"].isna()] if "settled_lead" in contracts else contracts
    cycles = business_dates(rows["renewal_date"], timezone).dt.strftime("%Y-%m-%d")
    dated = (rows["id"].notna() & cycles.notna()).to_numpy()
    pairs = json.dumps([[str(i), str(c)] for i, c in zip(rows["id"][dated], cycles[dated], strict=True)])
    return extract_frame(engine, statement("renewal_history_of", dialect(engine)),
                         {"pairs": pairs, "since": since.isoformat()})


def reserve(
    database: Database,
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
    engine = database.engine
    reservation = database.source_statement(RESERVE_STATEMENT[job])
    columns = candidate_columns(candidates)
    params: dict[str, Any] = {"as_of": as_of.isoformat(), "flow_run_id": flow_run_id,
                              "status": status}
    with writing(engine) as conn:
        if dialect(engine) == "postgresql":
            # Serialise reservations of one job (milliseconds) so the ordering
            # checks in the statement see every reservation committed before it.
            conn.execute(text(statement("reserve_lock", "postgresql")), {"lock": f"dueflow.reserve.{job}"})
            # Probes by index, unless a source's ids must be cast to text to be compared:
            # then the planner may hash the source once rather than scan it per candidate.
            plan = "reserve_plan" if database.sources is None or database.sources.text_ids \
                else "reserve_plan_cast_ids"
            conn.execute(text(statement(plan, "postgresql")))
            rows = conn.execute(text(reservation), params | reserve_arrays(columns))
        else:
            conn.execute(text(statement("candidates_table", "sqlite")))
            conn.execute(text(statement("candidates_clear", "sqlite")))
            conn.execute(text(statement("candidates_insert", "sqlite")),
                         [dict(zip(CANDIDATE_COLUMNS, row, strict=True))
                          for row in zip(*columns.values(), strict=True)])
            rows = conn.execute(text(reservation), params)
        return set(rows.scalars())


def candidate_columns(candidates: pd.DataFrame) -> dict[str, list[Any]]:
    """The candidates' CANDIDATE_COLUMNS as lists, in key order."""
    # Each row keeps its subject's form apart from its spelling (migration 0008): a source
    # whose ids change spelling later is noticed before it is sent to (tasks/core/rekeying.py).
    frame = candidates.assign(subject_form=id_forms(candidates["subject_id"])).reindex(
        columns=list(CANDIDATE_COLUMNS))
    columns = {name: _nullable_list(frame[name]) for name in CANDIDATE_COLUMNS}
    columns["step_rank"] = [int(v) for v in columns["step_rank"]]
    # Sorted by key, the primary-key inserts walk the btree in order instead of landing
    # on random pages: about twice as fast for 100,000 keys. Sorting the list is 2-3 times
    # as fast as pandas' sort_values (0.09 against 0.21 s for 100,000 shuffled keys).
    order = sorted(range(len(frame)), key=columns["key"].__getitem__)
    if order != list(range(len(frame))):
        columns = {name: [values[i] for i in order] for name, values in columns.items()}
    return columns


# The arrays sql/reserve_*.postgresql.sql take, and the candidate column in each.
RESERVE_ARRAYS = {"keys": "key", "subject_ids": "subject_id", "subject_forms": "subject_form",
                  "cycles": "cycle", "steps": "step",
                  "step_ranks": "step_rank", "recipients": "recipient", "previous_by": "previous_by",
                  "payment_states": "payment_state"}


def reserve_arrays(columns: Mapping[str, list[Any]]) -> dict[str, str]:
    """The reservation statement's array parameters, from the candidates' columns."""
    return {param: pg_array(columns[column]) for param, column in RESERVE_ARRAYS.items()}


def refresh_statistics(engine: Engine) -> None:
    """ANALYZE the ledger (sql/analyze_ledger). Only plans depend on it: if it cannot run,
    the statements still do, and autovacuum analyses the ledger later."""
    try:
        with engine.connect() as conn:
            conn.execute(text(statement("analyze_ledger", "postgresql")))
            conn.commit()
    except SQLAlchemyError:
        pass


# The arrays sql/store_messages.postgresql.sql takes, and the message field in each.
STORE_ARRAYS = {"keys": "key", "recipients": "recipient", "subjects": "subject",
                "bodies_text": "body_text", "bodies_html": "body_html",
                "message_ids": "message_id", "draft_sources": "draft_source",
                "draft_notes": "draft_note", "paragraphs": "paragraph",
                "tone_plans": "tone_plan", "refused_answers": "refused_answer",
                "cc_recipients": "cc_recipient", "bcc_recipients": "bcc_recipient",
                "attachment_paths": "attachment_path", "attachment_names": "attachment_name",
                "attachment_sha256s": "attachment_sha256", "attachment_sizes": "attachment_size",
                "attachment_notes": "attachment_note", "owed_states": "owed_state",
                "statement_keys": "statement_key"}
# What a message row holds besides its text, None unless the message has it.
MESSAGE_EXTRAS = ("draft_source", "draft_note", "paragraph", "tone_plan", "refused_answer",
                  "cc_recipient", "bcc_recipient",
                  "attachment_path", "attachment_name", "attachment_sha256", "attachment_size",
                  "attachment_note", "owed_state", "statement_key")
# Messages per statement, at most, and characters of message text per statement, at most:
# each statement's array literals are copied several times on their way to the server
# (joined, escaped, encoded), so a statement of 5,000 messages of 10 KB raised the
# process's peak by 320 MB; one of 4 million characters, by about 40 (docs/performance.md).
STORE_CHUNK = 5_000
STORE_CHARS = 4_000_000


def store_batches(rows: Sequence[Mapping[str, Any]], max_rows: int = STORE_CHUNK,
                  max_chars: int = STORE_CHARS) -> Iterator[Sequence[Mapping[str, Any]]]:
    """The rows in order, in consecutive batches of at most `max_rows` rows and, unless
    one message alone is larger, `max_chars` characters of subject and bodies."""
    start, size = 0, 0
    for end, row in enumerate(rows):
        chars = sum(len(row.get(f) or "") for f in ("subject", "body_text", "body_html"))
        if end > start and (end - start >= max_rows or size + chars > max_chars):
            yield rows[start:end]
            start, size = end, 0
        size += chars
    if start < len(rows):
        yield rows[start:]


def store_messages(engine: Engine, messages: Sequence[Mapping[str, Any]]) -> None:
    """Write the rendered messages onto their reserved rows before any is sent (G2). The
    first message stored on a row stays (see sql/store_messages)."""
    if not messages:
        return
    rows = [dict.fromkeys(MESSAGE_EXTRAS) | dict(m) for m in messages]
    engine_dialect = dialect(engine)
    if engine_dialect == "postgresql" and len(rows) >= ANALYZE_BEFORE_STORING:
        refresh_statistics(engine)  # the planner has not seen the rows just reserved
    if engine_dialect == "sqlite":  # executemany stays in process: no round trips
        with writing(engine) as conn:
            conn.execute(text(statement("store_message")), rows)
        return
    update = text(statement("store_messages", engine_dialect))
    for chunk in store_batches(rows):
        _store_chunk(engine, update, chunk)


def _store_chunk(engine: Engine, update: Any, chunk: Sequence[Mapping[str, Any]]) -> None:
    """One statement of messages, committed. A statement the server cancels for taking
    longer than its statement_timeout is split in halves and tried again: the messages
    are stored, however tight the limit, unless one message alone is over it."""
    try:
        with writing(engine) as conn:
            conn.execute(update, {param: pg_array(row[field] for row in chunk)
                                  for param, field in STORE_ARRAYS.items()})
    except DBAPIError as exc:
        if sqlstate(exc) != CANCELED or len(chunk) == 1:
            raise
        half = len(chunk) // 2
        _store_chunk(engine, update, chunk[:half])
        _store_chunk(engine, update, chunk[half:])


def _key_list(engine: Engine, keys: Sequence[str]) -> str:
    """A list of keys as one parameter: an array literal (PostgreSQL) or JSON (SQLite)."""
    return pg_array(keys) if dialect(engine) == "postgresql" else json.dumps(list(keys))


def _outcome_arrays(outcomes: Sequence[Mapping[str, Any]], token: str) -> dict[str, str]:
    """The parameters of sql/record_outcomes: one array literal per field of the outcomes."""
    column = {"keys": "key", "statuses": "status", "smtp_responses": "smtp_response", "errors": "error",
              "retry_afters": "retry_after"}
    arrays = {name: pg_array([o[field] for o in outcomes]) for name, field in column.items()}
    return arrays | {"permanents": pg_array(["true" if o["permanent"] else "false" for o in outcomes]),
                     "token": token}


def settle(
    engine: Engine,
    token: str,
    as_of: date,
    outcomes: Sequence[Mapping[str, Any]] = (),
    release: Sequence[str] = (),
    claim: Sequence[str] = (),
) -> list[OutgoingEmail]:
    """One transaction of a delivery: record the outcomes of what it sent, release the
    claims it will not send, and claim the next group — whose stored messages it returns,
    exactly what it may send. Every part is safe to run again after a lost
    acknowledgement: outcomes and releases only touch this delivery's own claims, and a
    claim gives back the rows this delivery already claimed."""
    engine_dialect = dialect(engine)
    with writing(engine) as conn:
        if outcomes and engine_dialect == "postgresql":
            conn.execute(text(statement("record_outcomes", engine_dialect)), _outcome_arrays(outcomes, token))
        elif outcomes:
            conn.execute(text(statement("record_outcome")), [dict(o) | {"token": token} for o in outcomes])
        if release:
            conn.execute(text(statement("release_claims", engine_dialect)),
                         {"keys": _key_list(engine, release), "token": token})
        if not claim:
            return []
        rows = conn.execute(text(statement("claim_sending", engine_dialect)),
                            {"keys": _key_list(engine, claim), "token": token, "as_of": as_of.isoformat()})
        claimed = {row.key: OutgoingEmail(
            row.key, row.recipient, row.subject, row.body_text, row.body_html, row.message_id,
            cc_recipient=row.cc_recipient, bcc_recipient=row.bcc_recipient,
            attachment_path=row.attachment_path, attachment_name=row.attachment_name,
            attachment_sha256=row.attachment_sha256,
            attachment_size=None if row.attachment_size is None else int(row.attachment_size),
            statement_key=row.statement_key)
            for row in rows}
    return with_riders(claim, claimed)



def ledger_states(engine: Engine, keys: Sequence[str]) -> pd.DataFrame:
    """key, status and sending_at of each of these keys that is in the ledger."""
    if not keys:
        return pd.DataFrame(columns=["key", "status", "sending_at"])
    return read_frame(engine, statement("ledger_states", dialect(engine)), {"keys": _key_list(engine, keys)})


def ledger_status(engine: Engine, keys: Sequence[str]) -> dict[str, str]:
    """The current status of each of these keys that is in the ledger."""
    states = ledger_states(engine, keys)
    return dict(zip(states["key"], states["status"], strict=True))


def claimed_keys(engine: Engine, keys: Sequence[str]) -> dict[str, str]:
    """Per key: 'unclaimed' (pending, never handed to SMTP), 'claimed' (pending, may have
    left), or its settled status."""
    states = ledger_states(engine, keys)
    return {key: (status if status != "pending" else "claimed" if pd.notna(sending_at) else "unclaimed")
            for key, status, sending_at in states.itertuples(index=False)}


def message_id_key(engine: Engine) -> str:
    """The database's secret for Message-IDs (sql/message_id_key; made by init-db, migration
    0007). Never printed."""
    with engine.connect() as conn:
        value = conn.execute(text(statement("message_id_key"))).scalar()
    if not value:
        raise ConfigError("the ledger has no Message-ID secret: run `dueflow init-db` (it makes one)")
    return str(value)


def record_unrendered(engine: Engine, failures: Sequence[tuple[str, str]]) -> None:
    """Reserved rows whose message could not be rendered: known not sent (`failed`)."""
    if failures:
        with writing(engine) as conn:
            conn.execute(text(statement("record_unrendered")),
                         [{"key": key, "error": error} for key, error in failures])


def record_unrendered_retries(engine: Engine, failures: Sequence[tuple[str, str]],
                              retry_after: datetime) -> None:
    """Failed rows whose retry could not be rendered: the attempt counts, with its reason
    (sql/record_unrendered_retry)."""
    if failures:
        with writing(engine) as conn:
            conn.execute(text(statement("record_unrendered_retry")),
                         [{"key": key, "error": error, "retry_after": utc_stamp(retry_after)}
                          for key, error in failures])


def retry_candidates(database: Database, as_of: date, max_attempts: int,
                     now: datetime | None = None) -> pd.DataFrame:
    """Failed rows that may go out again tonight, with what renders them again
    (sql/retry_candidates): transient failures due for another attempt (at `now`), and
    permanent ones (retried only to a new address; the caller compares)."""
    params = {"as_of": as_of.isoformat(), "max_attempts": max_attempts,
              "now": utc_stamp(now or datetime.now(UTC))}
    frame = read_frame(database.engine, database.source_statement("retry_candidates"), params,
                       dtype=object)
    return frame.assign(permanent=frame["permanent"].astype(bool))


def requeue_failed(database: Database, flow_run_id: str | None,
                   messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """Failed rows back to pending (unclaimed) with their message rendered again, in one
    transaction: a run that finds one of them pending finds its message too. Returns the
    keys this run requeued (another run may have taken some first)."""
    if not messages:
        return []
    engine = database.engine
    keys = [m["key"] for m in messages]
    with writing(engine) as conn:
        won = {row[0] for row in conn.execute(text(statement("requeue_failed", dialect(engine))),
                                              {"keys": _key_list(engine, keys),
                                               "flow_run_id": flow_run_id})}
        rows = [dict.fromkeys(MESSAGE_EXTRAS) | dict(m) for m in whole_statements(messages, won)]
        if rows:
            conn.execute(text(statement("store_message")), rows)
    return sorted(won)


def withdraw_unsent(database: Database, as_of: date) -> list[str]:
    """Unclaimed pending rows no longer meant to go out become `failed` (known not sent); the
    other rows of a statement one of them was in lose their stored message
    (sql/unstore_broken_statements)."""
    with writing(database.engine) as conn:
        withdrawn = [row[0] for row in conn.execute(text(database.source_statement("withdraw_unsent")),
                                                    {"as_of": as_of.isoformat()})]
        if withdrawn:  # a statement that lost a row is rendered again without it
            conn.execute(text(statement("unstore_broken_statements")))
        return withdrawn


def restate_messages(engine: Engine, messages: Sequence[Mapping[str, Any]]) -> None:
    """Messages rendered again because what the client owes changed (sql/restate_message):
    each replaces the stored one on its row while no delivery has claimed it."""
    if messages:
        with writing(engine) as conn:
            conn.execute(text(statement("restate_message")),
                         [dict.fromkeys(MESSAGE_EXTRAS) | dict(m) for m in messages])


def unsent_rows(engine: Engine, keys: Sequence[str] | None = None) -> pd.DataFrame:
    """Pending rows no delivery claimed: surely never handed to SMTP (sql/unsent); with
    `keys`, only theirs (sql/unsent_of)."""
    frame = read_frame(engine, statement("unsent"), {}) if keys is None else read_frame(
        engine, statement("unsent_of", dialect(engine)), {"keys": _key_list(engine, keys)})
    return frame.assign(stored=frame["stored"].astype(bool))


def rows_by_id(database: Database, name: str, ids: Sequence[str], as_of: str | None = None) -> pd.DataFrame:
    """The source rows with these ids, through sql/<name> (contracts_by_id, …); `as_of`, the
    last date whose payments count, for the statements that read them (invoices_by_id)."""
    engine = database.engine
    params: dict[str, Any] = {"ids": _key_list(engine, ids)}
    if as_of is not None and ":as_of" in database.source_statement(name):
        params["as_of"] = as_of
    return extract_frame(engine, database.source_statement(name), params)


def open_keys(engine: Engine) -> dict[str, str]:
    """Every pending or failed key of the ledger with its status (few, and indexed)."""
    frame = read_frame(engine, statement("open_keys"), {})
    return dict(zip(frame["key"], frame["status"], strict=True))


def failed_rows(engine: Engine) -> pd.DataFrame:
    """Every failed row with why a night may not retry it (sql/failed_rows)."""
    frame = read_frame(engine, statement("failed_rows"), {}, dtype=object)
    return frame.assign(permanent=frame["permanent"].astype(bool), attempts=frame["attempts"].astype(int))


def resolve_pending(engine: Engine, key: str, outcome: str, note: str, by: str | None = None) -> bool:
    """An operator (`by`) settles a pending row: `sent` (only one that was handed to SMTP),
    or `failed` (a later run sends it again)."""
    with writing(engine) as conn:
        result = conn.execute(text(statement("resolve_pending")),
                              {"key": key, "outcome": outcome, "note": note, "by": by})
        return result.rowcount >= 1


def resolve_retry(engine: Engine, key: str, note: str, by: str | None = None) -> bool:
    """An operator (`by`) sends a failed (also permanently) or bounced row once more, to
    the address the data says (sql/resolve_retry); its bounces no longer apply to it."""
    with writing(engine) as conn:
        changed = conn.execute(text(statement("resolve_retry")),
                               {"key": key, "note": note, "by": by}).rowcount >= 1
        if changed:
            conn.execute(text(statement("bounce_settle")), {"key": key})
        return changed


PRUNE_BATCH = 5_000  # rows per statement of a prune: each a short transaction


def prune_bodies(engine: Engine, before: date, batch: int = PRUNE_BATCH) -> int:
    """Remove the bodies, addresses and drafted paragraphs of the settled rows (sent,
    adopted) whose step got out before `before`, batch by batch (sql/prune_bodies); keys,
    statuses and dates stay. Never a pending, failed or bounced row. Returns how many rows
    this call pruned (a second call with the same date prunes none)."""
    pruned = 0
    params = {"before": before.isoformat(), "batch": batch}
    while True:
        with writing(engine) as conn:
            copies = [{"key": row.key, "copy_digests": copy_digests(row.recipient, row.cc_recipient,
                                                                    row.bcc_recipient)}
                      for row in conn.execute(text(statement("prune_copies")), params)]
            if copies:  # what a copy's late bounce needs, kept as digests (sql/prune_copies)
                conn.execute(text(statement("prune_copy_digest")), copies)
            count = conn.execute(text(statement("prune_bodies")), params).rowcount
        pruned += count
        if count < batch:
            return pruned


def has_ledger(engine: Engine) -> bool:
    """Whether the ledger schema holds a ledger (of any version)."""
    return "dueflow_ledger" in inspect(engine).get_table_names()


def _ledger_is_current(engine: Engine) -> bool:
    """Whether the ledger's version table says HEAD: one SELECT, no Alembic. Anything else
    (no table, another revision) is for ledger_version to read and word."""
    from dueflow.sql.migrations import HEAD, VERSION_TABLE

    try:
        with engine.connect() as conn:
            table = conn.dialect.identifier_preparer.quote(VERSION_TABLE)
            if dialect(engine) == "postgresql":  # where Alembic keeps it: the ledger schema
                schema = conn.exec_driver_sql("SELECT current_schema()").scalar()
                if schema is None:
                    return False
                table = f"{conn.dialect.identifier_preparer.quote_schema(schema)}.{table}"
            versions = conn.exec_driver_sql(f"SELECT version_num FROM {table}").scalars().all()
    except DBAPIError:
        return False
    return versions == [HEAD]


def ledger_problems(engine: Engine) -> list[str]:
    """What is wrong with dueflow's own tables for a run of this dueflow (empty: nothing)."""
    if _ledger_is_current(engine):
        return []
    version = ledger_version(engine)
    if version.current == version.head:
        return []
    if version.current is None:
        return ["the ledger was made by an earlier dueflow: run `dueflow init-db` to upgrade it in place"
                " (its rows are kept)" if has_ledger(engine) else
                "dueflow's tables (the ledger) are not in this database: run `dueflow init-db`"]
    if version.newer:
        return [f"the ledger is at version {version.current}, newer than this dueflow ({version.head}):"
                " install the dueflow that upgraded it"]
    return [f"the ledger is at version {version.current}, this dueflow needs {version.head}: run"
            " `dueflow init-db` to upgrade it in place (its rows are kept)"]


def known_revision(revision: str) -> bool:
    from alembic.script import ScriptDirectory
    from alembic.util import CommandError

    try:
        return ScriptDirectory.from_config(_alembic_config(None, None)).get_revision(revision) is not None  # type: ignore[arg-type]
    except CommandError:
        return False


def quarantine(
    engine: Engine, job: str, rows: pd.DataFrame, as_of: date, flow_run_id: str | None
) -> None:
    """Keep bad rows with their reason (G6), one row per (job, source row, reason)."""
    if rows.empty:
        return
    unique = rows.drop_duplicates(["source_id", "reason"])  # one statement may not hit a row twice
    params = [
        {"job": job, "source_id": str(source_id), "reason": reason,
         "as_of": as_of.isoformat(), "flow_run_id": flow_run_id}
        for source_id, reason in zip(unique["source_id"], unique["reason"], strict=True)
    ]
    with writing(engine) as conn:
        conn.execute(text(statement("quarantine")), params)


def quarantine_rows(engine: Engine, job: str | None = None) -> pd.DataFrame:
    """The quarantine table, most recently seen first."""
    frame = read_frame(engine, statement("quarantine_list"), {"job": job})
    return frame.astype({"first_as_of": str, "last_as_of": str})


def ledger_rows(engine: Engine, status: str | None = None) -> pd.DataFrame:
    """Ledger rows, optionally of one status, oldest first."""
    frame = read_frame(engine, statement("ledger_list"), {"status": status})
    frame["as_of"] = frame["as_of"].astype(str)
    return frame


def stream_frames(engine: Engine, sql: str, params: Mapping[str, Any],
                  chunk_rows: int = 5_000) -> Iterator[pd.DataFrame]:
    """The rows of one query, `chunk_rows` at a time, as DataFrames of the driver's values:
    a server-side cursor on PostgreSQL, SQLite's own stepping cursor, so that memory holds
    one chunk whatever the size of the result (`dueflow ledger` on millions of rows)."""
    with engine.connect() as conn:
        result = conn.execution_options(stream_results=True, yield_per=chunk_rows).execute(
            text(sql), dict(params))
        columns = list(result.keys())
        for chunk in result.partitions(chunk_rows):
            yield pd.DataFrame(chunk, columns=columns, dtype=object)


def unsettled_rows(engine: Engine, limit: int = 50) -> pd.DataFrame:
    """The oldest pending and failed rows of the whole ledger, for the run report."""
    return read_frame(engine, statement("unsettled_rows"), {"limit": limit})


def unsettled_counts(engine: Engine) -> dict[str, int]:
    """How many rows of the whole ledger are in doubt (`pending`, handed to SMTP), `failed`
    (retried later) or failed for good (`permanent`), never handed to SMTP (`unsent`: pending
    without a claim, sent by the next run), and how many bounced."""
    frame = read_frame(engine, statement("unsettled_counts"), {})
    return {"pending": 0, "failed": 0, "permanent": 0, "unsent": 0, "bounced": 0} | {
        str(state): int(n) for state, n in frame.itertuples(index=False)}


def first_night(engine: Engine) -> date | None:
    """The `as_of` of the ledger's earliest row, or None for an empty ledger."""
    value = read_frame(engine, statement("first_night"), {})["first_night"].iloc[0]
    return None if value is None or pd.isna(value) else date.fromisoformat(str(value)[:10])


def unsent_of_run(engine: Engine, flow_run_id: str) -> list[str]:
    """The pending rows of one run that were never handed to SMTP."""
    return read_frame(engine, statement("unsent_of_run"), {"run": flow_run_id})["key"].tolist()


def invoice_steps(engine: Engine, invoice_id: str) -> pd.DataFrame:
    """One invoice's dunning steps, in order."""
    return read_frame(engine, statement("invoice_steps"), {"id": invoice_id})


def open_database(settings: Any, *, sources: bool = True) -> Database:
    """The run's database: the ledger at this dueflow's version and, with `sources`, the
    source relations found and checked (ConfigError, one line, otherwise). Reads only."""
    from dueflow.tasks.adapters.sources import SourceError

    database = Database(settings.database_url, settings.db_lock_timeout, settings.ledger_schema)
    if problems := ledger_problems(database.engine):
        raise ConfigError("the database is not ready: " + "; ".join(problems))
    if not sources:
        return database
    try:
        return database.with_sources(settings.source_mapping(), settings.source_schema, settings.timezone)
    except SourceError as exc:
        raise ConfigError("the sources cannot be read: " + str(exc)) from None


# The preflight `dueflow run` made before starting its flow, which the flow's own preflight,
# a moment later in the same process, takes instead of planning every statement again (a
# deployment's run has only its own): the database it checked, and when.
_CHECKED: list[tuple[str, float]] = []
CHECKED_FOR = 30.0  # seconds


def _preflight_key(database: Database) -> str:
    return f"{database.url}\x00{database.ledger_schema}\x00{database.sources!r}"


def preflight(database: Database, checked_just_before: bool = False) -> None:
    """Before a night's first write: every statement it runs on the sources plans, and
    dueflow's own tables take a write (rolled back). ConfigError, one line, otherwise.
    `checked_just_before`: the flow's own check, which the command that started it made a
    moment earlier for the same database (once: it is taken)."""
    from dueflow.tasks.adapters.sources import explain_night

    assert database.sources is not None
    before, _CHECKED[:] = list(_CHECKED), []
    if checked_just_before and before and before[0][0] == _preflight_key(database) \
            and time.monotonic() - before[0][1] < CHECKED_FOR:
        return
    if problems := explain_night(database.engine, database.sources):
        raise ConfigError("the sources cannot be read: " + "; ".join(p.line() for p in problems))
    try:
        with database.engine.connect().execution_options(dueflow_write=True) as conn:
            conn.execute(text(statement("write_probe")))
            conn.rollback()
    except DBAPIError as exc:
        if transient(exc):
            raise
        raise ConfigError(database_problem(exc, "dueflow cannot write its own tables")) from None
    _CHECKED[:] = [(_preflight_key(database), time.monotonic())]


# --------------------------------------------------------------------------- bounces
# Bounce intake (docs/bounces.md): what a batch of delivery status notifications changes,
# in one transaction each, so that a rerun after any failure finishes the job.


def bounce_candidates(engine: Engine, message_ids: Sequence[str]) -> pd.DataFrame:
    """key, message_id, status, sending_at of the ledger rows with these Message-IDs."""
    if not message_ids:
        return pd.DataFrame(columns=["key", "message_id", "status", "sending_at"])
    return read_frame(engine, statement("bounce_candidates", dialect(engine)),
                      {"ids": _key_list(engine, list(message_ids))})


def bounces_seen(engine: Engine, report_ids: Sequence[str]) -> set[str]:
    """The reports of these that are already recorded (matched or kept aside)."""
    if not report_ids:
        return set()
    frame = read_frame(engine, statement("bounce_seen", dialect(engine)),
                       {"ids": _key_list(engine, list(report_ids))})
    return set(frame["report_id"])


def _stamped(frame: pd.DataFrame) -> list[dict[str, Any]]:
    stamped = records(frame.astype(object).where(frame.notna(), None))
    for record in stamped:
        if isinstance(record.get("seen_at"), datetime):
            record["seen_at"] = utc_stamp(record["seen_at"])
    return stamped


def record_bounces(engine: Engine, bounces: pd.DataFrame, kept: pd.DataFrame) -> list[str]:
    """Record matched reports and the ones kept aside, and mark the rows their hard
    bounces are about `bounced` — one transaction: all of it or nothing. Returns the keys
    marked now (none twice: a row already bounced is not marked again)."""
    with writing(engine) as conn:
        if not bounces.empty:
            conn.execute(text(statement("bounce_record")), _stamped(bounces))
        if not kept.empty:
            conn.execute(text(statement("bounce_keep")), _stamped(kept))
        marked = [row[0] for row in conn.execute(text(statement("bounce_rows")))]
        conn.execute(text(statement("bounce_reason")))
    return marked


def resolve_bounced(engine: Engine, key: str, outcome: str, note: str, by: str | None = None) -> bool:
    """An operator (`by`) settles a bounced row: `failed` (a later run sends it again,
    rendered anew) or `sent`; its bounces no longer apply to it."""
    with writing(engine) as conn:
        changed = conn.execute(text(statement("resolve_bounced")),
                               {"key": key, "outcome": outcome, "note": note, "by": by}).rowcount >= 1
        if changed:
            conn.execute(text(statement("bounce_settle")), {"key": key})
        return changed


def bounced_rows(engine: Engine, limit: int = 200) -> pd.DataFrame:
    """The oldest bounced rows of the whole ledger (key, job, recipient, error)."""
    return read_frame(engine, statement("bounced_rows"), {"limit": limit})


def bounce_reports(engine: Engine, key: str | None = None) -> pd.DataFrame:
    """The bounce reports recorded (for one key), oldest first."""
    return read_frame(engine, statement("bounces_of"), {"key": key})


def kept_reports(engine: Engine) -> pd.DataFrame:
    """The messages of the bounce mailbox kept aside, most recent first."""
    return read_frame(engine, statement("bounce_kept_list"), {})


# --------------------------------------------------------------------------- ids respelled


def ledger_ids_of_forms(engine: Engine, job: str, forms: Sequence[str]) -> pd.DataFrame:
    """The ledger's subjects of one job (subject_id, subject_form) whose form is among
    `forms` (sql/ledger_ids_of_forms: index probes)."""
    return read_frame(engine, statement("ledger_ids_of_forms", dialect(engine)),
                      {"job": job, "forms": _key_list(engine, list(forms))}, dtype="string")


def kept_apart(engine: Engine) -> pd.DataFrame:
    """The pairs of ids an operator said are different records (job, old_id, new_id)."""
    return read_frame(engine, statement("id_changes_apart"), {}, dtype="string")


def ledger_subjects(engine: Engine) -> pd.DataFrame:
    """Every subject of the ledger with its form (job, subject_id, subject_form)."""
    return read_frame(engine, statement("ledger_subjects"), {}, dtype="string")


def source_ids(database: Database) -> pd.DataFrame:
    """Every contract and invoice id as the night reads them (job, id)."""
    return extract_frame(database.engine, database.source_statement("source_ids"), {})


def record_id_changes(engine: Engine, pairs: pd.DataFrame, decision: str,
                      decided_by: str) -> dict[tuple[str, str], int]:
    """An operator's word on pairs of ids (job, old_id, new_id), in one transaction:
    `same` moves each old id's ledger rows to the new id — keys made again, all else kept —
    and their bounce reports with them; `apart` only records the pair, so that nights stop
    asking. Returns the rows moved per (job, old id) (a row whose new key is taken stays)."""
    moved: dict[tuple[str, str], int] = {}
    with writing(engine) as conn:
        for job, old_id, new_id in zip(pairs["job"], pairs["old_id"], pairs["new_id"], strict=True):
            count = 0
            if decision == "same":
                form = str(id_forms(pd.Series([new_id], dtype="string")).iloc[0])
                for row in conn.execute(text(statement("rekey_rows")), {"job": job, "old_id": old_id}).all():
                    new_key = (renewal_key(new_id, row.cycle, parse_key(row.key).step_rank)
                               if job == Job.RENEWAL else dunning_key(new_id, row.step))
                    params = {"old_key": row.key, "new_key": new_key, "new_id": new_id, "subject_form": form}
                    if conn.execute(text(statement("rekey_move")), params).rowcount:
                        conn.execute(text(statement("rekey_move_bounces")), params)
                        conn.execute(text(statement("rekey_move_statement")), params)
                        count += 1
            conn.execute(text(statement("id_change_record")), {
                "job": job, "old_id": old_id, "new_id": new_id, "decision": decision, "rows_moved": count,
                "decided_by": decided_by})
            moved[(job, old_id)] = count
    return moved


# --------------------------------------------------------------------------- nights


def nights_before(engine: Engine, before: date, limit: int) -> pd.DataFrame:
    """The nights recorded before `before`, newest first (sql/nights_before)."""
    return read_frame(engine, statement("nights_before"), {"before": before.isoformat(), "limit": limit})


def record_night(engine: Engine, row: Mapping[str, Any]) -> None:
    """One night's figures and approval (sql/night_record)."""
    with writing(engine) as conn:
        conn.execute(text(statement("night_record")), dict(row))


def open_invoices(database: Database) -> int:
    """How many invoices are open (sql/open_invoices_count, through the sources)."""
    frame = extract_frame(database.engine, database.source_statement("open_invoices_count"), {})
    return int(frame["open_invoices"].iloc[0])
