"""The nightly run: extract → decide → reserve → compose → deliver → report (docs/design.md),
for both jobs — renewal alerts and invoice dunning — in one flow run.

The steps (pandas, SQLAlchemy, the templates) are imported when a run starts, not with
this module: deploying, serving, a worker and the CLI load it in a fraction of a second
(issue 14; tests/integration/test_flow_import.py keeps it so)."""

from __future__ import annotations

import logging
from datetime import date
from typing import TYPE_CHECKING, Annotated, Any
from uuid import UUID

from prefect import State, flow, get_run_logger
from prefect.runtime import deployment, flow_run
from prefect.task_runners import ThreadPoolTaskRunner
from pydantic import Field, WithJsonSchema
from pydantic.fields import FieldInfo

from dueflow.blocks.errors import ConfigError
from dueflow.blocks.settings import Settings
from dueflow.flows.prefect_api import no_server_telemetry
from dueflow.tasks.core import defaults
from dueflow.tasks.core import parameters as P
from dueflow.tasks.core.defaults import DELIVERY_WORKERS
from dueflow.tasks.core.locales import Locale

if TYPE_CHECKING:
    from collections.abc import Callable

    from dueflow.tasks.core.guard import Approval, NightReview
    from dueflow.tasks.core.parameters import RunParameters
    from dueflow.tasks.core.report import RunSummary
    from dueflow.tasks.night import Night

__all__ = ["DELIVERY_WORKERS", "nightly_alerts"]

# Before a notebook's first call starts a temporary Prefect server (flows/prefect_api.py).
no_server_telemetry()


def _shown(**schema: Any) -> FieldInfo:
    """Constraints the run form shows (its JSON schema) and tasks/core/parameters.py checks
    with one line naming the parameter; pydantic is not asked to enforce them, as its error
    would be a multi-line report instead."""
    return Field(json_schema_extra=schema)


Leads = Annotated[list[int], _shown(minItems=1, maxItems=P.MAX_LEADS, items={
    "type": "integer", "minimum": 0, "maximum": P.MAX_LEAD_DAYS})]
Delays = Annotated[list[int], _shown(minItems=P.DUNNING_STEP_COUNT, maxItems=P.DUNNING_STEP_COUNT, items={
    "type": "integer", "minimum": 1, "maximum": P.MAX_DELAY_DAYS})]
Attempts = Annotated[int, _shown(minimum=1, maximum=P.MAX_ATTEMPTS)]
Backoff = Annotated[int, _shown(minimum=0, maximum=P.MAX_BACKOFF_MINUTES)]
# as_of is shown as a plain text field, empty for today: its schema is a string's alone (an
# `anyOf` with null makes the run form offer a "date | None" switch and say 'Property is
# type "None"'), whose default in the form is "" (a null there is refused by the form and by
# the server). The flow reads "" and None as today, and checks a date with
# tasks/core/parameters.py (`as_of_of`).
AsOf = Annotated[date | str | None, WithJsonSchema({"type": "string", "default": "", "maxLength": 10})]
# send_cap and email_block: one type each in the form, never an `anyOf` with null (the form
# said 'Property is type "None"'); send_cap left empty (null) is no cap, email_block's "" the
# variable's.
SendCap = Annotated[int | None, WithJsonSchema({"type": "integer", "minimum": 0, "maximum": P.MAX_SEND_CAP})]
# dunning_start is a setting too (DUEFLOW_DUNNING_START): empty, the form's default, is the
# setting's; a string schema alone, as as_of's, so that the form offers no None.
Start = Annotated[str | None, WithJsonSchema({"type": "string", "enum": ["", *P.DUNNING_STARTS],
                                              "default": ""})]
Unit = Annotated[str, _shown(enum=list(P.DELAY_UNITS))]
EmailBlock = Annotated[str | None, WithJsonSchema({"type": "string", "default": "",
                                                   "maxLength": P.MAX_BLOCK_NAME})]
# adopt is a one-time take-over, never a night's setting: the form says so in its title.
Adopt = Annotated[bool, _shown(title="adopt — one-time take-over: sends nothing")]
# approve answers, before it is asked, for a night that looks wrong (tasks/core/guard.py).
Approve = Annotated[str, _shown(maxLength=20, title="approve — only for a night that looks wrong:"
                                " all, none, or a number of emails per job")]


