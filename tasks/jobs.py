"""A night's jobs as objects whose methods are its steps (docs/how-it-works.md).

`RenewalJob` and `DunningJob` each say where their rows come from (`extract`), what is
due (`decide`) and how their emails are written (`drafts`, `compose`: the one place a job
renders); for a row an earlier run left in the ledger, `reread` and `decide_again` find
its source row again by id and decide it for the night it was reserved. The nightly run
(flows/nightly_alerts.py), the forecast (tasks/forecast.py), `dueflow check --sources` and
the recovery of what earlier runs left (`send_unsent`, `retry_failed`) all call these
same methods; the Prefect tasks that show each step in the UI wrap them in tasks/steps.py.

Then every job goes through the same steps: reserve what is due (a pure plan,
tasks/core/reservation.py, and the I/O that performs it), store and deliver what this run
won, and say what happened to every row. Steps with nothing to do start no task run.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, date, datetime, timedelta
from typing import ClassVar

from prefect import task
from prefect.cache_policies import NO_CACHE

from dueflow.blocks.settings import LLMConfig, Settings
from dueflow.tasks.adapters import db
from dueflow.tasks.adapters.db import Database
from dueflow.tasks.adapters.invoice_files import with_invoice_pdfs
from dueflow.tasks.core.addresses import Mailbox
from dueflow.tasks.core.calendar import BusinessCalendar
from dueflow.tasks.core.decide import (
    Decision,
    DunningRules,
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
from dueflow.tasks.core.defaults import DELIVERY_WORKERS
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.invoice_pdf import PdfTemplate
from dueflow.tasks.core.keys import CLIENT_STEPS, Job, parse_keys
from dueflow.tasks.core.message import OutgoingEmail
from dueflow.tasks.core.money import amounts_from_minor
from dueflow.tasks.core.parameters import DunningStart, RunParameters
from dueflow.tasks.core.phrasebook import Phrasebook, default_phrasebook
from dueflow.tasks.core.profiles import default_profile
from dueflow.tasks.core.rekeying import PAIR_COLUMNS, new_subjects, respelled
from dueflow.tasks.core.render import (
    Composed,
    EmailLook,
    Prepared,
    compose_dunning_emails,
    compose_renewal_alerts,
    stored_drafts,
)
from dueflow.tasks.core.report import concat_rows, key_rows, no_rows
from dueflow.tasks.core.reservation import already_in_ledger, plan_reservation, reservation_outcome
from dueflow.tasks.core.statuses import LedgerStatus, RowStatus
from dueflow.tasks.core.tone import FREE_TEXT_SOURCE, Draft, Fallback
from dueflow.tasks.core.validate import as_dates
from dueflow.tasks.deliver import DeliverySettings, Recipient, deliver, retry_time
from dueflow.tasks.steps import compose_and_store, quarantine_rows, reserve_slots, store_messages

Extracted = dict[str, pd.DataFrame]


class NightJob(ABC):
    """One job of a night: its rows, its rule, its emails."""

    name: ClassVar[Job]
    source: ClassVar[str]  # the source table: quarantined rows are reported as SOURCE/ID
    label: ClassVar[str]  # in task names: extract-renewals, decide-dunning

    @abstractmethod
    def extract(self, database: Database, as_of: date) -> Extracted:
        """The source rows that can be due on `as_of`, and the ledger's history of them."""

    @abstractmethod
    def decide(self, extracted: Extracted, as_of: date) -> Decision:
        """What is due on `as_of` (tasks/core/decide.py), and what is quarantined."""

    def drafts(self, winners: pd.DataFrame, database: Database, as_of: date) -> dict[str, Draft]:
        """The planned paragraphs of the winners' emails, by key (none for most jobs)."""
        return {}

    def drafts_again(self, rows: pd.DataFrame, due: pd.DataFrame, database: Database,
                     as_of: date) -> dict[str, Draft]:
        """The paragraphs of ledger rows rendered again (`due`: decided again from `rows`):
        the one each row stored, or a plan made now (none for most jobs)."""
        return {}

    @abstractmethod
    def compose(self, winners: pd.DataFrame, extracted: Extracted, as_of: date,
                drafts: dict[str, Draft]) -> Composed:
        """The winners' emails; a row that cannot be rendered is a failure with its reason."""

    @abstractmethod
    def reread(self, database: Database, rows: pd.DataFrame) -> Extracted:
        """The source rows of ledger rows (key, subject_id, …) as they are now, by id."""

    @abstractmethod
    def decide_again(self, extracted: Extracted, rows: pd.DataFrame, as_of: date) -> Decision:
        """Ledger rows decided again from `reread`'s rows, for the night they were reserved."""

    def render_again(self, database: Database, rows: pd.DataFrame, as_of: date) -> Composed:
        """Messages for ledger rows rendered again from their source rows as they are now:
        rows whose run died before storing one, and failed rows a run retries. A paragraph
        planned for a row stays (G7); a row without one is planned now (the model is only
        asked for keys a run just reserved)."""
        extracted = self.reread(database, rows)
        decision = self.decide_again(extracted, rows, as_of)
        drafts = self.drafts_again(rows, decision.due, database, as_of)
        return self.compose(decision.due, extracted, as_of, drafts) + Composed(failures=[
            (key, f"could not render the email: {reason}") for key, reason in zip(
                decision.quarantined["source_id"], decision.quarantined["reason"], strict=True)])


