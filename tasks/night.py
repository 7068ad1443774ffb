"""One night, step by step (docs/design.md, "One night"; docs/how-it-works.md):

    extract → decide → (ids respelled? stop) → earlier rows → quarantine, reserve →
    plan, compose and store → deliver → retention → report

for both jobs, written against the `Store` (tasks/core/ports.py) and the steps of
tasks/steps.py. `run_night` calls each step through a `Steps` runner: `Prefect` in the
flow (a task run per step, mapped deliveries on the flow's bounded task runner), `Direct`
in the unit layer, where whole nights run on the in-memory store in milliseconds. The flow
(flows/nightly_alerts.py) adds what only a deployment has: checks before Prefect starts,
the run lock, the artifacts, the final state.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from functools import partial
from typing import Any, Protocol

import numpy as np

from dueflow.blocks.settings import ConfigError
from dueflow.tasks import progress, steps
from dueflow.tasks.adapters.allocator import give_back_freed_memory
from dueflow.tasks.core.decide import Decision
from dueflow.tasks.core.defaults import DELIVERY_WORKERS
from dueflow.tasks.core.dunning_start import before_due, before_due_line
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.guard import (
    Approval,
    Bounds,
    NightReview,
    Tripped,
    figures_of,
    looks_wrong,
    sample_of,
)
from dueflow.tasks.core.keys import Job, parse_keys
from dueflow.tasks.core.parameters import RunParameters
from dueflow.tasks.core.ports import Store
from dueflow.tasks.core.rekeying import PAIR_COLUMNS, new_subjects, respelled, stop_line
from dueflow.tasks.core.render import Composed, Prepared
from dueflow.tasks.core.report import (
    RunSummary,
    attention_level,
    bounced_rows,
    concat_rows,
    count_line,
    decision_line,
    drafts_frame,
    extract_line,
    facts_of,
    key_rows,
    no_rows,
    summarize,
)
from dueflow.tasks.core.reservation import already_in_ledger, plan_reservation, reservation_outcome
from dueflow.tasks.core.statuses import LedgerStatus, RowStatus
from dueflow.tasks.core.tone import Draft
from dueflow.tasks.deliver import (
    MAX_BATCH,
    Delivery,
    DeliverySettings,
    Recipient,
    after_a_crash,
    batches,
    in_statements,
    stopped_because,
    with_second_pass,
)
from dueflow.tasks.jobs import Extracted, NightJob

# Keys rendered, then stored, at a time: a first night's tens of thousands of messages
# (5–10 KB each in memory) are never all held at once (2,500: a surge's peak RSS 457 -> 436 MB
# against 5,000, in the same time). The first chunk is smaller, and
# each next one twice as large up to COMPOSE_CHUNK: delivery starts as soon as the first
# is stored, while the rest are rendered.
COMPOSE_CHUNK = 2_500
FIRST_CHUNK = 500


class SourceIdsChanged(ConfigError):
    """Ids of tonight's rows are ids the ledger knows spelled another way: the night stops
    before its first write (tasks/core/rekeying.py); `dueflow rekey` settles it."""


class NightNeedsApproval(ConfigError):
    """The night looks wrong (tasks/core/guard.py) and no one was asked who could answer:
    run from the command line or a notebook, it stops before its first write and says how
    to approve. `review` is what a person would be shown."""

    def __init__(self, review: NightReview) -> None:
        super().__init__(f"{review.headline()}. Nothing was reserved or sent. If it is right: `dueflow run"
                         " --approve all` (or a number of emails per job, or none) — the flow's parameter"
                         " `approve`; if not, fix the data. `dueflow forecast` lists what would go")
        self.review = review


class NightNotApproved(Exception):
    """A paused night's person did not answer in time (DUEFLOW_APPROVAL_TIMEOUT)."""

    def __init__(self, review: NightReview, waited: float) -> None:
        super().__init__(f"{review.headline()}; no one answered within {waited / 3600:g} h, so nothing was"
                         " reserved or sent")
        self.review = review


