"""The ledger and the sources in SQL (SQLite or PostgreSQL): the interfaces of
tasks/core/ports.py over the statements of sql/, run by tasks/adapters/db.py.

Both are small and picklable — the database's URL and resolved source projections, never
a connection — so a delivery batch may run on another worker with its ledger.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError

from dueflow.sql import with_fragments
from dueflow.tasks.adapters import db
from dueflow.tasks.adapters.db import Database
from dueflow.tasks.adapters.db_errors import database_problem, transient
from dueflow.tasks.adapters.sources import failing_expressions
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.guard import Approval, Figures, Tripped, each_night, night_row
from dueflow.tasks.core.message import OutgoingEmail
from dueflow.tasks.core.outcomes import utc_stamp
from dueflow.tasks.core.ports import Store

# The statement that reads each relation's rows by id.
BY_ID = {"contracts": "contracts_by_id", "invoices": "invoices_by_id", "clients": "clients_by_id"}
# The statement that reads every row the forecast needs of each relation.
EVERY = {"invoices": "extract_invoices", "clients": "extract_clients"}


def payments_through(as_of: date | None) -> str:
    """The last business date whose payments count (None: every payment recorded)."""
    return (as_of or date.max).isoformat()


@dataclass(frozen=True)
class SqlSources:
    """The company's relations, through the projections `Database.with_sources` resolved."""

    database: Database

    @property
    def engine(self) -> Engine:
        return self.database.engine

    def renewal_candidates(self, as_of: date, window_start: date, window_end: date,
                           leads: Sequence[int]) -> pd.DataFrame:
        return db.extract_frame(self.engine, self.contracts_extract(), {
            "window_start": window_start.isoformat(), "window_end": window_end.isoformat(),
            "as_of": as_of.isoformat(), "leads": db.json.dumps(sorted(int(lead) for lead in leads))})

    def contracts_extract(self) -> str:
        """sql/extract_contracts through the source projections."""
        return self.database.source_statement("extract_contracts")

    def dunning_candidates(self, bounds: Mapping[str, str], timezone: str) -> pd.DataFrame:
        sources = self.database.sources
        if sources is None:
            raise RuntimeError("the sources were not resolved (Database.with_sources)")
        # The session's TimeZone is the business zone for this read: both statements compare
        # a timestamp's business date (as its text, or by a bound that is that day's first instant).
        return db.extract_frame(self.engine, sources.candidates_statement(bounds["start"]), bounds,
                                session_timezone=timezone)

    def by_id(self, relation: str, ids: Sequence[str], as_of: date | None = None) -> pd.DataFrame:
        return db.rows_by_id(self.database, BY_ID[relation], ids, payments_through(as_of))

    def every(self, relation: str, as_of: date | None = None) -> pd.DataFrame:
        return db.extract_frame(self.engine, self.database.source_statement(EVERY[relation]),
                                {"as_of": payments_through(as_of)})

    def client_payment_history(self, client_ids: Sequence[str]) -> pd.DataFrame:
        return db.rows_by_id(self.database, "client_payment_history_of", client_ids)

    def ids(self) -> pd.DataFrame:
        return db.source_ids(self.database)

    def open_invoices(self) -> int:
        return db.open_invoices(self.database)

    def refused(self, exc: BaseException, doing: str) -> str | None:
        if not isinstance(exc, DBAPIError) or transient(exc):
            return None
        resolved = self.database.sources
        failing = failing_expressions(self.engine, resolved) if resolved is not None else []
        if failing:  # the database does not say which row: at least which expression
            return f"{doing}: " + "; ".join(problem.line() for problem in failing)
        return database_problem(exc, doing)


@dataclass(frozen=True)
class FirstNightSources(SqlSources):
    """The sources of a database whose ledger is not there yet (`dueflow check` before
    `init-db`): read as on a first night, when the ledger settles nothing — the renewal
    extract without its ledger test (sql/fragments/renewal_settled), the only one it makes."""

    def contracts_extract(self) -> str:
        settled = with_fragments("/*include renewal_settled*/", self.database.dialect)
        sql = super().contracts_extract()
        if settled not in sql:  # the statement changed: this reading must change with it
            raise RuntimeError("extract_contracts no longer reads the ledger through renewal_settled")
        return sql.replace(settled, "(FALSE)")


