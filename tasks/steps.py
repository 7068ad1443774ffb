"""The night's steps as Prefect tasks, one home for all of them: each is a task run in the
UI (extract-renewals, decide-dunning, reserve-slots, compose-and-store-dunning,
deliver-batch, …), named for what it does. The night (tasks/night.py) calls them in
order; the unit layer calls the same functions without Prefect (`Direct` there).

One convention: a step takes what it works on and the `Store` (or the ledger) it reads
and writes, and returns plain values. A step whose every write is safe to run twice
declares retries for transient database errors (a lost connection, SQLite's busy lock):
reading the sources, storing messages (a row keeps the first message stored on it), the
quarantine. The reservation declares none: a retry after a lost acknowledgement would
find its own keys taken and leave them to the next night. A delivery batch declares none:
a second execution of it sends nothing its first may have handed over (tasks/deliver.py).
DataFrames pass between tasks in memory, so no task hashes its inputs (NO_CACHE) and
nothing is persisted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from datetime import UTC, date, datetime, timedelta
from typing import Any

from prefect import task, unmapped
from prefect.cache_policies import NO_CACHE
from prefect.utilities.annotations import quote

from dueflow.tasks.adapters.db_errors import transient
from dueflow.tasks.core.decide import Decision, retried_keys
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.keys import Job
from dueflow.tasks.core.message import OutgoingEmail
from dueflow.tasks.core.ports import Ledger, Store
from dueflow.tasks.core.render import Composed, Prepared
from dueflow.tasks.core.tone import Draft
from dueflow.tasks.core.validate import as_dates
from dueflow.tasks.deliver import Delivery, DeliverySettings, Recipient, deliver_one_batch, retry_time
from dueflow.tasks.jobs import Extracted, NightJob

# Transient errors are tried again after these pauses (seconds).
RETRY_DELAYS: list[float] = [1.0, 5.0]


def after_transient_error(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect's retry condition: only an error another attempt may not meet."""
    try:
        error = state.result(raise_on_failure=False)
    except Exception:
        return False
    return isinstance(error, BaseException) and transient(error)




@dataclass(frozen=True)
class SourcesRefused:
    """The database refused to read a source (a statement timeout, a privilege, a value an
    expression of the mapping cannot read): what the operator is told, in one line, before
    anything is written. Returned, not raised, so the task's failure is not logged as a
    traceback."""

    line: str


@task(name="extract", task_run_name="extract-{job.label}", cache_policy=NO_CACHE, retries=len(RETRY_DELAYS),
      retry_delay_seconds=RETRY_DELAYS, retry_condition_fn=after_transient_error)
def extract(job: NightJob, store: Store, as_of: date) -> Extracted | SourcesRefused:
    """One job's extract (`job.extract`); sources that refuse it say so in one line, and
    nothing was written."""
    try:
        return job.extract(store, as_of)
    except Exception as exc:
        line = store.sources.refused(exc, f"reading the {job.source} failed; nothing was written")
        if line is None:
            raise
        return SourcesRefused(line)


@task(name="decide", task_run_name="decide-{job.label}", cache_policy=NO_CACHE)
def decide(job: NightJob, extracted: Extracted, as_of: date) -> Decision:
    return job.decide(extracted, as_of)


@task(name="retry-failed", cache_policy=NO_CACHE)
def retry_failed(store: Store, jobs: Sequence[NightJob], as_of: date, flow_run_id: str | None,
                 max_attempts: int, backoff: timedelta) -> list[tuple[str, str]]:
    """Failed rows due for another attempt go back to pending (G4) with their message
    rendered again from the source rows as they are now: a retry goes to the address the
    data now says, with what the email now shows. A permanent failure (a mailbox refused
    it) is retried only when it would now go to another address. Never a `pending` row
    (G3). Returns the retries that could not be rendered, with why: they stay failed, the
    attempt counted and the next one after `backoff`."""
    now = datetime.now(UTC)
    candidates = store.ledger.retry_candidates(as_of, max_attempts, now)
    if candidates.empty:
        return []
    composed = changed_attachments(candidates, render_again(store, jobs, candidates))
    rendered = pd.DataFrame([e.as_row() for e in composed.emails],
                            columns=[f.name for f in fields(OutgoingEmail)])
    keys = set(retried_keys(candidates, rendered))
    store.ledger.requeue_failed(flow_run_id, [e.as_row() for e in composed.emails if e.key in keys])
    transient_failures = set(candidates.loc[~candidates["permanent"], "key"])
    unrendered = [(key, reason) for key, reason in composed.failures if key in transient_failures]
    store.ledger.record_unrendered_retries(unrendered, retry_time(now, backoff))
    return unrendered