class Steps(Protocol):
    """How the night calls a step of tasks/steps.py."""

    def __call__(self, step: Any, *args: Any, **kwargs: Any) -> Any:
        """Run one step and return its result."""
        ...

    def map(self, step: Any, items: Sequence[Any], *shared: Any) -> list[Callable[[], Any]]:
        """Start the step over each item (with the `shared` arguments); one callable per
        item, in order, that returns its result or raises what the step raised."""
        ...

    @property
    def spreads(self) -> bool:
        """Whether mapped steps may run on more workers than the flow's own DELIVERY_WORKERS
        (a cluster): delivery then cuts more, smaller batches so that each worker has some."""
        ...


class Direct:
    """Each step called as the plain function it wraps, in this thread, in order: the
    unit layer's nights, without Prefect."""

    spreads = False

    def __call__(self, step: Any, *args: Any, **kwargs: Any) -> Any:
        return step.fn(*args, **kwargs)

    def map(self, step: Any, items: Sequence[Any], *shared: Any) -> list[Callable[[], Any]]:
        results: list[Callable[[], Any]] = []
        for item in items:
            try:
                results.append(partial(_given, step.fn(item, *shared)))
            except Exception as exc:  # raised where the flow would raise it: at .result()
                results.append(partial(_raise, exc))
        return results


def _given(value: Any) -> Any:
    return value


def _raise(exc: Exception) -> Any:
    raise exc


@dataclass(frozen=True)
class Night:
    """Everything one night's steps share: its jobs (built once), where it reads and writes,
    how it delivers, for which day, as which run, with which parameters."""

    jobs: tuple[NightJob, ...]
    store: Store
    delivery: DeliverySettings
    as_of: date
    params: RunParameters
    flow_run_id: str | None = None
    retain_bodies_days: int | None = None  # DUEFLOW_RETAIN_BODIES_DAYS
    today: date | None = None  # today in the business zone (retention of a night ahead)
    log: logging.Logger | logging.LoggerAdapter = field(default=logging.getLogger("dueflow.night"),
                                                        repr=False)
    bounds: Bounds | None = None  # what an ordinary night may do (None: DUEFLOW_GUARD off)
    approval: Approval | None = None  # a person's word given before the night (`approve`)
    # How a night that looks wrong asks a person (the flow pauses in Prefect); None: it
    # cannot, and stops (NightNeedsApproval).
    ask: Callable[[NightReview], Approval] | None = field(default=None, repr=False)


# The columns of the keys a night reserved that the nights after it compare with (guard.figures_of).
WON_FIGURES = ("key", "amount", "currency")