def run_name() -> str:
    """The run's name in the UI: its business date, and its mode when it sends nothing."""
    params = flow_run.parameters
    as_of = params.get("as_of")
    if not as_of:
        try:
            as_of = Settings.from_env().today()
        except ConfigError:
            as_of = date.today()  # the run itself reports the bad setting
    mode = " dry run" if params.get("dry_run") else " adopt" if params.get("adopt") else ""
    return f"{as_of}{mode}"


def checked_parameters(**raw: object) -> RunParameters:
    """The flow's parameters checked all together, before anything is read or written: one
    ConfigError naming the first parameter out of range and what it allows."""
    from dueflow.tasks.core.parameters import ParameterError, run_parameters

    try:
        return run_parameters(**raw)
    except ParameterError as exc:
        raise ConfigError(str(exc)) from None


def checked_date(as_of: date | str | None) -> date | None:
    """The as_of parameter as a date, None for today: the run form gives text ("" when left
    empty), a Python call a date or None. A text that is not a date is one ConfigError line."""
    from dueflow.tasks.core.parameters import ParameterError, as_of_of

    try:
        return as_of_of(as_of)
    except ParameterError as exc:
        raise ConfigError(str(exc)) from None


def checked_as_of(as_of: date | None, settings: Settings, first_night: Callable[[], date | None],
                  allow_any: bool) -> date:
    """The night to run: today in the business time zone when empty; otherwise refused (one
    ConfigError) when it is more than 31 days ahead or before the ledger's first night,
    unless allowed (parameter allow_any_as_of, or DUEFLOW_ALLOW_ANY_AS_OF)."""
    from dueflow.tasks.core.parameters import ParameterError, as_of_window

    allow_any = settings.with_parameters(allow_any_as_of=allow_any).allow_any_as_of
    today = settings.today()
    if as_of is None:
        return today
    # Only a night before today can be before the ledger's first: today always may run.
    first = first_night() if isinstance(as_of, date) and as_of < today and not allow_any else None
    try:
        return as_of_window(as_of, today, first, allow_any)
    except ParameterError as exc:
        raise ConfigError(str(exc)) from None


def check_night(settings: Settings, as_of: date | None, dry_run: bool, params: dict[str, object]) -> None:
    """The flow's own checks of its parameters and night, before Prefect is started: a value
    out of range is one line (exit 2), and nothing was written."""
    import inspect

    from dueflow.tasks.adapters.sql_store import ledger_of

    raw = {name: p.default for name, p in inspect.signature(nightly_alerts.fn).parameters.items()}
    raw |= params | {"dry_run": dry_run}
    allow_any = raw.pop("allow_any_as_of")
    del raw["as_of"]
    raw["dunning_start"] = settings.with_parameters(email_block=raw.pop("email_block"),
                                                    dunning_start=raw["dunning_start"]).dunning_start
    checked_approval(raw.pop("approve"))
    checked_parameters(**raw)
    checked_as_of(as_of, settings, ledger_of(settings).first_night, allow_any)


# validate_parameters=False: pydantic would coerce a value before dueflow sees it (False as
# send_cap 0, true in dunning_delays as 1); tasks/core/parameters.py checks each raw value,
# bool never a number, with one line naming the parameter (issue 36).
@flow(name="nightly-alerts", flow_run_name=run_name, persist_result=True, validate_parameters=False,
      # Prefect's annotation is invariant in the future type its own runner returns:
      task_runner=ThreadPoolTaskRunner(max_workers=DELIVERY_WORKERS))  # type: ignore[arg-type]