@dataclass(frozen=True)
class RenewalJob(NightJob):
    """Renewal alerts to contract owners before a contract renews."""

    name: ClassVar[Job] = Job.RENEWAL
    source: ClassVar[str] = "contracts"
    label: ClassVar[str] = "renewals"

    leads: Sequence[int]
    locale: str
    sender: Mailbox
    look: EmailLook | None = None
    calendar: BusinessCalendar | None = None  # alerts wait for business days (None: any day)
    timezone: str = "UTC"  # the business zone a renewal date with an offset is read in

    def extract(self, database: Database, as_of: date) -> Extracted:
        start, end = renewal_window(as_of, self.leads, self.calendar)
        engine = database.engine
        # Rows the ledger already settles come with settled_lead set and are not decided
        # again; the history is read only for the others (docs/performance.md).
        contracts = db.extract_frame(engine, database.source_statement("extract_contracts"), {
            "window_start": start.isoformat(), "window_end": end.isoformat(), "as_of": as_of.isoformat(),
            "leads": json.dumps(normalise_leads(self.leads))})
        return {"contracts": amounts_from_minor(contracts),
                # from the window's start: a renewal that fell on the closed days just past
                # is alerted tonight, and its cycle's history must come along
                "history": db.renewal_history_of(engine, contracts, start, self.timezone)}

    def decide(self, extracted: Extracted, as_of: date) -> Decision:
        contracts, settled = settled_apart(extracted["contracts"])
        return with_settled(due_renewal_alerts(contracts, extracted["history"], as_of, self.leads,
                                               self.calendar, self.timezone), settled, as_of, self.timezone)

    def compose(self, winners: pd.DataFrame, extracted: Extracted, as_of: date,
                drafts: dict[str, Draft]) -> Composed:
        return compose_renewal_alerts(winners, self.locale, self.sender, self.look)

    def reread(self, database: Database, rows: pd.DataFrame) -> Extracted:
        ids = rows["subject_id"].unique().tolist()
        return {"contracts": amounts_from_minor(db.rows_by_id(database, "contracts_by_id", ids))}

    def decide_again(self, extracted: Extracted, rows: pd.DataFrame, as_of: date) -> Decision:
        return renewal_alerts_for(extracted["contracts"], rows, as_of, self.timezone)