def render_again(store: Store, jobs: Sequence[NightJob], rows: pd.DataFrame) -> Composed:
    """Ledger rows' messages rendered again by their jobs, each for the night it was
    reserved (its `as_of`)."""
    composed = Composed()
    nights = as_dates(rows["as_of"])
    for night in sorted(nights.dropna().unique()):  # one render per reservation night
        of_night = rows[nights == night]
        for job in jobs:
            mine = of_night[of_night["job"] == job.name]
            if not mine.empty:
                composed += job.render_again(store, mine, pd.Timestamp(night).date())
    return composed


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


@task(name="quarantine-rows", cache_policy=NO_CACHE, retries=len(RETRY_DELAYS),
      retry_delay_seconds=RETRY_DELAYS, retry_condition_fn=after_transient_error)
def quarantine_rows(ledger: Ledger, job: str, rows: pd.DataFrame, as_of: date,
                    flow_run_id: str | None) -> None:
    ledger.quarantine(job, rows, as_of, flow_run_id)


@task(name="reserve-slots", cache_policy=NO_CACHE)
def reserve_slots(ledger: Ledger, job: str, candidates: pd.DataFrame, as_of: date, flow_run_id: str | None,
                  status: str = "pending") -> tuple[set[str], dict[str, str]]:
    """One bulk INSERT … ON CONFLICT DO NOTHING RETURNING: the keys this run won, and for
    the candidates it did not win, their ledger status (absent: the source row changed
    after extraction and the reservation's re-check refused it)."""
    won = ledger.reserve(job, candidates, as_of, flow_run_id, status)
    lost = [key for key in candidates["key"] if key not in won]
    return won, ledger.statuses(lost)


@task(name="plan-reminder-paragraphs", cache_policy=NO_CACHE)
def plan(job: NightJob, winners: pd.DataFrame, store: Store, as_of: date) -> list[Draft]:
    """The paragraph of each reminder among one chunk of tonight's winners (G7,
    `job.plan`): the model is asked only here, only for keys this run just reserved."""
    return job.plan(winners, store, as_of)


@task(name="compose-and-store", task_run_name="compose-and-store-{job.label}", cache_policy=NO_CACHE,
      retries=len(RETRY_DELAYS), retry_delay_seconds=RETRY_DELAYS, retry_condition_fn=after_transient_error)
def compose_and_store(job: NightJob, winners: pd.DataFrame, extracted: Extracted, as_of: date,
                      drafts: list[Draft], ledger: Ledger, store: bool) -> Prepared:
    """Render one chunk of tonight's winners (`job.compose`) and, unless this is a dry run
    (`store` false), commit each message on its ledger row before any of them is sent (G2);
    rows that could not be rendered are marked failed. Returns only the addressing: Prefect
    keeps every task's result until the flow run ends, and a chunk's messages take tens of
    MB."""
    composed = job.compose(winners, extracted, as_of, {d.key: d for d in drafts})
    if store:
        ledger.store_messages([email.as_row() for email in composed.emails])
        ledger.record_unrendered(composed.failures)
    return composed.addressed()


