"""A nightly run's jobs and steps, as the flow runs them (docs/design.md, "One night").

Each job is described by data — where its rows come from (extract), how it decides, how
it renders (compose) — and goes through the same steps: reserve what is due, store and
deliver what this run won, and say what happened to every row. Steps with nothing to do
start no task run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date

from dueflow.blocks.settings import LLMConfig, Settings
from dueflow.tasks.adapters import db
from dueflow.tasks.adapters.db import Database
from dueflow.tasks.core.addresses import Mailbox
from dueflow.tasks.core.decide import Decision, most_urgent_first
from dueflow.tasks.core.defaults import DELIVERY_WORKERS
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.keys import Job
from dueflow.tasks.core.parameters import RunParameters
from dueflow.tasks.core.render import Composed, Prepared
from dueflow.tasks.core.report import concat_rows, key_rows, no_rows
from dueflow.tasks.core.statuses import LedgerStatus, RowStatus
from dueflow.tasks.deliver import DeliverySettings, Recipient, deliver
from dueflow.tasks.steps import (
    RenderAgain,
    attach_invoices,
    compose_and_store,
    compose_dunning,
    compose_renewals,
    decide_dunning,
    decide_renewals,
    draft_reminders,
    extract_dunning,
    extract_renewals,
    quarantine_rows,
    render_again,
    reserve_slots,
    retry_failed,
    store_messages,
)


@dataclass(frozen=True)
class RunContext:
    """Everything the steps of one run share."""

    settings: Settings
    database: Database
    delivery: DeliverySettings
    as_of: date
    flow_run_id: str | None
    params: RunParameters

    @property
    def sender(self) -> Mailbox:
        return self.delivery.sender

    @property
    def escalation_to(self) -> str | None:
        return self.settings.escalation_address()

    @property
    def llm(self) -> LLMConfig | None:
        return self.settings.llm


Extracted = dict[str, pd.DataFrame]


@dataclass(frozen=True)
class JobSpec:
    """One job: where its rows come from, how it decides, how it renders."""

    name: Job
    source: str  # the source table: quarantined rows are reported as SOURCE/ID
    extract: Callable[[RunContext], Extracted]
    decide: Callable[[Extracted, RunContext], Decision]
    compose: Callable[[pd.DataFrame, Extracted, RunContext], Composed]


def _compose_dunning(winners: pd.DataFrame, extracted: Extracted, ctx: RunContext) -> Composed:
    # Drafting happens here, after reservation: the model is only ever asked about keys
    # this run won, once, and the text is stored before sending (G7).
    drafts = draft_reminders(winners, ctx.database, ctx.settings.timezone, ctx.llm)
    # The invoice PDF each reminder carries, hashed now: stored with the message (G2).
    winners = attach_invoices(winners, ctx.settings.invoice_pdf_template())
    return compose_dunning(winners, extracted["history"], ctx.sender, drafts, ctx.as_of,
                           ctx.settings.email_look())


RENEWALS = JobSpec(
    Job.RENEWAL, "contracts",
    extract=lambda ctx: extract_renewals(ctx.database, ctx.as_of, ctx.params.leads),
    decide=lambda extracted, ctx: decide_renewals(extracted, ctx.as_of, ctx.params.leads),
    compose=lambda winners, _, ctx: compose_renewals(winners, ctx.params.renewal_locale, ctx.sender,
                                                     ctx.settings.email_look()),
)
DUNNING = JobSpec(
    Job.DUNNING, "invoices",
    extract=lambda ctx: extract_dunning(ctx.database, ctx.as_of, ctx.params.delays, ctx.params.dunning_start,
                                        ctx.settings.timezone),
    decide=lambda extracted, ctx: decide_dunning(extracted, ctx.as_of, ctx.params.delays,
                                                 ctx.settings.timezone, ctx.escalation_to,
                                                 ctx.params.dunning_start),
    compose=_compose_dunning,
)
JOBS = (RENEWALS, DUNNING)


def _handled_rows(job: str, handled: pd.DataFrame, open_keys: dict[str, str]) -> pd.DataFrame:
    """Due rows already in the ledger, by what the ledger says of them: a failed or pending
    key is not "handled" (the summary must not say so)."""
    ledger = handled["key"].map(open_keys)
    status = ledger.map({LedgerStatus.FAILED: RowStatus.FAILED_EARLIER,
                         LedgerStatus.PENDING: RowStatus.PENDING_EARLIER}).fillna(RowStatus.ALREADY_HANDLED)
    detail = ledger.map({LedgerStatus.FAILED: "failed in an earlier run; not retried tonight"
                                              " (see `dueflow ledger --status failed`)",
                         LedgerStatus.PENDING: "handed to SMTP by an earlier run, outcome unknown"
                                               " (see `dueflow ledger --status pending`)"}
                        ).fillna("already in the ledger")
    return key_rows(job, handled, status, detail)


def reserve(ctx: RunContext, job: JobSpec, decision: Decision) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Quarantine the bad rows and reserve what is due: the keys this run won (in a dry
    run, the keys it would reserve) and the summary rows of everything else."""
    bad, due = decision.quarantined, decision.due
    handled = due[due["handled"]]
    rows = [key_rows(job.name, pd.DataFrame({"key": f"{job.source}/" + bad["source_id"],
                                             "recipient": pd.NA}), RowStatus.QUARANTINED,
                     bad["reason"].to_numpy()),
            _handled_rows(job.name, handled, db.open_keys(ctx.database.engine) if len(handled) else {})]
    candidates = decision.to_reserve
    cap = ctx.params.send_cap
    if cap is not None and len(candidates) > cap:
        ordered = most_urgent_first(candidates)
        candidates, deferred = ordered.head(cap), ordered.iloc[cap:]
        rows.append(key_rows(job.name, deferred, RowStatus.DEFERRED,
                             f"send cap of {cap} reached: a later run picks it up"))
    if ctx.params.dry_run:
        return candidates, concat_rows(rows)
    if not bad.empty:
        quarantine_rows(ctx.database, job.name, bad, ctx.as_of, ctx.flow_run_id)
    if candidates.empty:
        return candidates, concat_rows(rows)
    won, lost = reserve_slots(ctx.database, job.name, candidates, ctx.as_of, ctx.flow_run_id,
                              status=LedgerStatus.ADOPTED if ctx.params.adopt else LedgerStatus.PENDING)
    not_won = candidates[~candidates["key"].isin(won)]
    taken = not_won["key"].isin(lost)
    rows += [key_rows(job.name, not_won[taken], RowStatus.ALREADY_HANDLED, "reserved by another run"),
             key_rows(job.name, not_won[~taken], RowStatus.NO_LONGER_DUE,
                      "not reserved: the source row changed after extraction (paid, paused,"
                      " or its dunning step moved)")]
    winners = candidates[candidates["key"].isin(won)]
    if ctx.params.adopt:
        rows.append(key_rows(job.name, winners, RowStatus.ADOPTED, "recorded as handled; not sent"))
        winners = winners.iloc[0:0]
    return winners, concat_rows(rows)


