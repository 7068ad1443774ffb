"""What the operator's commands do (docs/operations.md), as functions a notebook calls as
well as the CLI: is the database ready for a run, create or upgrade the ledger, settle
pending or bounced rows. The CLI (flows/cli.py) only parses arguments and prints what these
return; a problem the operator can fix is one ConfigError line.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from enum import StrEnum
from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from dueflow.blocks.errors import ConfigError
from dueflow.blocks.settings import Settings, redact_url
from dueflow.tasks.adapters import db
from dueflow.tasks.core.frames import pd


def engine_of(settings: Settings) -> Engine:
    return db.engine_for(settings.database_url, settings.db_lock_timeout, settings.ledger_schema)


def sqlite_file(settings: Settings) -> str | None:
    """The SQLite file of the database (None for PostgreSQL or an in-memory database)."""
    engine = engine_of(settings)
    path = engine.url.database if engine.dialect.name == "sqlite" else None
    return path if path and path != ":memory:" else None


def sqlite_missing(settings: Settings) -> bool:
    """A SQLite database whose file does not exist (connecting would create it)."""
    path = sqlite_file(settings)
    return bool(path and not Path(path).exists())


def wait_for_sqlite(path: str, timeout: float, on_wait: Callable[[], None] = lambda: None) -> None:
    """While another process holds the SQLite file's write lock, wait (`on_wait` is called
    once, when the waiting starts); ConfigError when it is not released within `timeout`
    seconds."""
    deadline = time.monotonic() + timeout
    said = False
    while True:
        conn = sqlite3.connect(path, timeout=min(1.0, timeout), isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")
            return
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                return  # not a lock: the readiness check reports it
            if not said:  # said first, even when the first wait already used up the timeout
                on_wait()
                said = True
            if time.monotonic() >= deadline:
                raise ConfigError(f"the database file {path} is locked by another process (waited"
                                  f" {timeout:g} s; DUEFLOW_DB_LOCK_TIMEOUT): nothing was done") from None
        finally:
            conn.close()


def reachable(settings: Settings, on_wait: Callable[[], None] = lambda: None) -> Engine:
    """The engine of a database that exists and answers (a missing SQLite file is not
    created by looking at it)."""
    engine = engine_of(settings)
    if sqlite_missing(settings):
        raise ConfigError(f"the database file {sqlite_file(settings)} does not exist: run `dueflow init-db`"
                          " first")
    if path := sqlite_file(settings):
        wait_for_sqlite(path, settings.db_lock_timeout, on_wait)
    try:
        with engine.connect():
            pass
    except SQLAlchemyError as exc:
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        where = redact_url(settings.database_url)
        raise ConfigError(f"cannot reach the database {where}: {reason}") from None
    return engine


def check_ready(settings: Settings, sources: bool = True, writes: bool = False,
                on_wait: Callable[[], None] = lambda: None) -> None:
    """Fail fast, before any write, on a bad mail URL, an unreachable database, a ledger
    that is missing or behind, sources dueflow cannot read, and (`writes`) a night whose
    statements do not plan or whose user cannot write dueflow's tables."""
    from dueflow.blocks.endpoints import parse_mail_url

    parse_mail_url(settings.mail_url)
    reachable(settings, on_wait)
    try:
        database = db.open_database(settings, sources=sources)
        if writes:
            db.preflight(database)
    except ConfigError as exc:
        raise ConfigError(f"{exc} (database {redact_url(settings.database_url)})") from None


@dataclass(frozen=True)
class LedgerInit:
    """What `init_ledger` did: the version before (None: no ledger) and after."""

    before: db.LedgerVersion | None
    after: db.LedgerVersion

    @property
    def created(self) -> bool:
        return self.before is None

    @property
    def upgraded(self) -> bool:
        return self.before is not None and self.before.current != self.after.head