@task(name="restate-owed", cache_policy=NO_CACHE)
def restate_owed(store: Store, jobs: Sequence[NightJob], as_of: date,
                 keys: Sequence[str] | None = None) -> Prepared:
    """Stored reminders whose amount is no longer what the client owes (a payment or a credit
    note recorded since they were rendered: docs/design.md, "What the client still owes"),
    while no delivery has claimed them — provably never handed to SMTP: rendered again from
    the rows as they are on `as_of` (the night that sends them), under the same key and so
    the same Message-ID, in place of the stored message; one with nothing left to collect
    is settled failed with the reason instead. A claimed row keeps its text: it may have
    left (G3). With `keys`, only those rows (a chunk about to be delivered). No retries: a
    second run of it finds nothing changed, or does the same."""
    ledger = store.ledger
    unsent = ledger.unsent_rows(keys)
    dunning = [job for job in jobs if job.name == Job.DUNNING]
    rows = restatable(unsent)
    if rows.empty or not dunning:
        return Prepared()
    now = store.sources.by_id("invoices", rows["subject_id"].unique().tolist(), as_of)
    state = now.drop_duplicates("id").set_index("id")["payment_state"].astype(object).fillna("")
    changed = rows[rows["subject_id"].map(state).ne(rows["owed_state"]).to_numpy()]
    if changed.empty:
        return Prepared()
    # A statement is one email: one of its invoices changed, all of it is rendered again.
    statements = changed["statement_key"].dropna()
    if not statements.empty:
        changed = rows[rows["key"].isin(changed["key"]).to_numpy()
                       | rows["statement_key"].isin(statements).to_numpy()]
    composed = dunning[0].render_again(store, changed, as_of)
    ledger.restate_messages([email.as_row() for email in composed.emails])
    ledger.record_unrendered(composed.failures)
    return composed.addressed()


def restatable(unsent: pd.DataFrame) -> pd.DataFrame:
    """The rows of ledger.unsent_rows() that restate-owed looks at: stored reminders that say
    what they were rendered from (the rest have nothing to restate)."""
    return unsent[(unsent["job"] == Job.DUNNING).to_numpy() & unsent["stored"].to_numpy(dtype=bool)
                  & unsent["owed_state"].notna().to_numpy()]


@task(name="store-messages", cache_policy=NO_CACHE, retries=len(RETRY_DELAYS),
      retry_delay_seconds=RETRY_DELAYS, retry_condition_fn=after_transient_error)
def store_messages(ledger: Ledger, composed: Composed) -> None:
    """Commit each rendered message on its ledger row before anything is sent (G2), and
    mark the rows that could not be rendered as failed (known not sent)."""
    ledger.store_messages([email.as_row() for email in composed.emails])
    ledger.record_unrendered(composed.failures)


@task(name="deliver-batch", cache_policy=NO_CACHE)
def deliver_batch(items: Sequence[Recipient], settings: DeliverySettings) -> list[Delivery]:
    """Claim, send and record the batch's keys group by group (tasks/deliver.py)."""
    return deliver_one_batch(items, settings)


class Prefect:
    """The flow's way of calling a step: a task run each (tasks/night.py `Steps`); a map
    runs on the flow's bounded task runner.

    Every argument is passed `quote`d: Prefect otherwise walks each one, element by element,
    looking for futures to wait on — twice per task run, a second of a first night's 3,000
    emails and most of a surge's delivery overhead (docs/performance.md). The night passes
    values, never futures, so there is nothing for it to find; the step receives the value
    itself, and a task run's name still reads its fields."""

    def __call__(self, step: Any, *args: Any, **kwargs: Any) -> Any:
        return step(*map(quote, args), **{name: quote(value) for name, value in kwargs.items()})

    @property
    def spreads(self) -> bool:
        return not _on_threads()

    def map(self, step: Any, items: Sequence[Any], *shared: Any) -> list[Callable[[], Any]]:
        if not _on_threads():  # Dask takes a quote (a tuple) for a task of its own graph
            return [future.result for future in step.map(items, *(unmapped(value) for value in shared))]
        futures = step.map([quote(item) for item in items], *(unmapped(quote(value)) for value in shared))
        return [future.result for future in futures]


def _on_threads() -> bool:
    """Whether the flow's mapped steps run on its thread pool (not on a Dask cluster)."""
    from prefect.context import FlowRunContext
    from prefect.task_runners import ThreadPoolTaskRunner

    context = FlowRunContext.get()
    return context is None or isinstance(context.task_runner, ThreadPoolTaskRunner)
