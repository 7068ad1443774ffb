"""The run's steps as Prefect tasks: extract, decide, quarantine, reserve, plan, compose
and store, report.

Each wraps a method of a job (tasks/jobs.py), a function of the pure core (`tasks.core`)
or of the database adapter; the wrappers only add Prefect's bookkeeping (a task run per
step and job in the UI: extract-renewals, decide-dunning, …). DataFrames pass between
tasks in memory, so no task hashes its inputs (NO_CACHE) and nothing is persisted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING

from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE
from sqlalchemy.exc import DBAPIError

from dueflow.blocks.settings import LLMConfig
from dueflow.tasks.adapters import db
from dueflow.tasks.adapters.db import Database
from dueflow.tasks.adapters.sources import failing_expressions
from dueflow.tasks.core.decide import (
    Decision,
)
from dueflow.tasks.core.frames import pd, records
from dueflow.tasks.core.phrasebook import DRAFTED_STEPS, Phrasebook
from dueflow.tasks.core.render import Composed, Prepared
from dueflow.tasks.core.report import RunSummary, markdown, table_rows
from dueflow.tasks.core.statuses import RowStatus
from dueflow.tasks.core.tone import Draft

if TYPE_CHECKING:
    from dueflow.tasks.jobs import NightJob

ARTIFACT_ROWS = 1000


@dataclass(frozen=True)
class SourcesRefused:
    """The database refused to read a source (a statement timeout, a privilege, a value an
    expression of the mapping cannot read): what the operator is told, in one line, before
    anything is written. Returned, not raised, so the task's failure is not logged as a
    traceback."""

    line: str


def _read_or_refusal(what: str, read: Callable[[], dict[str, pd.DataFrame]], database: Database
                     ) -> dict[str, pd.DataFrame] | SourcesRefused:
    try:
        return read()
    except DBAPIError as exc:
        if db.transient(exc):
            raise
        doing = f"reading the {what} failed; nothing was written"
        failing = failing_expressions(database.engine, database.sources) if database.sources else []
        if failing:
            return SourcesRefused(f"{doing}: " + "; ".join(problem.line() for problem in failing))
        return SourcesRefused(db.database_problem(exc, doing))


@task(name="extract", task_run_name="extract-{job.label}", cache_policy=NO_CACHE)
def extract(job: NightJob, database: Database, as_of: date) -> dict[str, pd.DataFrame] | SourcesRefused:
    """One job's extract (`job.extract`); a database that refuses it says so in one line,
    naming the mapping's expression that fails on a value when one does."""
    return _read_or_refusal(job.source, lambda: job.extract(database, as_of), database)


@task(name="decide", task_run_name="decide-{job.label}", cache_policy=NO_CACHE)
def decide(job: NightJob, extracted: dict[str, pd.DataFrame], as_of: date) -> Decision:
    return job.decide(extracted, as_of)


@task(name="quarantine-rows", cache_policy=NO_CACHE)
def quarantine_rows(database: Database, job: str, rows: pd.DataFrame, as_of: date,
                    flow_run_id: str | None) -> None:
    db.quarantine(database.engine, job, rows, as_of, flow_run_id)


@task(name="reserve-slots", cache_policy=NO_CACHE)
def reserve_slots(
    database: Database, job: str, candidates: pd.DataFrame, as_of: date, flow_run_id: str | None,
    status: str = "pending",
) -> tuple[set[str], dict[str, str]]:
    """One bulk INSERT … ON CONFLICT DO NOTHING RETURNING: the keys this run won, and for
    the candidates it did not win, their ledger status (absent: the source row changed
    after extraction and the reservation's re-check refused it)."""
    won = db.reserve(database, job, candidates, as_of, flow_run_id, status)
    lost = [key for key in candidates["key"] if key not in won]
    return won, db.ledger_status(database.engine, lost)


@task(name="store-messages", cache_policy=NO_CACHE)
def store_messages(database: Database, composed: Composed) -> None:
    """Commit each rendered message on its ledger row before anything is sent (G2), and
    mark the rows that could not be rendered as failed (known not sent)."""
    db.store_messages(database.engine, [email.as_row() for email in composed.emails])
    db.record_unrendered(database.engine, composed.failures)


@task(name="plan-reminder-paragraphs", cache_policy=NO_CACHE)
def draft_reminders(winners: pd.DataFrame, database: Database, as_of: date, timezone: str,
                    book: Phrasebook, llm: LLMConfig | None, ask_model: bool = True) -> list[Draft]:
    """The paragraph of each REMINDED_1/2 among `winners` (G7): dueflow's plan from the
    client's payment history, and the model's where one is configured and its answer is a
    valid plan. The model is asked only here, only for keys this run just reserved
    (`ask_model`): a retry resends the stored paragraph."""
    from dueflow.tasks.adapters.llm_client import plan_paragraphs
    from dueflow.tasks.core.tone import payment_history_frame

    reminders = winners[winners["step"].isin(DRAFTED_STEPS)]
    if reminders.empty:
        return []
    # Through the same text reading as the extract: no value of a source column can raise
    # here where the extract would have quarantined its row.
    clients = reminders["client_id"].dropna().astype(str).unique().tolist()
    history = payment_history_frame(db.rows_by_id(database, "client_payment_history_of", clients), timezone)
    return plan_paragraphs(reminders, history, as_of, book, llm, ask_model)


@task(name="compose-and-store", task_run_name="compose-and-store-{job.label}", cache_policy=NO_CACHE)
def compose_and_store(job: NightJob, winners: pd.DataFrame, extracted: dict[str, pd.DataFrame], as_of: date,
                      database: Database, store: bool) -> Prepared:
    """Render one chunk of tonight's winners (`job.drafts`, then `job.compose`) and, unless
    this is a dry run (`store` false), commit each message on its ledger row before anything
    is sent (G2); rows that could not be rendered are marked failed. Returns only the
    addressing: Prefect keeps every task's result until the flow run ends, and a chunk's
    messages take tens of MB."""
    composed = job.compose(winners, extracted, as_of, job.drafts(winners, database, as_of))
    if store:
        db.store_messages(database.engine, [email.as_row() for email in composed.emails])
        db.record_unrendered(database.engine, composed.failures)
    return composed.addressed()


def publish_report(summary: RunSummary) -> None:
    """A table artifact of this run's rows, what needs attention first, and a markdown
    summary (no secrets in either). A dry run publishes under its own keys, so a preview
    never becomes the latest production summary. Called by the flow itself, not as a task:
    the artifacts belong to the flow run (its Artifacts tab lists them under the run, not
    under a task run)."""
    prefix = "nightly-alerts-dry-run" if summary.dry_run else "nightly-alerts"
    shown = int((summary.rows["status"] != RowStatus.ALREADY_HANDLED).sum())
    table = table_rows(summary, ARTIFACT_ROWS)
    create_table_artifact(
        key=f"{prefix}-rows", table=records(table),
        description=summary.headline() + (f" (first {ARTIFACT_ROWS} of {shown} rows)"
                                          if shown > ARTIFACT_ROWS else ""),
    )
    create_markdown_artifact(key=f"{prefix}-summary", markdown=markdown(summary))  # its headline inside