def init_ledger(settings: Settings, sample_tables: bool = False,
                on_wait: Callable[[], None] = lambda: None) -> LedgerInit:
    """Create or upgrade dueflow's own tables, in place (every row kept); with
    `sample_tables`, the sample source tables that are missing."""
    existed = not sqlite_missing(settings) and db.has_ledger(reachable(settings, on_wait))
    before = db.ledger_version(engine_of(settings)) if existed else None
    after = db.init_db(engine_of(settings), sample_tables=sample_tables, source_schema=settings.source_schema)
    return LedgerInit(before, after)


@dataclass(frozen=True)
class SourcesReadiness:
    """What a run still needs of the sources once dueflow's own tables are right
    (`dueflow init-db`): nothing (`ready`), or each problem and the next command."""

    problems: tuple[str, ...]  # one line each
    next_step: str  # the command to run next

    @property
    def ready(self) -> bool:
        return not self.problems


def sources_readiness(settings: Settings) -> SourcesReadiness:
    """Whether every source relation can be read as mapped, and if not what to do next:
    with no mapping file, `dueflow sources init` drafts one from the schema's tables (or
    sample tables, to try dueflow out); with one, correct it. Reads only."""
    from dueflow.tasks.adapters.sources import SourceError

    mapping = settings.source_mapping()
    try:
        db.Database(settings.database_url, settings.db_lock_timeout, settings.ledger_schema).with_sources(
            mapping, settings.source_schema, settings.timezone)
    except SourceError as exc:
        if mapping.given:
            return SourcesReadiness(tuple(p.line() for p in exc.problems),
                                    f"correct {mapping.origin} as said, then `dueflow check --sources`")
        schema = f" --schema {settings.source_schema}" if settings.source_schema else ""
        return SourcesReadiness(
            tuple(f"{p.source}: {p.detail}" for p in exc.problems),
            f"`dueflow sources init{schema} --output sources.toml` drafts a mapping from your tables, then"
            " DUEFLOW_SOURCES_FILE=sources.toml and `dueflow check --sources` (or, to try dueflow on sample"
            " tables: `dueflow init-db --with-sample-tables`)")
    return SourcesReadiness((), "`dueflow check --sources` shows how each source is read, then `dueflow run"
                                " --dry-run`")


@dataclass(frozen=True)
class MappingDraft:
    """`dueflow sources init`: the mapping file's text, and what it chose."""

    text: str
    where: str  # the schema read, as the file's header says it
    chosen: dict[str, str | None]  # source -> relation (None: not guessed)
    todo: int  # the guesses left to a person

    def summary(self) -> str:
        chosen = ", ".join(f"{source} ← {relation or 'TODO'}" for source, relation in self.chosen.items())
        left = f"; {self.todo} TODO(s) to fill in" if self.todo else ""
        return f"drafted from the tables of {self.where}: {chosen}{left}"


def draft_mapping(settings: Settings, schema: str | None = None) -> MappingDraft:
    """A first mapping file of the sources, drafted from the tables and columns of `schema`
    (DUEFLOW_SOURCE_SCHEMA, else the search path; SQLite: the database) and the values of
    their status, flag and locale columns (tasks/core/mapping_draft.py). Reads only."""
    from dueflow.tasks.adapters import catalog
    from dueflow.tasks.core.mapping_draft import draft_sources, mapping_text, value_columns

    engine = reachable(settings)
    dialect = db.dialect(engine)
    schema = schema or settings.source_schema
    if dialect == "sqlite" and schema:
        raise ConfigError("SQLite has no schemas: leave --schema and DUEFLOW_SOURCE_SCHEMA unset")
    where = f"schema {schema}" if schema else "the search path" if dialect == "postgresql" else "the database"
    relations = catalog.relations(engine, schema)
    if not relations:
        raise ConfigError(f"no table or view in {where} that this user can see: name the schema of your"
                          " tables with --schema (nothing was written)")
    drafts = draft_sources(relations, dialect)
    drafts = draft_sources(relations, dialect, catalog.distinct_values(engine, value_columns(drafts)))
    text = mapping_text(drafts, where, dialect, relations)
    return MappingDraft(text, where, {d.source: d.relation.name if d.relation else None for d in drafts},
                        sum(line.startswith("# TODO") for line in text.splitlines()))