@dataclass
class Tonight:
    """What the steps of one night have made so far: the summary's material."""

    tripped: tuple[Tripped, ...] = ()  # the bounds it crossed (tasks/core/guard.py)
    approval: Approval | None = None  # and who approved it
    won: dict[str, pd.DataFrame] = field(default_factory=dict)  # the keys it reserved, per job
    rows: list[pd.DataFrame] = field(default_factory=list)
    drafts: list[Draft] = field(default_factory=list)
    facts: list[pd.DataFrame] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def run_night(night: Night, call: Steps) -> RunSummary:
    """The night's steps, for each job, after what earlier runs left."""
    log = night.log
    extracted: dict[Job, Extracted] = {}
    decisions: dict[Job, Decision] = {}
    for job in night.jobs:  # the delays in force, which the run form's parameter cannot show
        if (rules := getattr(job, "rules", None)) is not None:
            log.info("%s: delays in force: %s", job.name, rules.profiles.said())
    for job in night.jobs:  # 1. extract and 2. decide: all before any write
        extracted[job.name] = read_sources(night, job, call)
        log.info("%s", extract_line(job.name, extracted[job.name]))
        decisions[job.name] = call(steps.decide, job, extracted[job.name], night.as_of)
        log.info("%s: %s", job.name, decision_line(decisions[job.name]))
    # Ids the ledger knows spelled another way: the source changed under the night, and
    # its history would be lost; nothing is written, not even what earlier runs left.
    if not (changed := respelled_ids(night, decisions, extracted)).empty:
        raise SourceIdsChanged(stop_line(changed))
    night, tonight = looked_at(night, decisions)  # a night that looks wrong waits for a person
    tonight.rows.append(earlier := send_earlier(night, call))
    if not earlier.empty:
        log.log(attention_level(earlier), "earlier runs: %s", count_line(earlier))
    # 5. deliver: each chunk as soon as it is stored, on the flow's delivery workers, while
    # this thread reserves, renders and stores the next (and the next job's): the mail
    # server's pace hides the night's own work (docs/performance.md, "Delivery").
    deliveries: list[tuple[NightJob, list[Callable[[], pd.DataFrame]]]] = []
    for job in night.jobs:
        # A job's frames are the night's largest (a surge's tens of MB): once its emails are
        # stored and on their way, only the summary's material is kept (docs/performance.md).
        sending = send_job(night, job, decisions.pop(job.name), extracted.pop(job.name), call, tonight)
        deliveries.append((job, sending))
    for job, sending in deliveries:  # each job's outcomes, once its deliveries are done
        delivered = concat_rows([outcomes() for outcomes in sending])
        if not delivered.empty:
            log.log(attention_level(delivered), "%s: %s", job.name, count_line(delivered))
        tonight.rows.append(delivered)
    pruned, retained = retention(night)
    record_night(night, tonight)
    summary = summarize_night(night, tonight)                                  # 6. report
    summary.pruned = pruned
    summary.approval = tonight.approval.said() if tonight.approval else None
    summary.warnings.extend(tonight.warnings + retained)
    return summary


def send_job(night: Night, job: NightJob, decision: Decision, extracted: Extracted, call: Steps,
             tonight: Tonight) -> list[Callable[[], pd.DataFrame]]:
    """Reserve, compose and store one job's emails, each chunk handed to delivery once
    stored; what the summary needs goes into `tonight`. The callables that wait for the
    deliveries' outcomes."""
    log = night.log
    winners, job_rows = reserve(night, job, decision, call)              # 3. reserve
    if night.params.dry_run:  # a dry run writes nothing: it says what it would do
        log.info("%s: would reserve %s new email(s) (dry run: nothing is written)", job.name,
                 f"{len(winners):,}")
    else:
        log.info("%s: reserved %s of %s new email(s)", job.name, f"{len(winners):,}",
                 f"{len(decision.to_reserve):,}")
    sending: list[Callable[[], pd.DataFrame]] = []
    prepared = compose(night, job, winners, extracted, call,                 # 4. compose (and store)
                       partial(deliver_chunk, night, job, call, sending))
    if not winners.empty:
        done = "rendered" if night.params.dry_run else "composed and stored"
        log.log(logging.WARNING if prepared.failures else logging.INFO, "%s: %s %s email(s)%s", job.name,
                done, f"{len(prepared.emails):,}",
                f", {len(prepared.failures)} could not be rendered" if prepared.failures else "")
    tonight.rows.append(job_rows)
    tonight.won[job.name] = winners[[c for c in WON_FIGURES if c in winners]]
    if night.params.dry_run and job.name == Job.DUNNING:  # the start's effect, before the first night
        tonight.warnings += filter(None, [before_due_line(before_due(winners, night.as_of),
                                                          night.params.dunning_start)])
    tonight.drafts += prepared.drafts
    tonight.warnings += prepared.without_pdf()
    # What a person knows each due key by (summary.rows); keys settled by earlier runs
    # are read without their text (sql/extract_contracts): nothing is known of them.
    tonight.facts.append(facts_of(job.name, decision.due, {e.key: e.subject for e in prepared.emails},
                                  decision.quarantined, job.source))
    return sending


