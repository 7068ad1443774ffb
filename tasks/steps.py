"""The run's steps as Prefect tasks: extract, decide, reserve, store, quarantine, report.

Each wraps a function of the pure core (`tasks.core`) or of the database adapter; the
wrappers only add Prefect's bookkeeping. DataFrames pass between tasks in memory, so no
task hashes its inputs (NO_CACHE) and nothing is persisted.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from datetime import date, timedelta

from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE
from sqlalchemy.exc import DBAPIError

from dueflow.blocks.settings import LLMConfig
from dueflow.tasks.adapters import db
from dueflow.tasks.adapters.db import Database
from dueflow.tasks.adapters.invoice_files import with_invoice_pdfs
from dueflow.tasks.core.addresses import Mailbox
from dueflow.tasks.core.decide import (
    Decision,
    DunningStart,
    due_dunning_steps,
    due_renewal_alerts,
    dunning_steps_for,
    normalise_leads,
    renewal_alerts_for,
    renewal_window,
    retried_keys,
    settled_apart,
    with_settled,
)
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.invoice_pdf import PdfTemplate
from dueflow.tasks.core.keys import CLIENT_STEPS
from dueflow.tasks.core.llm_guard import DRAFTED_STEPS, payment_history_frame, reminders, template_draft
from dueflow.tasks.core.message import OutgoingEmail
from dueflow.tasks.core.money import amounts_from_minor
from dueflow.tasks.core.render import (
    Composed,
    Draft,
    EmailLook,
    Prepared,
    compose_dunning_emails,
    compose_renewal_alerts,
    stored_drafts,
)
from dueflow.tasks.core.report import RunSummary, markdown, table_rows
from dueflow.tasks.core.statuses import RowStatus
from dueflow.tasks.core.validate import as_dates

ARTIFACT_ROWS = 1000


@dataclass(frozen=True)
class SourcesRefused:
    """The database refused to read a source (a statement timeout, a privilege, a value an
    expression of the mapping cannot read): what the operator is told, in one line, before
    anything is written. Returned, not raised, so the task's failure is not logged as a
    traceback."""

    line: str


def _read_or_refusal(what: str, read: Callable[[], dict[str, pd.DataFrame]]
                     ) -> dict[str, pd.DataFrame] | SourcesRefused:
    try:
        return read()
    except DBAPIError as exc:
        if db.transient(exc):
            raise
        return SourcesRefused(db.database_problem(exc, f"reading the {what} failed; nothing was written"))


def renewal_sources(database: Database, as_of: date, leads: Sequence[int]) -> dict[str, pd.DataFrame]:
    """Contracts that can be due tonight, and the leads already reserved for their cycles."""
    start, end = renewal_window(as_of, leads)
    engine = database.engine
    # Rows the ledger already settles come with settled_lead set and are not decided again;
    # the history is read only for the others (docs/performance.md).
    contracts = db.extract_frame(engine, database.source_statement("extract_contracts"), {
        "window_start": start.isoformat(), "window_end": end.isoformat(), "as_of": as_of.isoformat(),
        "leads": json.dumps(normalise_leads(leads))})
    return {"contracts": amounts_from_minor(contracts),
            "history": db.renewal_history_of(engine, contracts, as_of)}


@task(name="extract-renewals", cache_policy=NO_CACHE)
def extract_renewals(database: Database, as_of: date,
                     leads: Sequence[int]) -> dict[str, pd.DataFrame] | SourcesRefused:
    return _read_or_refusal("contracts", lambda: renewal_sources(database, as_of, leads))


@task(name="decide-renewals", cache_policy=NO_CACHE)
def decide_renewals(extracted: dict[str, pd.DataFrame], as_of: date, leads: Sequence[int]) -> Decision:
    contracts, settled = settled_apart(extracted["contracts"])
    return with_settled(due_renewal_alerts(contracts, extracted["history"], as_of, leads), settled, as_of)


def dunning_sources(database: Database) -> dict[str, pd.DataFrame]:
    """Open invoices, their clients, and the dunning steps already in the ledger for them
    (every open invoice: `dueflow forecast` looks at the nights ahead)."""
    engine = database.engine
    queries = {"invoices": "extract_invoices", "clients": "extract_clients", "history": "dunning_history"}
    extracted = {name: db.extract_frame(engine, database.source_statement(query), {})
                 for name, query in queries.items()}
    return extracted | {"invoices": amounts_from_minor(extracted["invoices"])}


def dunning_candidate_sources(database: Database, as_of: date, delays: Sequence[int],
                              start: DunningStart, timezone: str = "UTC") -> dict[str, pd.DataFrame]:
    """Tonight's share of `dunning_sources`: the invoices whose next step may be due
    (sql/dunning_candidates), and only their clients and history. What a night decides
    is the same (tests/integration/test_dunning_candidates.py)."""
    engine = database.engine
    last_start = as_of - timedelta(days=delays[0])  # the latest start whose first step is due
    invoices = db.extract_frame(engine, database.source_statement("dunning_candidates"), {
        "start": start, "start_by": (last_start + timedelta(days=1)).isoformat(),
        "start_by_text": (last_start + timedelta(days=3)).isoformat(),
        "after_first_by": (as_of - timedelta(days=delays[1])).isoformat(),
        "after_second_by": (as_of - timedelta(days=delays[2])).isoformat()}, session_timezone=timezone)
    def distinct(column: str) -> list[str]:
        return invoices[column].dropna().astype(str).unique().tolist()

    clients = db.rows_by_id(database, "clients_by_id", distinct("client_id"))
    history = db.rows_by_id(database, "dunning_history_of", distinct("id"))
    return {"invoices": amounts_from_minor(invoices), "clients": clients, "history": history}


@task(name="extract-dunning", cache_policy=NO_CACHE)
def extract_dunning(database: Database, as_of: date | None = None, delays: Sequence[int] = (7, 5, 7),
                    start: DunningStart = "sent", timezone: str = "UTC"
                    ) -> dict[str, pd.DataFrame] | SourcesRefused:
    if as_of is None:
        return _read_or_refusal("invoices", lambda: dunning_sources(database))
    return _read_or_refusal("invoices", lambda: dunning_candidate_sources(database, as_of, delays, start,
                                                                          timezone))


@task(name="decide-dunning", cache_policy=NO_CACHE)
def decide_dunning(
    extracted: dict[str, pd.DataFrame], as_of: date, delays: Sequence[int], timezone: str,
    escalation_to: str | None, start: DunningStart,
) -> Decision:
    return due_dunning_steps(extracted["invoices"], extracted["clients"], extracted["history"], as_of,
                             delays, timezone, escalation_to, start)


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


@dataclass(frozen=True)
class RenderAgain:
    """What a run renders a ledger row's message again with (its settings, not the row's)."""

    database: Database
    renewal_locale: str
    sender: Mailbox
    timezone: str
    escalation_to: str | None
    look: EmailLook | None = None
    invoice_pdf: PdfTemplate | None = None


def attach_invoices(due: pd.DataFrame, template: PdfTemplate | None) -> pd.DataFrame:
    """Dunning rows with their invoice PDFs checked and hashed (tasks/adapters/invoice_files):
    the reminders to the client carry it; the escalation, to a colleague, does not."""
    if due.empty or template is None:
        return due
    return with_invoice_pdfs(due, template, reminders=due["step"].isin(list(CLIENT_STEPS)))


def changed_attachments(candidates: pd.DataFrame, composed: Composed) -> Composed:
    """`composed` with the retries whose invoice PDF is not the one their first message
    named moved to its failures: a retry sends the identical file, or nothing (G2)."""
    if "attachment_sha256" not in candidates:
        return composed
    stored = {key: sha for key, sha in zip(candidates["key"], candidates["attachment_sha256"], strict=True)
              if isinstance(sha, str) and sha}
    kept, failures = [], list(composed.failures)
    for email in composed.emails:
        before = stored.get(email.key)
        if before is None or email.attachment_sha256 == before:
            kept.append(email)
            continue
        now = (f"now sha256 {email.attachment_sha256[:16]}…" if email.attachment_sha256
               else (email.attachment_note or "now not attached").removeprefix("not attached: "))
        failures.append((email.key, f"not sent again: the invoice PDF is not the one its first message"
                                    f" carried (sha256 {before[:16]}…; {now}); put the original file back"
                                    " and the next run sends it"))
    return Composed(kept, failures, composed.drafts)


@task(name="retry-failed", cache_policy=NO_CACHE)
def retry_failed(again: RenderAgain, as_of: date, flow_run_id: str | None,
                 max_attempts: int) -> list[tuple[str, str]]:
    """Failed rows due for another attempt go back to pending (G4) with their message
    rendered again from the source rows as they are now: a retry goes to the address the
    data now says, with what the email now shows. A permanent failure (a mailbox refused
    it) is retried only when it would now go to another address. Never a `pending` row
    (G3). Returns the retries that could not be rendered, with why (they stay failed)."""
    candidates = db.retry_candidates(again.database, as_of, max_attempts)
    if candidates.empty:
        return []
    composed = changed_attachments(candidates, render_again(again, candidates))
    rendered = pd.DataFrame([e.as_row() for e in composed.emails],
                            columns=[f.name for f in fields(OutgoingEmail)])
    keys = set(retried_keys(candidates, rendered))
    db.requeue_failed(again.database, flow_run_id, [e.as_row() for e in composed.emails if e.key in keys])
    transient = set(candidates.loc[~candidates["permanent"], "key"])
    return [(key, reason) for key, reason in composed.failures if key in transient]


def render_again(again: RenderAgain, rows: pd.DataFrame) -> Composed:
    """Messages for ledger rows rendered again from the source rows as they are now, each
    for the night it was reserved (its `as_of`): rows whose run died before storing one,
    and failed rows a run retries. A paragraph the model drafted for a row stays (G7); a
    row without one gets the template paragraph (the model is only asked for keys a run
    just reserved)."""
    composed = Composed()
    nights = as_dates(rows["as_of"])
    for night in sorted(nights.dropna().unique()):  # one render per reservation night
        composed += _render_night(again, rows[nights == night], pd.Timestamp(night).date())
    return composed


def _render_night(again: RenderAgain, rows: pd.DataFrame, as_of: date) -> Composed:
    composed = Composed()
    database = again.database
    renewals = rows[rows["job"] == "renewal"]
    if not renewals.empty:
        contracts = amounts_from_minor(db.rows_by_id(database, "contracts_by_id",
                                                     renewals["subject_id"].unique().tolist()))
        decision = renewal_alerts_for(contracts, renewals, as_of)
        composed += compose_renewal_alerts(decision.due, again.renewal_locale, again.sender, again.look)
        composed += _not_rendered(decision)
    dunning = rows[rows["job"] == "dunning"]
    if not dunning.empty:
        invoices = amounts_from_minor(db.rows_by_id(database, "invoices_by_id",
                                                    dunning["subject_id"].unique().tolist()))
        clients = db.rows_by_id(database, "clients_by_id",
                                invoices["client_id"].dropna().astype(str).unique().tolist())
        history = db.rows_by_id(database, "dunning_history_of", dunning["subject_id"].unique().tolist())
        decision = dunning_steps_for(invoices, clients, dunning, as_of, again.timezone, again.escalation_to)
        stored = stored_drafts(dunning)
        drafts = {r.key: stored.get(r.key) or template_draft(r, "rendered again: template paragraph")
                  for r in reminders(decision.due)}
        composed += compose_dunning_emails(attach_invoices(decision.due, again.invoice_pdf), history,
                                           again.sender, drafts, as_of, again.look)
        composed += _not_rendered(decision)
    return composed


def _not_rendered(decision: Decision) -> Composed:
    return Composed(failures=[(key, f"could not render the email: {reason}") for key, reason in zip(
        decision.quarantined["source_id"], decision.quarantined["reason"], strict=True)])


def compose_renewals(winners: pd.DataFrame, locale: str, sender: Mailbox,
                     look: EmailLook | None = None) -> Composed:
    """Render renewal alerts (called inside compose_and_store, the task)."""
    return compose_renewal_alerts(winners, locale, sender, look)


@task(name="draft-reminder-paragraphs", cache_policy=NO_CACHE)
def draft_reminders(
    winners: pd.DataFrame, database: Database, timezone: str, llm: LLMConfig | None
) -> list[Draft]:
    """The personalised paragraph of each REMINDED_1/2 this run won (G7). The model is
    asked only here, only for freshly reserved keys: a retry resends the stored text."""
    reminders = winners[winners["step"].isin(DRAFTED_STEPS)]
    if reminders.empty:
        return []
    from dueflow.tasks.adapters.llm_client import draft_paragraphs

    history = pd.DataFrame()
    if llm is not None:  # the payment history only feeds the model's prompt
        # Through the same text reading as the extract: no value of a source column can
        # raise here where the extract would have quarantined its row.
        raw = db.extract_frame(database.engine, database.source_statement("client_payment_history"), {})
        history = payment_history_frame(amounts_from_minor(raw), timezone)
    return draft_paragraphs(reminders, history, llm)


def compose_dunning(
    winners: pd.DataFrame, history: pd.DataFrame, sender: Mailbox, drafts: Sequence[Draft],
    as_of: date | None = None, look: EmailLook | None = None,
) -> Composed:
    """Render dunning emails (called inside compose_and_store, the task)."""
    return compose_dunning_emails(winners, history, sender, {d.key: d for d in drafts}, as_of, look)


@task(name="compose-and-store", cache_policy=NO_CACHE)
def compose_and_store(render: Callable[[], Composed], database: Database | None) -> Prepared:
    """Render one chunk of tonight's winners and, unless this is a dry run (no database),
    commit each message on its ledger row before anything is sent (G2); rows that could not
    be rendered are marked failed. Returns only the addressing: Prefect keeps every task's
    result until the flow run ends, and a chunk's messages take tens of MB."""
    composed = render()
    if database is not None:
        db.store_messages(database.engine, [email.as_row() for email in composed.emails])
        db.record_unrendered(database.engine, composed.failures)
    return composed.addressed()


@task(name="publish-report", cache_policy=NO_CACHE)
def publish_report(summary: RunSummary) -> None:
    """A table artifact of this run's rows, what needs attention first, and a markdown
    summary (no secrets in either). A dry run publishes under its own keys, so a preview
    never becomes the latest production summary."""
    prefix = "nightly-alerts-dry-run" if summary.dry_run else "nightly-alerts"
    shown = int((summary.rows["status"] != RowStatus.ALREADY_HANDLED).sum())
    table = table_rows(summary, ARTIFACT_ROWS)
    create_table_artifact(
        key=f"{prefix}-rows", table=table.to_dict("records"),
        description=summary.headline() + (f" (first {ARTIFACT_ROWS} of {shown} rows)"
                                          if shown > ARTIFACT_ROWS else ""),
    )
    create_markdown_artifact(key=f"{prefix}-summary", markdown=markdown(summary))  # its headline inside