@dataclass(frozen=True)
class SqlLedger:
    """dueflow's own tables in the same database (the reservation and the retries re-check
    the live source rows in the same statement, through the same projections)."""

    database: Database

    @property
    def engine(self) -> Engine:
        return self.database.engine

    def transient(self, exc: BaseException) -> bool:
        return transient(exc)

    # ------------------------------------------------------------------ set-up (SQL only)

    def preflight(self) -> None:
        """Before a night's first write: every statement it runs on the sources plans, and
        dueflow's own tables take a write (rolled back). ConfigError, one line, otherwise;
        taken from `dueflow run`'s own check a moment before, when it made one."""
        db.preflight(self.database, checked_just_before=True)

    def message_id_key(self) -> str:
        """The database's secret for Message-IDs (migration 0007). Never printed."""
        return db.message_id_key(self.engine)

    # ------------------------------------------------------------------ delivery

    def settle(self, token: str, as_of: date, outcomes: Sequence[Mapping[str, Any]] = (),
               release: Sequence[str] = (), claim: Sequence[str] = ()) -> list[OutgoingEmail]:
        return db.settle(self.engine, token, as_of, outcomes, release, claim)

    def statuses(self, keys: Sequence[str]) -> dict[str, str]:
        return db.ledger_status(self.engine, keys)

    def claims(self, keys: Sequence[str]) -> dict[str, str]:
        return db.claimed_keys(self.engine, keys)

    # ------------------------------------------------------------------ reading

    def renewal_history(self, contracts: pd.DataFrame, since: date, timezone: str) -> pd.DataFrame:
        return db.renewal_history_of(self.engine, contracts, since, timezone)

    def dunning_history(self, invoice_ids: Sequence[str]) -> pd.DataFrame:
        return db.rows_by_id(self.database, "dunning_history_of", invoice_ids)

    def first_night(self) -> date | None:
        return db.first_night(self.engine)

    def open_keys(self) -> dict[str, str]:
        return db.open_keys(self.engine)

    def failed_rows(self) -> pd.DataFrame:
        return db.failed_rows(self.engine)

    def resolve_retry(self, key: str, note: str, by: str | None = None) -> bool:
        """An operator's `resolve --as retry` (sql/resolve_retry); the twin mirrors it."""
        return db.resolve_retry(self.engine, key, note, by)

    def ids_of_forms(self, job: str, forms: Sequence[str]) -> pd.DataFrame:
        return db.ledger_ids_of_forms(self.engine, job, forms)

    def kept_apart(self) -> pd.DataFrame:
        return db.kept_apart(self.engine)

    def recent_nights(self, before: date, nights: int) -> list[Figures]:
        return each_night(db.nights_before(self.engine, before, 4 * nights), nights)

    def record_night(self, as_of: date, flow_run_id: str | None, figures: Figures,
                     tripped: Sequence[Tripped] = (), approval: Approval | None = None) -> None:
        db.record_night(self.engine, night_row(as_of, flow_run_id, figures, tripped, approval,
                                               utc_stamp(datetime.now(UTC))))

    # ------------------------------------------------------------------ writing

    def quarantine(self, job: str, rows: pd.DataFrame, as_of: date, flow_run_id: str | None) -> None:
        db.quarantine(self.engine, job, rows, as_of, flow_run_id)

    def reserve(self, job: str, candidates: pd.DataFrame, as_of: date, flow_run_id: str | None,
                status: str = "pending") -> set[str]:
        return db.reserve(self.database, job, candidates, as_of, flow_run_id, status)

    def prepare_to_store(self, rows: int) -> None:
        if rows >= db.ANALYZE_BEFORE_STORING:
            db.refresh_statistics(self.engine)  # the planner has not seen the rows just reserved

    def store_messages(self, messages: Sequence[Mapping[str, Any]]) -> None:
        db.store_messages(self.engine, messages)

    def restate_messages(self, messages: Sequence[Mapping[str, Any]]) -> None:
        db.restate_messages(self.engine, messages)

    def record_unrendered(self, failures: Sequence[tuple[str, str]]) -> None:
        db.record_unrendered(self.engine, failures)

    def retry_candidates(self, as_of: date, max_attempts: int, now: datetime) -> pd.DataFrame:
        return db.retry_candidates(self.database, as_of, max_attempts, now)

    def requeue_failed(self, flow_run_id: str | None, messages: Sequence[Mapping[str, Any]]) -> None:
        db.requeue_failed(self.database, flow_run_id, messages)

    def record_unrendered_retries(self, failures: Sequence[tuple[str, str]], retry_after: datetime) -> None:
        db.record_unrendered_retries(self.engine, failures, retry_after)

    def withdraw_unsent(self, as_of: date) -> list[str]:
        return db.withdraw_unsent(self.database, as_of)

    def unsent_rows(self, keys: Sequence[str] | None = None) -> pd.DataFrame:
        return db.unsent_rows(self.engine, keys)

    def prune_bodies(self, before: date) -> int:
        return db.prune_bodies(self.engine, before)

    # ------------------------------------------------------------------ reporting

    def unsettled_counts(self) -> dict[str, int]:
        return db.unsettled_counts(self.engine)

    def unsettled_rows(self, limit: int = 50) -> pd.DataFrame:
        return db.unsettled_rows(self.engine, limit)

    def bounced_rows(self, limit: int = 200) -> pd.DataFrame:
        return db.bounced_rows(self.engine, limit)


def sql_store(database: Database) -> Store:
    """The ledger and the sources of one database (its sources resolved)."""
    return Store(SqlLedger(database), SqlSources(database))


def open_sql(settings: Any) -> tuple[SqlLedger, SqlSources]:
    """The database the settings name, its ledger at this dueflow's version and its source
    relations found and checked: ConfigError, one line, otherwise. Reads only."""
    database = db.open_database(settings)
    return SqlLedger(database), SqlSources(database)


def ledger_of(settings: Any) -> SqlLedger:
    """The ledger the settings name, its sources not resolved (what is read before a run)."""
    return SqlLedger(Database(settings.database_url, settings.db_lock_timeout, settings.ledger_schema))