def looked_at(night: Night, decisions: dict[Job, Decision]) -> tuple[Night, Tonight]:
    """The night compared with the recent ones before its first write
    (tasks/core/guard.py): an ordinary night goes on as it is; one that looks wrong goes on
    only with a person's word — given before (`approve`), or asked (the flow pauses in
    Prefect) — and with their send cap. Cheap for an ordinary night: the recent nights and
    the open invoices are read only when a job would send more than the minimum."""
    if night.bounds is None or night.params.dry_run or night.params.adopt:
        return night, Tonight()
    due = {str(job): decision.to_reserve for job, decision in decisions.items()}
    if all(len(rows) <= night.bounds.min_emails for rows in due.values()):
        return night, Tonight()
    figures = figures_of(due, night.store.sources.open_invoices())
    recent = night.store.ledger.recent_nights(night.as_of, night.bounds.recent_nights)
    tripped = tuple(looks_wrong(figures, recent, night.bounds))
    if not tripped:
        return night, Tonight()
    review = NightReview(night.as_of, tripped, figures, sample_of(due))
    night.log.warning("%s", review.headline())
    approval = night.approval or (night.ask(review) if night.ask else None)
    if approval is None:
        raise NightNeedsApproval(review)
    night.log.warning("the night goes on: %s", approval.said())
    params = replace(night.params, send_cap=approval.cap(night.params.send_cap))
    return replace(night, params=params), Tonight(tripped=tripped, approval=approval)


def record_night(night: Night, tonight: Tonight) -> None:
    """What the night reserved, kept for the nights after it to compare with (and who
    approved it, when it looked wrong); nothing for a dry run, an adoption, or a night
    that reserved nothing and needed no one."""
    if night.bounds is None or night.params.dry_run or night.params.adopt:
        return
    if not tonight.approval and not any(len(rows) for rows in tonight.won.values()):
        return
    try:
        night.store.ledger.record_night(night.as_of, night.flow_run_id, figures_of(tonight.won),
                                        tonight.tripped, tonight.approval)
    except Exception as exc:  # the emails are out: a night's figures are worth a warning
        if not night.store.ledger.transient(exc):
            raise
        tonight.warnings.append(f"could not record the night's figures ({exc}): the next night compares"
                                " itself with the nights before")


def read_sources(night: Night, job: NightJob, call: Steps) -> Extracted:
    """One job's extract. Sources that refuse it (a statement timeout, a permission, a value
    an expression of the mapping cannot read) do so before anything is written."""
    extracted = call(steps.extract, job, night.store, night.as_of)
    if isinstance(extracted, steps.SourcesRefused):
        raise ConfigError(extracted.line)
    return extracted


def respelled_ids(night: Night, decisions: dict[Job, Decision],
                  extracted: dict[Job, Extracted]) -> pd.DataFrame:
    """The ids of tonight's new rows that the ledger knows spelled another way
    (tasks/core/rekeying.py): job, source, old_id, new_id. One index probe per job with
    new rows; the sources and the operator's decisions are read only when the ledger has
    such a form."""
    ledger, found, apart = night.store.ledger, [], None
    for job in night.jobs:
        new = new_subjects(decisions[job.name].to_reserve, extracted[job.name]["history"])
        if new.empty:
            continue
        known = ledger.ids_of_forms(job.name, new["subject_form"].dropna().unique().tolist())
        known = known[~known["subject_id"].isin(new["subject_id"])]
        if known.empty:
            continue
        still = night.store.sources.by_id(job.source, known["subject_id"].unique().tolist())["id"]
        apart = ledger.kept_apart() if apart is None else apart
        found.append(respelled(job.name, job.source, new, known, set(still.astype(str)), apart))
    return pd.concat(found, ignore_index=True) if found else pd.DataFrame(columns=list(PAIR_COLUMNS))


def restate_owed(night: Night, call: Steps, keys: Sequence[str] | None = None) -> Prepared:
    """The restate-owed step (tasks/steps.py: stored reminders — these keys', or all — whose
    amount is no longer what the client owes, rendered again before any is claimed), said
    in the log."""
    again = call(steps.restate_owed, night.store, night.jobs, night.as_of, keys)
    if again.emails or again.failures:
        night.log.info("dunning: %s stored reminder(s) rendered again, %s withdrawn: what the client owes"
                       " changed since they were rendered", len(again.emails), len(again.failures))
    return again