def nightly_alerts(
    as_of: AsOf = "",
    dry_run: bool = False,
    renewal_leads: Leads = list(defaults.RENEWAL_LEADS),  # noqa: B006 - Prefect copies it
    renewal_locale: Locale = "en",
    dunning_delays: Delays = list(defaults.DUNNING_DELAYS),  # noqa: B006
    dunning_start: Start = "",
    dunning_delay_unit: Unit = "calendar",
    renewal_on_any_day: bool = False,
    retry_max_attempts: Attempts = defaults.RETRY_MAX_ATTEMPTS,
    retry_backoff_minutes: Backoff = defaults.RETRY_BACKOFF_MINUTES,
    send_cap: SendCap = None,
    adopt: Adopt = False,
    allow_any_as_of: bool = False,
    email_block: EmailBlock = "",
    approve: Approve = "",
) -> State:
    """Send every renewal alert and invoice reminder due on a day exactly once: renewal
    alerts to contract owners before a contract renews, and payment reminders (then an
    escalation to a colleague) for unpaid invoices.

    Args:
        as_of: The business day to run for, as YYYY-MM-DD; a past day catches up a missed
            night. Leave it empty for today in the business time zone (DUEFLOW_TIMEZONE).
        dry_run: Decide and render on the same code path, but write nothing and send
            nothing; the result lists what would be sent.
        renewal_leads: Days before a contract's renewal date on which its owner is alerted,
            e.g. [60, 30, 15]; only the most urgent one due is sent.
        renewal_locale: Language of the renewal alerts.
        dunning_delays: Days between dunning steps for clients without a dunning profile:
            from the start to the first reminder, from it to the second, from it to the
            escalation to a colleague. A client's profile (clients.dunning_profile,
            DUEFLOW_PROFILES_FILE) wins; the run's log says the delays in force for each.
        dunning_start: What the first delay counts from: the day the invoice was sent
            ("sent": a first reminder may go before the due date) or its due date ("due").
            Empty means DUEFLOW_DUNNING_START (default "sent"); a client's profile's start
            wins over both.
        dunning_delay_unit: "calendar" days, or "business" days of the calendar
            (DUEFLOW_BUSINESS_DAYS, DUEFLOW_HOLIDAYS, DUEFLOW_CLOSED_DAYS_FILE).
        renewal_on_any_day: Renewal alerts go out on closed days too (otherwise, with a
            calendar, they wait for the next business day as reminders do).
        retry_max_attempts: Attempts in all for an email that surely failed; later runs
            retry it until then.
        retry_backoff_minutes: Minutes to wait after a failed attempt before the next.
        send_cap: At most this many new emails per job in this run, most urgent first;
            the rest wait for a later run. Empty means no cap.
        adopt: ONE-TIME TAKE-OVER, not for a nightly run: records everything due on as_of
            as already handled and sends nothing, so that dueflow starts on existing data
            without mailing it all at once (the same as `dueflow adopt`; try it with dry_run
            first). Leave it off.
        allow_any_as_of: Take an as_of more than 31 days after today or before the ledger's
            first night (a backfill, a test on dates of its own); otherwise such a night is
            refused as a likely typo (docs/parameters.md).
        email_block: The name of a DueflowEmail block whose sender, Reply-To, company,
            signature, templates, escalation address, archive Bcc and invoice PDFs this run's
            emails use (one deployment per company). Empty means DUEFLOW_EMAIL_BLOCK, or the
            DUEFLOW_* variables.
        approve: For a night that looks wrong (docs/operations.md, "A night that looks
            wrong"), a person's word before it is asked: all, none, or a number of emails
            per job. Leave it empty: such a night then pauses in Prefect and asks (a run
            from the command line or Python stops and says how to approve).

    Returns:
        The run's final state, whose result — what a call of the flow returns — is the
        RunSummary. (Annotated State: Prefect reads every annotation to build the run
        form, and RunSummary is imported only when a run starts.)
    """
    def night() -> State:
        nonlocal as_of  # read below as a checked date
        from dueflow.flows.collector import run_started
        from dueflow.flows.prefect_api import quiet_own_task_runs

        quiet_own_task_runs()
        from dueflow.tasks.adapters.lock import run_lock
        from dueflow.tasks.adapters.sql_store import open_sql
        from dueflow.tasks.core.ports import Store
        from dueflow.tasks.core.report import RunSummary
        from dueflow.tasks.deliver import DeliverySettings
        from dueflow.tasks.jobs import night_jobs
        from dueflow.tasks.night import Night

        run_started(flow_run.get_id())  # a worker's process of this run's own: what it loaded, frozen
        settings = Settings.from_env().with_parameters(email_block=email_block,
                                                       dunning_start=dunning_start).with_blocks()
        settings.check_templates()  # a broken DUEFLOW_TEMPLATES_DIR template: one line, nothing written
        params = checked_parameters(
            renewal_leads=renewal_leads, dunning_delays=dunning_delays, dunning_start=settings.dunning_start,
            renewal_locale=renewal_locale, retry_max_attempts=retry_max_attempts,
            retry_backoff_minutes=retry_backoff_minutes, send_cap=send_cap, adopt=adopt, dry_run=dry_run,
            dunning_delay_unit=dunning_delay_unit, renewal_on_any_day=renewal_on_any_day)
        as_of = checked_date(as_of)  # a parameter: checked with the others, before the database
        approval = checked_approval(approve)
        logger = get_run_logger()
        # Every source relation found and every statement of the night planned, and dueflow's
        # own tables writable, before the first write: a shape dueflow cannot read is one line.
        ledger, sources = open_sql(settings)
        if as_of is None:
            logger.info("as_of empty: running for %s, today in %s", settings.today(), settings.timezone)
        as_of = checked_as_of(as_of, settings, ledger.first_night, allow_any_as_of)
        if not dry_run:
            ledger.preflight()
        delivery = DeliverySettings(settings.mail_config(), settings.sender(), ledger, as_of,
                                    params.retry_backoff, settings.smtp_max_failures)
        jobs = night_jobs(settings, params, ledger.message_id_key())
        tonight = Night(jobs, Store(ledger, sources), delivery, as_of, params, flow_run.get_id(),
                        settings.retain_bodies_days, settings.today(), logger, settings.guard_bounds(),
                        approval, asking(settings.approval_timeout))
        label_run(dry_run, adopt)
        if dry_run or not settings.run_lock:
            return finish(approved_run(tonight), settings.attention_state)
        warnings: list[str] = []
        with run_lock(ledger.engine, warnings) as acquired:
            if not acquired:
                logger.warning("another dueflow run is active on this database; exiting")
                return finish(RunSummary(as_of=as_of, dry_run=False, flow_run_id=tonight.flow_run_id,
                                         skipped="another dueflow run is active on this database"),
                              settings.attention_state)
            tag_ledger(settings)
            summary = approved_run(tonight)
            warnings += stale_runs(settings, tonight.flow_run_id)  # at the end: a run that released the
            # lock has ended by now
        summary.warnings.extend(warnings)
        return finish(summary, settings.attention_state)

    try:
        return night()
    except ConfigError as exc:  # a setting, a parameter, the sources, the database: one line
        return refused(exc)