# Keys rendered, then stored, at a time: a first night's tens of thousands of messages
# (5–10 KB each in memory) are never all held at once.
COMPOSE_CHUNK = 5_000


def compose(ctx: RunContext, job: JobSpec, winners: pd.DataFrame, extracted: Extracted) -> Prepared:
    """Render the winners' emails COMPOSE_CHUNK keys at a time and, unless this is a dry
    run, store each chunk's messages on their ledger rows before rendering the next: every
    message is stored before any is sent (G2), and only the addressing stays in memory."""
    prepared = Prepared()
    if not ctx.params.dry_run and len(winners) >= db.ANALYZE_BEFORE_STORING:
        db.refresh_statistics(ctx.database.engine)  # the planner has not seen the rows just reserved
    for start in range(0, len(winners), COMPOSE_CHUNK):
        chunk = winners.iloc[start:start + COMPOSE_CHUNK]
        prepared += compose_and_store(lambda chunk=chunk: job.compose(chunk, extracted, ctx),
                                      None if ctx.params.dry_run else ctx.database)
    return prepared


def delivery_rows(jobs: str | dict[str, str], deliveries: Sequence, retry: bool = False) -> pd.DataFrame:
    frame = pd.DataFrame({"key": [d.key for d in deliveries], "recipient": [d.recipient for d in deliveries]})
    job = frame["key"].map(jobs) if isinstance(jobs, dict) else jobs
    return key_rows(job, frame, [d.status for d in deliveries], [d.detail for d in deliveries], retry)


def deliver_won(ctx: RunContext, job: JobSpec, winners: pd.DataFrame, prepared: Prepared) -> pd.DataFrame:
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


def send_unsent(ctx: RunContext) -> pd.DataFrame:
    """Send what earlier runs reserved and surely never handed to SMTP, and the failed rows
    due for another attempt, re-addressed from the data as it is now; rows no longer due
    are withdrawn (G3, G4)."""
    if ctx.params.dry_run or ctx.params.adopt:
        return no_rows()
    again = RenderAgain(ctx.database, ctx.params.renewal_locale, ctx.sender, ctx.settings.timezone,
                        ctx.escalation_to, ctx.settings.email_look(), ctx.settings.invoice_pdf_template())
    unrendered = dict(retry_failed(again, ctx.as_of, ctx.flow_run_id, ctx.params.retry_max_attempts))
    withdrawn = db.withdraw_unsent(ctx.database, ctx.as_of)
    unsent = db.unsent_rows(ctx.database.engine)
    jobs = {key: key.split("/", 1)[0] for key in [*withdrawn, *unrendered]} | dict(
        zip(unsent["key"], unsent["job"], strict=True))
    rows = [key_rows(pd.Series([jobs[k] for k in withdrawn], dtype=object),
                     pd.DataFrame({"key": withdrawn, "recipient": pd.NA}), RowStatus.NO_LONGER_DUE,
                     "withdrawn: no longer due, never sent (ledger: failed)", retry=True),
            key_rows(pd.Series([jobs[k] for k in unrendered], dtype=object),
                     pd.DataFrame({"key": list(unrendered), "recipient": pd.NA}), RowStatus.FAILED,
                     unrendered, retry=True)]
    if not unsent.empty:
        unstored = unsent[~unsent["stored"]]
        composed = Composed()
        if not unstored.empty:
            composed = render_again(again, unstored)
            store_messages(ctx.database, composed)
        failed = dict(composed.failures)
        ready = unsent[~unsent["key"].isin(failed)]
        failed_rows = unsent[unsent["key"].isin(failed)]
        rows.append(key_rows(failed_rows["key"].map(jobs), failed_rows, RowStatus.FAILED, failed, retry=True))
        items = [Recipient(k, r or "") for k, r in zip(ready["key"], ready["recipient"], strict=True)]
        rows.append(delivery_rows(jobs, deliver(items, ctx.delivery, DELIVERY_WORKERS), retry=True))
    return concat_rows(rows)