def restated(prepared: Prepared, again: Prepared) -> Prepared:
    """Tonight's messages with those rendered again in their place (the failures: settled)."""
    if not again.emails and not again.failures:
        return prepared
    new = {e.key: e for e in again.emails}
    gone = dict(again.failures)
    return replace(prepared, emails=[new.get(e.key, e) for e in prepared.emails if e.key not in gone],
                   failures=[*prepared.failures, *again.failures])


def send_earlier(night: Night, call: Steps) -> pd.DataFrame:
    """Send what earlier runs reserved and surely never handed to SMTP, and the failed rows
    due for another attempt, re-addressed from the data as it is now; rows no longer due
    are withdrawn (G3, G4)."""
    if night.params.dry_run or night.params.adopt:
        return no_rows()
    ledger = night.store.ledger
    # A step runs (a task run in the UI) only when it has rows: most nights have none.
    unrendered: dict[str, str] = {}
    if not ledger.retry_candidates(night.as_of, night.params.retry_max_attempts, datetime.now(UTC)).empty:
        unrendered = dict(call(steps.retry_failed, night.store, night.jobs, night.as_of, night.flow_run_id,
                               night.params.retry_max_attempts, night.params.retry_backoff))
    withdrawn = ledger.withdraw_unsent(night.as_of)
    unsent = ledger.unsent_rows()
    if not (restatable := steps.restatable(unsent)).empty:
        restate_owed(night, call, restatable["key"].tolist())
        unsent = ledger.unsent_rows()
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
            composed = steps.render_again(night.store, night.jobs, unstored)
            call(steps.store_messages, ledger, composed)
        failed = dict(composed.failures)
        ready = unsent[~unsent["key"].isin(failed)]
        failed_rows = unsent[unsent["key"].isin(failed)]
        rows.append(key_rows(failed_rows["key"].map(of_job), failed_rows, RowStatus.FAILED, failed,
                             retry=True))
        # Rows rendered again into a statement go with its carrier (tasks/core/statements.py).
        riders = {e.key for e in composed.emails if e.statement_key not in (None, e.key)}
        riders |= set(ready.loc[ready["statement_key"].notna().to_numpy()
                                & ready["statement_key"].ne(ready["key"]).fillna(False).to_numpy(), "key"])
        items = [Recipient(k, r or "") for k, r in zip(ready["key"], ready["recipient"], strict=True)
                 if k not in riders]
        delivered = in_statements(deliver(night, items, call), composed.addressed().emails)
        rows.append(delivery_rows(of_job, delivered, retry=True))
    return concat_rows(rows)