def load_sample_data(settings: Settings) -> int:
    """`dueflow demo`: the ledger and the sample source tables, and sample rows for today
    covering every lead, the boundaries and a few bad rows; how many rows were added."""
    from dueflow.tasks.adapters.sample_data import seed_sample_data

    engine = engine_of(settings)
    db.init_db(engine, sample_tables=True, source_schema=settings.source_schema)
    return seed_sample_data(engine, settings.today(), settings.source_schema)


INVOICE_STATE_COLUMNS = ("invoice_id", "client_id", "number", "invoice_status", "state", "held",
                         "state_as_of", "step_status", "what_to_do", "steps", "hold_until",
                         "client_paused_until", "profile")


def invoice_states(settings: Settings) -> pd.DataFrame:
    """Each invoice's dunning state (sql/invoice_state), read through the sources: its last
    step's outcome in the vocabulary's words and what to do about it, and why it is held —
    a client paused with no end is said so, never left to read as a plain SENT."""
    from dueflow.tasks.core.vocabulary import ledger_outcomes, todos

    database = db.open_database(settings)
    frame = db.extract_frame(database.engine, database.source_statement("invoice_state"), {})
    # A flag as the database gives it: a boolean, 0/1, or SQLite's and psycopg2's text forms.
    permanent = frame["step_permanent"].astype("string").str.lower().isin(["true", "t", "1"])
    outcome = ledger_outcomes(frame["step_status"], permanent, frame["step_sending_at"])
    open_ = ~frame["state"].isin(["PAID", "VOID", "DRAFT"])
    # dunning_paused has no end: the invoice waits until someone unpauses its client.
    paused = open_ & (pd.to_numeric(frame["client_paused"]).fillna(0) > 0)
    held = pd.Series(pd.NA, index=frame.index, dtype="string").mask(paused, "client paused, no end")
    what = todos(outcome, pd.Series("KEY", index=frame.index), frame["step_retry_after"])
    return frame.assign(step_status=outcome, held=held, what_to_do=what.where(outcome.notna(), None)
                        ).reindex(columns=list(INVOICE_STATE_COLUMNS))


class Settled(StrEnum):
    """What `resolve` did with one key."""

    PENDING = "pending"  # a pending row settled as the operator said
    BOUNCED = "bounced"  # a bounced row settled as the operator said
    FAILED = "failed"  # a failed row (or a bounced one) to be sent once more (--as retry)
    CHANGED = "changed meanwhile"  # it changed between the look and the write: left as it is
    NOT_SETTLEABLE = "not settleable"  # not in a state this outcome settles (or not in the ledger)
    NEVER_HANDED = "never handed to SMTP"  # pending, never claimed: it cannot have been sent


# What each `--as` settles: sent and failed a pending or bounced row (the operator's word
# on an outcome); retry a failed or bounced one (send it again, once).
RETRY = "retry"
SETTLES = {"sent": ("claimed", "unclaimed", "bounced"), "failed": ("claimed", "unclaimed", "bounced"),
           RETRY: ("failed", "bounced")}


@dataclass(frozen=True)
class Resolution:
    key: str
    settled: Settled
    was: str | None  # its state before: claimed, unclaimed, bounced, sent, … (None: no such key)

    @property
    def done(self) -> bool:
        return self.settled in (Settled.PENDING, Settled.BOUNCED, Settled.FAILED)