@dataclass(frozen=True)
class DunningJob(NightJob):
    """Reminders for unpaid invoices, then an escalation to a colleague."""

    name: ClassVar[Job] = Job.DUNNING
    source: ClassVar[str] = "invoices"
    label: ClassVar[str] = "dunning"

    delays: Sequence[int]
    start: DunningStart
    timezone: str
    escalation_to: str | None
    sender: Mailbox
    look: EmailLook | None = None
    llm: LLMConfig | None = None
    phrasebook: Phrasebook = field(default_factory=default_phrasebook)  # the reminders' reviewed sentences
    invoice_pdf: PdfTemplate | None = None  # DUEFLOW_INVOICE_PDF: the PDF each reminder carries
    rules: DunningRules | None = None  # profiles, calendar, minimums (None: the parameters alone)

    def _bounds(self) -> tuple[tuple[int, ...], str]:
        """The shortest delays of every profile, and the start they count from ('any' when
        profiles differ): the margin sql/dunning_candidates reads with."""
        profiles = self.rules.profiles if self.rules else None
        if profiles is None:
            return tuple(self.delays), self.start
        starts = profiles.starts()
        return profiles.shortest_delays(), next(iter(starts)) if len(starts) == 1 else "any"

    def extract(self, database: Database, as_of: date) -> Extracted:
        """Tonight's share of `extract_all`: the invoices whose next step may be due
        (sql/dunning_candidates), and only their clients and history. What a night decides
        is the same (tests/integration/test_dunning_candidates.py)."""
        engine = database.engine
        delays, start = self._bounds()
        last_start = as_of - timedelta(days=delays[0])  # the latest start whose first step is due
        invoices = db.extract_frame(engine, database.source_statement("dunning_candidates"), {
            "start": start, "start_by": (last_start + timedelta(days=1)).isoformat(),
            "start_by_text": (last_start + timedelta(days=3)).isoformat(),
            "after_first_by": (as_of - timedelta(days=delays[1])).isoformat(),
            "after_second_by": (as_of - timedelta(days=delays[2])).isoformat(),
            "hold_as_of": as_of.isoformat()},
            session_timezone=self.timezone)

        def distinct(column: str) -> list[str]:
            return invoices[column].dropna().astype(str).unique().tolist()

        clients = db.rows_by_id(database, "clients_by_id", distinct("client_id"))
        history = db.rows_by_id(database, "dunning_history_of", distinct("id"))
        return {"invoices": amounts_from_minor(invoices), "clients": clients, "history": history}

    @staticmethod
    def extract_all(database: Database) -> Extracted:
        """Every open invoice, their clients, and the dunning steps already in the ledger for
        them, whatever the night (the forecast looks at the nights ahead)."""
        engine = database.engine
        queries = {"invoices": "extract_invoices", "clients": "extract_clients", "history": "dunning_history"}
        extracted = {name: db.extract_frame(engine, database.source_statement(query), {})
                     for name, query in queries.items()}
        return extracted | {"invoices": amounts_from_minor(extracted["invoices"])}

    def decide(self, extracted: Extracted, as_of: date) -> Decision:
        return due_dunning_steps(extracted["invoices"], extracted["clients"], extracted["history"], as_of,
                                 self.delays, self.timezone, self.escalation_to, self.start, self.rules)

    def drafts(self, winners: pd.DataFrame, database: Database, as_of: date) -> dict[str, Draft]:
        # Planning happens after reservation: the model is only ever asked about keys this
        # run won, once, and the paragraph is stored before sending (G7).
        from dueflow.tasks.steps import draft_reminders

        return {d.key: d for d in draft_reminders(winners, database, as_of, self.timezone, self.phrasebook,
                                                  self.llm)}

    def drafts_again(self, rows: pd.DataFrame, due: pd.DataFrame, database: Database,
                     as_of: date) -> dict[str, Draft]:
        from dueflow.tasks.steps import draft_reminders

        kept = stored_drafts(rows)
        fresh = due[~due["key"].isin(list(kept))]
        free_text = set(rows.loc[rows["draft_source"].astype("string").eq(FREE_TEXT_SOURCE).fillna(False)
                                 .to_numpy(), "key"])
        planned = {d.key: replace(d, fallback=Fallback.FREE_TEXT) if d.key in free_text and d.fallback else d
                   for d in draft_reminders(fresh, database, as_of, self.timezone, self.phrasebook, self.llm,
                                            ask_model=False)}
        return planned | kept

    def compose(self, winners: pd.DataFrame, extracted: Extracted, as_of: date,
                drafts: dict[str, Draft]) -> Composed:
        # The invoice PDF each reminder carries, checked and hashed now: its size and SHA-256
        # are stored with the message (G2) and the file must still match when it is sent.
        return compose_dunning_emails(attach_invoices(winners, self.invoice_pdf), extracted["history"],
                                      self.sender, drafts, as_of, self.look)

    def reread(self, database: Database, rows: pd.DataFrame) -> Extracted:
        ids = rows["subject_id"].unique().tolist()
        invoices = amounts_from_minor(db.rows_by_id(database, "invoices_by_id", ids))
        clients = db.rows_by_id(database, "clients_by_id",
                                invoices["client_id"].dropna().astype(str).unique().tolist())
        return {"invoices": invoices, "clients": clients,
                "history": db.rows_by_id(database, "dunning_history_of", ids)}

    def decide_again(self, extracted: Extracted, rows: pd.DataFrame, as_of: date) -> Decision:
        return dunning_steps_for(extracted["invoices"], extracted["clients"], rows, as_of, self.timezone,
                                 self.escalation_to, self.rules.profiles if self.rules else None)