def checked_approval(approve: object) -> Approval | None:
    """The `approve` parameter as a person's word (None when empty): who gave it is the
    user of a run started by hand, or the parameter of a deployment's run."""
    import getpass

    from dueflow.tasks.core.guard import approval_of

    if approve is None or (isinstance(approve, str) and not approve.strip()):
        return None
    if not isinstance(approve, str | int) or isinstance(approve, bool):
        raise ConfigError(f"approve={approve!r}: write all, none or a number of emails per job")
    by = (f"the parameter approve of flow run {flow_run.get_id()}" if deployment.get_id()
          else getpass.getuser())
    try:
        return approval_of(str(approve), by)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def asking(timeout: float) -> Callable[[NightReview], Approval] | None:
    """How a night that looks wrong asks a person: a deployment's run pauses in Prefect with
    a form (what tripped and a sample in an artifact); a run started by hand or from Python
    has no one to wait for: None, it stops and says how to approve."""
    if not deployment.get_id():
        return None
    return lambda review: ask_in_prefect(review, timeout)


# Prefect fails a run whose pause outlives its timeout, and refuses any later state; the
# pause is given this much longer than dueflow waits, and dueflow ends the wait itself.
PAUSE_MARGIN = 3600


def ask_in_prefect(review: NightReview, timeout: float) -> Approval:
    """Pause the run until a person answers in the Prefect UI (or through the API), at most
    `timeout` seconds; NightNotApproved then. The wait is ended by dueflow, not by Prefect's
    pause timeout: it resumes the run itself with "send none" (the first resume wins; a
    person's later one is refused), so that the run can still end "Needs attention"."""
    import threading
    from typing import Literal

    from prefect import pause_flow_run, resume_flow_run
    from prefect.artifacts import create_markdown_artifact
    from prefect.input import RunInput
    from pydantic import Field

    from dueflow.tasks.core.guard import Approval, Choice
    from dueflow.tasks.night import NightNotApproved

    class NightApproval(RunInput):
        """A person's word on a night that looks wrong (its artifact says why)."""

        choice: Literal["send none", "send up to", "send all"] = Field(
            description="send none: reserve nothing tonight; send up to: at most `up_to` emails per job;"
                        " send all: the night as it is")
        up_to: int = Field(0, ge=0, description="with send up to: at most this many emails per job")
        approved_by: str = Field(min_length=1, max_length=200, description="your name: kept with the night")

    create_markdown_artifact(key="nightly-alerts-review", markdown=review.markdown(),
                             description=review.headline())
    run_id, gave_up = UUID(str(flow_run.get_id())), threading.Event()

    def give_up() -> None:
        try:
            resume_flow_run(run_id, run_input={"choice": Choice.NONE.value, "up_to": 0,
                                               "approved_by": "no one (dueflow stopped waiting)"})
        except Exception:  # a person answered first: theirs stands
            return
        gave_up.set()

    deadline = threading.Timer(timeout, give_up)
    deadline.daemon = True
    deadline.start()
    try:
        answer = pause_flow_run(wait_for_input=NightApproval, timeout=int(timeout) + PAUSE_MARGIN,
                                poll_interval=max(1, min(10, int(timeout) // 10)))
    finally:
        deadline.cancel()
    if gave_up.is_set():
        raise NightNotApproved(review, timeout)
    choice = Choice(answer.choice)
    return Approval(choice, answer.approved_by, answer.up_to if choice is Choice.UP_TO else None)


def approved_run(night: Night) -> RunSummary:
    """`guarded_run`; a night that looked wrong and that no one approved in time ends with
    nothing reserved or sent, in "Needs attention"."""
    from dueflow.tasks.core.report import RunSummary
    from dueflow.tasks.night import NightNotApproved

    try:
        return guarded_run(night)
    except NightNotApproved as exc:
        summary = RunSummary(as_of=night.as_of, dry_run=False, flow_run_id=night.flow_run_id,
                             unapproved=str(exc))
        publish(summary)
        return summary


def guarded_run(night: Night) -> RunSummary:
    """The night's steps (tasks/night.py) as task runs, and its artifacts; a database that
    refuses what the night needs (read-only, a privilege missing, a statement timeout) said
    in one line: the ledger keeps what was done, and what was reserved and never handed to
    SMTP is sent by the next run."""
    from sqlalchemy.exc import DBAPIError

    from dueflow.tasks.adapters.db_errors import CANCELED, NO_PRIVILEGE, READ_ONLY, database_problem, sqlstate
    from dueflow.tasks.night import run_night
    from dueflow.tasks.steps import Prefect

    try:
        summary = run_night(night, Prefect())
    except DBAPIError as exc:
        if sqlstate(exc) not in (READ_ONLY, NO_PRIVILEGE, CANCELED):
            raise
        raise ConfigError(database_problem(exc, "the database refused the night (what was reserved and"
                                           " not sent goes out with the next run)")) from None
    publish(summary)
    return summary


ARTIFACT_ROWS = 1000  # rows of the table artifact, problems first


def publish(summary: RunSummary) -> None:
    """The run's artifacts, unless the Prefect API was lost (its client's retries would take
    minutes per artifact): a table of this run's rows, what needs attention first, and a
    markdown summary (no secrets in either). A dry run publishes under its own keys, so a
    preview never becomes the latest production summary. Published by the flow itself, not
    a task: the artifacts belong to the flow run (its Artifacts tab lists them)."""
    from prefect.artifacts import create_markdown_artifact, create_table_artifact

    from dueflow.flows.prefect_api import unreachable
    from dueflow.tasks.core.frames import records
    from dueflow.tasks.core.report import markdown, table_rows
    from dueflow.tasks.core.statuses import RowStatus

    if problem := unreachable():
        summary.warnings.append(f"the Prefect API was lost during the run ({problem}): no artifacts;"
                                " the ledger holds what was done (docs/prefect-api.md)")
        return
    prefix = "nightly-alerts-dry-run" if summary.dry_run else "nightly-alerts"
    shown = int((summary.rows["status"] != RowStatus.ALREADY_HANDLED).sum())
    create_table_artifact(
        key=f"{prefix}-rows", table=records(table_rows(summary, ARTIFACT_ROWS)),
        description=summary.headline() + (f" (first {ARTIFACT_ROWS} of {shown} rows)"
                                          if shown > ARTIFACT_ROWS else ""),
    )
    create_markdown_artifact(key=f"{prefix}-summary", markdown=markdown(summary))  # its headline inside


def label_run(dry_run: bool, adopt: bool) -> None:
    """Tag a run that sends nothing, so that the UI can filter it out."""
    tags = ["dry-run"] if dry_run else ["adopt"] if adopt else []
    add_tags(tags)


def add_tags(tags: list[str]) -> None:
    run_id = flow_run.get_id()
    if not tags or run_id is None:
        return
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        client.update_flow_run(UUID(run_id), tags=sorted({*flow_run.get_tags(), *tags}))


def tag_ledger(settings: Settings) -> None:
    """Once the run holds the ledger's run lock: tag it with the ledger (stale_runs)."""
    from dueflow.flows.prefect_api import ledger_tag

    try:
        add_tags([ledger_tag(settings.database_url, settings.ledger_schema)])
    except Exception as exc:  # the night does not depend on Prefect's bookkeeping
        get_run_logger().warning("could not tag the run with its ledger: %s", type(exc).__name__)


def stale_runs(settings: Settings, flow_run_id: str | None) -> list[str]:
    """At the end of a night, the ledger's run lock still held: every other run that held
    it (tag_ledger) and that Prefect still shows 'Running' lost the API before it could
    record its end — a live one would have recorded it while this night ran; it is marked
    Crashed."""
    from dueflow.flows.prefect_api import crash_stale_runs, ledger_tag, was_lost

    if flow_run_id is None or was_lost():  # the client would retry for a minute
        return []
    try:
        stale = crash_stale_runs(flow_run_id, ledger_tag(settings.database_url, settings.ledger_schema))
    except Exception as exc:  # the night does not depend on Prefect's bookkeeping
        return [f"could not look for stale runs in Prefect: {type(exc).__name__}"]
    if stale:
        get_run_logger().warning("marked %d stale run(s) Crashed: %s", len(stale), ", ".join(stale))
    return [f"flow run {run_id} was left 'Running' by a lost Prefect API: marked Crashed (its emails"
            " are in the ledger)" for run_id in stale]


def refused(exc: ConfigError) -> State:
    """The end of a night something refused (a setting, a parameter, the sources, the
    database, ids that changed spelling): one ERROR line in the run's log — no traceback,
    the line says what to fix — and a Failed state whose data is the error, which a call of
    the flow raises and the CLI prints as its one line (exit 2)."""
    from prefect.states import Failed

    get_run_logger().error("%s", exc)
    return Failed(message=str(exc), data=exc)


NEEDS_ATTENTION_EVENT = "dueflow.run.needs-attention"
ATTENTION_STATE_NAME = "Needs attention"


def finish(summary: RunSummary, attention_state: str = defaults.ATTENTION_STATE) -> State:
    """The run's final state, with the counts as its message: Completed; named "Needs
    attention" and announced by an event (NEEDS_ATTENTION_EVENT, docs/operations.md) when
    something waits for a person — and of the Failed type (red in the UI, not green) when
    emails do (failed, pending, bounced), unless DUEFLOW_ATTENTION_STATE=completed. The
    summary is in the state's (persisted) result either way: `report.summary_of(state)`.
    A command whose Prefect API was lost is handed the state without Prefect recording it
    (flows/run_end.py)."""
    from prefect.events import emit_event
    from prefect.states import Completed, Failed

    from dueflow.flows.run_end import ended
    from dueflow.tasks.core.report import NeedsAttention, attention_payload, emails_need_person, needs_person

    log = get_run_logger()
    attention = needs_person(summary) and not summary.dry_run  # a preview changed nothing
    # At WARNING when something waits for a person (a filter for warnings finds it); the
    # CLI prints its own summary either way.
    log.log(logging.WARNING if attention else logging.INFO, "%s", summary.headline())
    if attention:
        emit_event(
            event=NEEDS_ATTENTION_EVENT,
            resource={"prefect.resource.id": "dueflow.nightly-alerts",
                      "prefect.resource.name": "dueflow nightly alerts"},
            related=[{"prefect.resource.id": f"prefect.flow-run.{summary.flow_run_id}",
                      "prefect.resource.role": "flow-run"}] if summary.flow_run_id else [],
            payload=attention_payload(summary),
        )
    if attention and attention_state == "failed" and emails_need_person(summary):
        # A Failed state's data is what a call raises: NeedsAttention, holding the summary.
        return ended(Failed(message=summary.headline(), data=NeedsAttention(summary.headline(), summary),
                            name=ATTENTION_STATE_NAME), summary)
    return ended(Completed(message=summary.headline(), data=summary,
                           name=ATTENTION_STATE_NAME if attention else "Completed"), summary)