def resolve(engine: Engine, keys: Sequence[str], outcome: str, note: str, by: str | None = None
            ) -> list[Resolution]:
    """Settle each key as `outcome`, recording who (`by`) and when: `sent` or `failed` (a
    later run sends it again) after an operator checked the mail server's log — a pending
    row that may have left, or a bounced one (docs/bounces.md); `retry` — a failed row
    (also a permanent refusal, or one out of attempts) or a bounced one goes once more, to
    the address the data says. A row never handed to SMTP cannot have been sent; any other
    row is left as it is."""
    before = db.claimed_keys(engine, keys)
    done = []
    for key in keys:
        state = before.get(key)
        if state not in SETTLES[outcome]:
            settled = Settled.NOT_SETTLEABLE
        elif outcome == RETRY:
            settled = Settled.FAILED if db.resolve_retry(engine, key, note, by) else Settled.CHANGED
        elif state == "bounced":
            settled = (Settled.BOUNCED if db.resolve_bounced(engine, key, outcome, note, by)
                       else Settled.CHANGED)
        elif state == "unclaimed" and outcome == "sent":
            settled = Settled.NEVER_HANDED
        else:
            settled = (Settled.PENDING if db.resolve_pending(engine, key, outcome, note, by)
                       else Settled.CHANGED)
        done.append(Resolution(key, settled, state))
    return done


@dataclass(frozen=True)
class Pruned:
    """What `prune_bodies` did: the date it pruned before, and how many rows."""

    before: date
    rows: int


def prune_bodies(settings: Settings, before: date | None = None) -> Pruned:
    """Retention (docs/operations.md, "Retention"): remove the bodies, subjects, addresses
    and drafted paragraphs of the settled rows whose step got out before `before` — by
    default today minus DUEFLOW_RETAIN_BODIES_DAYS; keys, statuses and dates stay for ever,
    and pending, failed and bounced rows are never pruned. A date after today (a typo that
    would reach tonight's rows) or no date at all is one ConfigError line."""
    today = settings.today()
    if before is None:
        if not settings.retain_bodies_days:
            raise ConfigError("name the date: `dueflow prune --bodies-before YYYY-MM-DD`, or set"
                              " DUEFLOW_RETAIN_BODIES_DAYS (nothing was pruned)")
        before = today - timedelta(days=settings.retain_bodies_days)
    elif before > today:
        raise ConfigError(f"--bodies-before {before} is after today ({today}): a prune keeps at least"
                          " today's rows (nothing was pruned)")
    check_ready(settings, sources=False)
    return Pruned(before, db.prune_bodies(engine_of(settings), before))


def respelled_ids(settings: Settings) -> pd.DataFrame:
    """Every pair of ids (job, source, old_id, new_id) that is one subject spelled two ways:
    an id of the ledger gone from the source, and a source id of the same form with no
    history of its own (tasks/core/rekeying.py) — what `dueflow rekey` lists and settles,
    for the whole source, not only the night's rows."""
    from dueflow.tasks.core.keys import Job, id_forms
    from dueflow.tasks.core.rekeying import PAIR_COLUMNS, respelled

    database = db.open_database(settings)
    subjects = db.ledger_subjects(database.engine)
    ids = db.source_ids(database)
    apart = db.kept_apart(database.engine)
    found = []
    for job, source in ((Job.RENEWAL, "contracts"), (Job.DUNNING, "invoices")):
        known = subjects.loc[subjects["job"] == job, ["subject_id", "subject_form"]]
        present = ids.loc[ids["job"] == job, "id"].astype("string").drop_duplicates()
        fresh = present[~present.isin(known["subject_id"])]
        new = pd.DataFrame({"subject_id": fresh, "subject_form": id_forms(fresh)})
        found.append(respelled(job, source, new, known, set(present), apart))
    return pd.concat(found, ignore_index=True) if found else pd.DataFrame(columns=list(PAIR_COLUMNS))


def settle_id_changes(settings: Settings, pairs: pd.DataFrame, same: bool,
                      decided_by: str) -> dict[tuple[str, str], int]:
    """The operator's word on `pairs`: the same records (their history moves to the new
    ids) or not (kept apart, never asked about again). Rows moved per (job, old id)."""
    return db.record_id_changes(engine_of(settings), pairs, "same" if same else "apart", decided_by)