def attach_invoices(due: pd.DataFrame, template: PdfTemplate | None) -> pd.DataFrame:
    """Dunning rows with their invoice PDFs checked and hashed (tasks/adapters/invoice_files):
    the reminders to the client carry it; the escalation, to a colleague, does not."""
    if due.empty or template is None:
        return due
    return with_invoice_pdfs(due, template, reminders=due["step"].isin(list(CLIENT_STEPS)))


def night_jobs(settings: Settings, params: RunParameters,
               message_id_key: str = "") -> tuple[RenewalJob, DunningJob]:
    """A night's jobs, in the order it runs them, with its settings and parameters; their
    Message-IDs keyed with the database's secret (empty: a check or a preview, which sends
    nothing)."""
    sender, look = settings.sender(), replace(settings.email_look(), message_id_key=message_id_key)
    calendar = settings.calendar()
    any_day = settings.with_parameters(renewal_on_any_day=params.renewal_on_any_day).renewal_on_any_day
    return (RenewalJob(params.leads, params.renewal_locale, sender, look, None if any_day else calendar,
                       settings.timezone),
            DunningJob(params.delays, params.dunning_start, settings.timezone, settings.escalation_address(),
                       sender, look, settings.llm, settings.phrasebook(), settings.invoice_pdf_template(),
                       dunning_rules(settings, params.delays, params.dunning_start, params.delay_unit,
                                     calendar)))


def dunning_rules(settings: Settings, delays: Sequence[int], start: DunningStart, unit: str,
                  calendar: BusinessCalendar | None) -> DunningRules:
    """The profiles (over the run's parameters, the default profile) and minimums the
    settings give, with the calendar read from them once (`settings.calendar()`)."""
    default = default_profile(delays, start, unit, settings.escalation_address())
    return DunningRules(settings.profiles(default), calendar, settings.minimums())


@dataclass(frozen=True)
class RunContext:
    """Everything the steps of one run share."""

    settings: Settings
    database: Database
    delivery: DeliverySettings
    as_of: date
    flow_run_id: str | None
    params: RunParameters
    message_id_key: str = field(default="", repr=False)  # the database's secret (db.message_id_key)

    @property
    def jobs(self) -> tuple[RenewalJob, DunningJob]:
        return night_jobs(self.settings, self.params, self.message_id_key)


def respelled_ids(database: Database, jobs: Sequence[NightJob], decisions: dict[Job, Decision],
                  extracted: dict[Job, Extracted]) -> pd.DataFrame:
    """The ids of tonight's new rows that the ledger knows spelled another way
    (tasks/core/rekeying.py): job, source, old_id, new_id. One index probe per job with
    new rows; the source and the operator's decisions are read only when the ledger has
    such a form."""
    found, apart = [], None
    for job in jobs:
        new = new_subjects(decisions[job.name].to_reserve, extracted[job.name]["history"])
        if new.empty:
            continue
        forms = new["subject_form"].dropna().unique().tolist()
        known = db.ledger_ids_of_forms(database.engine, job.name, forms)
        known = known[~known["subject_id"].isin(new["subject_id"])]
        if known.empty:
            continue
        still = db.rows_by_id(database, f"{job.source}_by_id", known["subject_id"].unique().tolist())["id"]
        apart = db.kept_apart(database.engine) if apart is None else apart
        found.append(respelled(job.name, job.source, new, known, set(still.astype(str)), apart))
    return pd.concat(found, ignore_index=True) if found else pd.DataFrame(columns=list(PAIR_COLUMNS))