def reserve(night: Night, job: NightJob, decision: Decision,
            call: Steps) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Quarantine the bad rows and reserve what is due, as planned
    (tasks/core/reservation.py): the keys this run won (in a dry run, the keys it would
    reserve) and the summary rows of everything else."""
    ledger, params = night.store.ledger, night.params
    handled = already_in_ledger(decision)
    open_keys = ledger.open_keys() if len(handled) else {}
    failed = ledger.failed_rows() if LedgerStatus.FAILED in open_keys.values() else None
    plan = plan_reservation(job.name, job.source, decision, open_keys, params.send_cap, failed,
                            params.retry_max_attempts)
    if params.dry_run:
        return plan.candidates, plan.rows
    if not plan.quarantined.empty:
        call(steps.quarantine_rows, ledger, job.name, plan.quarantined, night.as_of, night.flow_run_id)
    if plan.candidates.empty:
        return plan.candidates, plan.rows
    won, lost = call(steps.reserve_slots, ledger, job.name, plan.candidates, night.as_of, night.flow_run_id,
                     status=LedgerStatus.ADOPTED if params.adopt else LedgerStatus.PENDING)
    reserved = reservation_outcome(job.name, plan.candidates, won, lost, params.adopt)
    return reserved.winners, concat_rows([plan.rows, reserved.rows])


def compose(night: Night, job: NightJob, winners: pd.DataFrame, extracted: Extracted, call: Steps,
            stored: Callable[[pd.DataFrame, Prepared], Prepared] | None = None) -> Prepared:
    """Plan and render the winners' emails COMPOSE_CHUNK keys at a time and, unless this is
    a dry run, store each chunk's messages on their ledger rows before rendering the next;
    each chunk, once stored, is handed to `stored` (which starts its delivery: every message
    is stored before it is sent, G2), and only the addressing stays in memory."""
    prepared = Prepared()
    store = not night.params.dry_run
    if store and not winners.empty:
        night.store.ledger.prepare_to_store(len(winners))
    for chunk in chunks(winners, job.together(winners)):
        drafts = call(steps.plan, job, chunk, night.store, night.as_of) if job.plans else []
        made = call(steps.compose_and_store, job, chunk, extracted, night.as_of, drafts, night.store.ledger,
                    store)
        prepared += stored(chunk, made) if stored else made
        give_back_freed_memory()  # the chunk's messages are stored: their memory, returned
    return prepared


def chunks(winners: pd.DataFrame, together: pd.Series) -> list[pd.DataFrame]:
    """The winners cut into chunks of FIRST_CHUNK keys, each next one twice as large up to
    COMPOSE_CHUNK; rows with the same `together` value (a statement's: one email) are put
    side by side and never cut apart, so each chunk holds whole emails."""
    if winners.empty:
        return []
    if together.notna().any():  # the rows of one email side by side, in the winners' order
        group = together.fillna(winners["key"].astype("string")).to_numpy(dtype=object)
        position = np.arange(len(group))
        first = pd.Series(position).groupby(group, sort=False).transform("min").to_numpy()
        order = np.lexsort((position, first))  # by each email's first row, then in order
        winners, group = winners.iloc[order], group[order]
    else:
        group = None
    out, start, size = [], 0, min(FIRST_CHUNK, COMPOSE_CHUNK)
    while start < len(winners):
        end = min(start + size, len(winners))
        while group is not None and end < len(winners) and group[end] == group[end - 1]:
            end += 1  # the rest of this email's rows
        out.append(winners.iloc[start:end])
        start, size = end, min(2 * size, COMPOSE_CHUNK)
    return out


def deliver_chunk(night: Night, job: NightJob, call: Steps, sending: list[Callable[[], pd.DataFrame]],
                  chunk: pd.DataFrame, prepared: Prepared) -> Prepared:
    """Start delivering one stored chunk (its outcomes: a callable appended to `sending`);
    a reminder whose invoice was paid since the extract is rendered again, or withdrawn,
    first (the restate-owed step, for this chunk's keys). The chunk as it goes."""
    if job.name == Job.DUNNING and not (night.params.dry_run or night.params.adopt) and prepared.emails:
        prepared = restated(prepared, restate_owed(night, call, [e.key for e in prepared.emails]))
    sending.append(deliver_won(night, job, chunk, prepared, call))
    return prepared


def delivery_rows(jobs: str | dict[str, str], deliveries: Sequence[Delivery],
                  retry: bool = False) -> pd.DataFrame:
    frame = pd.DataFrame({"key": [d.key for d in deliveries], "recipient": [d.recipient for d in deliveries]})
    job = frame["key"].map(jobs) if isinstance(jobs, dict) else jobs
    return key_rows(job, frame, [d.status for d in deliveries], [d.detail for d in deliveries], retry,
                    [d.retry_after for d in deliveries])


def deliver_won(night: Night, job: NightJob, winners: pd.DataFrame, prepared: Prepared,
                call: Steps) -> Callable[[], pd.DataFrame]:
    """Start delivering the stored messages of the keys this run won; the returned callable
    waits for it: one row per key (a dry run lists what it would send)."""
    if winners.empty:
        return no_rows
    if night.params.dry_run:
        subjects = {e.key: e.subject + (f" [{e.draft_source} paragraph]" if e.draft_source else "")
                    for e in prepared.emails} | dict(prepared.failures)
        return partial(key_rows, job.name, winners, RowStatus.WOULD_SEND, subjects)
    failed = dict(prepared.failures)
    # A statement goes once, claimed by its carrier; its other rows share its outcome.
    items = [Recipient(e.key, e.recipient) for e in prepared.emails if e.statement_key in (None, e.key)]
    delivering = deliver_soon(night, items, call)
    unrendered = key_rows(job.name, winners[winners["key"].isin(failed)], RowStatus.FAILED, failed)
    return lambda: concat_rows([unrendered, delivery_rows(job.name, in_statements(delivering(),
                                                                                   prepared.emails))])


def deliver(night: Night, items: Sequence[Recipient], call: Steps) -> list[Delivery]:
    """`deliver_soon`, waited for."""
    return deliver_soon(night, items, call)()


def deliver_soon(night: Night, items: Sequence[Recipient], call: Steps) -> Callable[[], list[Delivery]]:
    """The deliver-batch step mapped over batches of `items` (DELIVERY_WORKERS at a time on
    the flow's task runner), started now; the returned callable waits for them, then makes
    a second pass over what a batch could not reach because the ledger was unavailable. A
    batch that died is reported by what the ledger says."""
    def start(some: Sequence[Recipient]) -> Callable[[], list[Delivery]]:
        groups = batches(some, DELIVERY_WORKERS, MAX_BATCH if call.spreads else None)
        results = call.map(steps.deliver_batch, groups, night.delivery)

        def wait() -> list[Delivery]:
            deliveries: list[Delivery] = []
            for batch, result in zip(groups, results, strict=True):
                try:
                    deliveries.extend(result())
                except Exception as exc:
                    deliveries.extend(after_a_crash(batch, night.delivery, exc))
            return deliveries
        return wait

    progress.expect(len(items))
    first = start(items)  # the batches are on their way

    def send(some: Sequence[Recipient]) -> list[Delivery]:
        return first() if some is items else start(some)()

    return partial(with_second_pass, items, night.delivery, send)


def retention(night: Night) -> tuple[int, list[str]]:
    """With DUEFLOW_RETAIN_BODIES_DAYS, after the night's sends: the bodies and addresses of
    settled rows whose step got out that many days before the night (or before today, for a
    night ahead) are pruned (sql/prune_bodies). How many, and a warning if the database
    would not: the night's emails are out by now."""
    days = night.retain_bodies_days
    if not days or night.params.dry_run or night.params.adopt:
        return 0, []
    before = min(night.as_of, night.today or night.as_of) - timedelta(days=days)
    ledger = night.store.ledger
    try:
        pruned = ledger.prune_bodies(before)
    except Exception as exc:
        if not ledger.transient(exc):
            raise
        return 0, [f"retention: could not prune the bodies of rows before {before} ({exc}); the next"
                   " run tries again"]
    night.log.info("retention: pruned the bodies and addresses of %s settled row(s) whose step got out"
                   " before %s (DUEFLOW_RETAIN_BODIES_DAYS=%s)", f"{pruned:,}", before, days)
    return pruned, []


def summarize_night(night: Night, tonight: Tonight) -> RunSummary:
    """The night's summary, with what the whole ledger still holds unsettled. The work is
    recorded by now: losing the database here is worth a warning, not a failure."""
    warnings = stopped_because(night.delivery)  # the mail server stopped the night
    ledger = night.store.ledger
    rows = concat_rows(tonight.rows)
    counts: dict[str, int] = {}
    unsettled = None
    if not night.params.dry_run:
        try:
            counts = ledger.unsettled_counts()
            unsettled = ledger.unsettled_rows()
            rows = concat_rows([rows, bounced_rows(ledger.bounced_rows())])
        except Exception as exc:
            if not ledger.transient(exc):
                raise
            warnings.append(f"could not read the ledger's unsettled rows after the run: {exc}")
    return summarize(night.as_of, night.params.dry_run, night.flow_run_id, rows, counts, unsettled,
                     drafts_frame(tonight.drafts), warnings, pd.concat(tonight.facts, ignore_index=True))