def reserve(ctx: RunContext, job: NightJob, decision: Decision) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Quarantine the bad rows and reserve what is due, as planned
    (tasks/core/reservation.py): the keys this run won (in a dry run, the keys it would
    reserve) and the summary rows of everything else."""
    handled = already_in_ledger(decision)
    open_keys = db.open_keys(ctx.database.engine) if len(handled) else {}
    plan = plan_reservation(job.name, job.source, decision, open_keys, ctx.params.send_cap)
    if ctx.params.dry_run:
        return plan.candidates, plan.rows
    if not plan.quarantined.empty:
        quarantine_rows(ctx.database, job.name, plan.quarantined, ctx.as_of, ctx.flow_run_id)
    if plan.candidates.empty:
        return plan.candidates, plan.rows
    won, lost = reserve_slots(ctx.database, job.name, plan.candidates, ctx.as_of, ctx.flow_run_id,
                              status=LedgerStatus.ADOPTED if ctx.params.adopt else LedgerStatus.PENDING)
    reserved = reservation_outcome(job.name, plan.candidates, won, lost, ctx.params.adopt)
    return reserved.winners, concat_rows([plan.rows, reserved.rows])


# Keys rendered, then stored, at a time: a first night's tens of thousands of messages
# (5–10 KB each in memory) are never all held at once.
COMPOSE_CHUNK = 5_000


def compose(ctx: RunContext, job: NightJob, winners: pd.DataFrame, extracted: Extracted) -> Prepared:
    """Render the winners' emails COMPOSE_CHUNK keys at a time and, unless this is a dry
    run, store each chunk's messages on their ledger rows before rendering the next: every
    message is stored before any is sent (G2), and only the addressing stays in memory."""
    prepared = Prepared()
    if not ctx.params.dry_run and len(winners) >= db.ANALYZE_BEFORE_STORING:
        db.refresh_statistics(ctx.database.engine)  # the planner has not seen the rows just reserved
    for start in range(0, len(winners), COMPOSE_CHUNK):
        chunk = winners.iloc[start:start + COMPOSE_CHUNK]
        prepared += compose_and_store(job, chunk, extracted, ctx.as_of, ctx.database,
                                      store=not ctx.params.dry_run)
    return prepared


def delivery_rows(jobs: str | dict[str, str], deliveries: Sequence, retry: bool = False) -> pd.DataFrame:
    frame = pd.DataFrame({"key": [d.key for d in deliveries], "recipient": [d.recipient for d in deliveries]})
    job = frame["key"].map(jobs) if isinstance(jobs, dict) else jobs
    return key_rows(job, frame, [d.status for d in deliveries], [d.detail for d in deliveries], retry)


def deliver_won(ctx: RunContext, job: NightJob, winners: pd.DataFrame, prepared: Prepared) -> pd.DataFrame:
    """Deliver the stored messages of the keys this run won; one row per key (a dry run
    lists what it would send)."""
    if winners.empty:
        return no_rows()
    if ctx.params.dry_run:
        subjects = {e.key: e.subject + (f" [{e.draft_source} paragraph]" if e.draft_source else "")
                    for e in prepared.emails} | dict(prepared.failures)
        return key_rows(job.name, winners, RowStatus.WOULD_SEND, subjects)
    failed = dict(prepared.failures)
    items = [Recipient(e.key, e.recipient) for e in prepared.emails]
    return concat_rows([key_rows(job.name, winners[winners["key"].isin(failed)], RowStatus.FAILED, failed),
                        delivery_rows(job.name, deliver(items, ctx.delivery, DELIVERY_WORKERS))])


def render_again(database: Database, jobs: Sequence[NightJob], rows: pd.DataFrame) -> Composed:
    """Ledger rows' messages rendered again by their jobs, each for the night it was
    reserved (its `as_of`)."""
    composed = Composed()
    nights = as_dates(rows["as_of"])
    for night in sorted(nights.dropna().unique()):  # one render per reservation night
        of_night = rows[nights == night]
        for job in jobs:
            mine = of_night[of_night["job"] == job.name]
            if not mine.empty:
                composed += job.render_again(database, mine, pd.Timestamp(night).date())
    return composed


@task(name="retry-failed", cache_policy=NO_CACHE)
def retry_failed(database: Database, jobs: Sequence[NightJob], as_of: date, flow_run_id: str | None,
                 max_attempts: int, backoff: timedelta) -> list[tuple[str, str]]:
    """Failed rows due for another attempt go back to pending (G4) with their message
    rendered again from the source rows as they are now: a retry goes to the address the
    data now says, with what the email now shows. A permanent failure (a mailbox refused
    it) is retried only when it would now go to another address. Never a `pending` row
    (G3). Returns the retries that could not be rendered, with why: they stay failed, the
    attempt counted and the next one after `backoff`."""
    candidates = db.retry_candidates(database, as_of, max_attempts)
    if candidates.empty:
        return []
    composed = changed_attachments(candidates, render_again(database, jobs, candidates))
    rendered = pd.DataFrame([e.as_row() for e in composed.emails],
                            columns=[f.name for f in fields(OutgoingEmail)])
    keys = set(retried_keys(candidates, rendered))
    db.requeue_failed(database, flow_run_id, [e.as_row() for e in composed.emails if e.key in keys])
    transient = set(candidates.loc[~candidates["permanent"], "key"])
    unrendered = [(key, reason) for key, reason in composed.failures if key in transient]
    db.record_unrendered_retries(database.engine, unrendered, retry_time(datetime.now(UTC), backoff))
    return unrendered


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


def send_unsent(ctx: RunContext) -> pd.DataFrame:
    """Send what earlier runs reserved and surely never handed to SMTP, and the failed rows
    due for another attempt, re-addressed from the data as it is now; rows no longer due
    are withdrawn (G3, G4)."""
    if ctx.params.dry_run or ctx.params.adopt:
        return no_rows()
    jobs = ctx.jobs
    unrendered = dict(retry_failed(ctx.database, jobs, ctx.as_of, ctx.flow_run_id,
                                   ctx.params.retry_max_attempts, ctx.params.retry_backoff))
    withdrawn = db.withdraw_unsent(ctx.database, ctx.as_of)
    unsent = db.unsent_rows(ctx.database.engine)
    settled = pd.Series([*withdrawn, *unrendered], dtype=object)
    of_job = dict(zip(settled, parse_keys(settled)["job"], strict=True)) | dict(
        zip(unsent["key"], unsent["job"], strict=True))
    rows = [key_rows(pd.Series([of_job[k] for k in withdrawn], dtype=object),
                     pd.DataFrame({"key": withdrawn, "recipient": pd.NA}), RowStatus.NO_LONGER_DUE,
                     "withdrawn: no longer due, never sent (ledger: failed)", retry=True),
            key_rows(pd.Series([of_job[k] for k in unrendered], dtype=object),
                     pd.DataFrame({"key": list(unrendered), "recipient": pd.NA}), RowStatus.FAILED,
                     unrendered, retry=True)]
    if not unsent.empty:
        unstored = unsent[~unsent["stored"]]
        composed = Composed()
        if not unstored.empty:
            composed = render_again(ctx.database, jobs, unstored)
            store_messages(ctx.database, composed)
        failed = dict(composed.failures)
        ready = unsent[~unsent["key"].isin(failed)]
        failed_rows = unsent[unsent["key"].isin(failed)]
        rows.append(key_rows(failed_rows["key"].map(of_job), failed_rows, RowStatus.FAILED, failed,
                             retry=True))
        items = [Recipient(k, r or "") for k, r in zip(ready["key"], ready["recipient"], strict=True)]
        rows.append(delivery_rows(of_job, deliver(items, ctx.delivery, DELIVERY_WORKERS), retry=True))
    return concat_rows(rows)
