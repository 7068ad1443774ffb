"""The nightly run: extract → decide → reserve → compose → deliver → report (DESIGN.md),
for both jobs — renewal alerts and invoice dunning — in one flow run."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Literal

import pandas as pd
from prefect import flow, get_run_logger
from prefect.runtime import flow_run
from prefect.task_runners import ThreadPoolTaskRunner

from blocks.settings import ConfigError, Settings
from tasks import db
from tasks.compose import Composed
from tasks.core.statuses import LedgerStatus, RowStatus
from tasks.decide import Decision, most_urgent_first, normalise_leads
from tasks.deliver import DeliverySettings, Recipient, deliver
from tasks.llm import Draft, resolve_llm_config
from tasks.lock import run_lock, run_lock_enabled
from tasks.mail import parse_mail_url
from tasks.report import ROW_COLUMNS, RunSummary, drafts_frame, summarize
from tasks.steps import (
    compose_dunning,
    compose_renewals,
    decide_dunning,
    decide_renewals,
    draft_reminders,
    extract_dunning,
    extract_renewals,
    find_unsent,
    publish_report,
    quarantine_rows,
    record_unrendered,
    render_unsent,
    reserve_slots,
    store_messages,
)

DELIVERY_WORKERS = 4  # parallel SMTP connections; the thread pool is bounded to this


@dataclass(frozen=True)
class RunContext:
    settings: Settings
    delivery: DeliverySettings
    as_of: date
    dry_run: bool
    flow_run_id: str | None
    renewal_locale: str = "en"
    send_cap: int | None = None  # at most this many new emails per job; the rest wait a night
    adopt: bool = False  # record what is due as handled ('adopted') and send nothing


def _rows(job: str, frame: pd.DataFrame, status: RowStatus | pd.Series,
          detail: str | Mapping[str, str], retry: bool = False) -> pd.DataFrame:
    """Summary rows for `frame`; `detail` is one text for all, or a text per key."""
    return pd.DataFrame(
        {"job": job, "key": frame["key"], "recipient": frame["recipient"], "status": status,
         "detail": frame["key"].map(detail) if isinstance(detail, Mapping) else detail,
         "retry": retry}
    ).reindex(columns=ROW_COLUMNS)


def _delivered(jobs: Mapping[str, str], deliveries: list, retry: bool = False) -> pd.DataFrame:
    return pd.DataFrame([{"job": jobs[d.key], "key": d.key, "recipient": d.recipient, "status": d.status,
                          "detail": d.detail, "retry": retry} for d in deliveries],
                        columns=list(ROW_COLUMNS))


def send_stored(ctx: RunContext, job: str, winners: pd.DataFrame, composed: Composed) -> pd.DataFrame:
    """store (G2) → deliver the keys this run won; one summary row per key."""
    url = ctx.settings.database_url
    emails, failures = composed
    store_messages(url, emails)
    record_unrendered(url, failures)
    failed = dict(failures)
    items = [Recipient(e.key, e.recipient) for e in emails]
    deliveries = deliver(items, ctx.delivery, DELIVERY_WORKERS)
    return pd.concat([
        _rows(job, winners[winners["key"].isin(failed)], RowStatus.FAILED, failed),
        _delivered(dict.fromkeys(winners["key"], job), deliveries),
    ], ignore_index=True)


def _handled_rows(job: str, handled: pd.DataFrame, open_keys: Mapping[str, str]) -> pd.DataFrame:
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
    return pd.DataFrame({"job": job, "key": handled["key"], "recipient": handled["recipient"],
                         "status": status, "detail": detail, "retry": False}).reindex(columns=ROW_COLUMNS)


def run_job(
    ctx: RunContext, job: str, source: str, decision: Decision,
    compose: Callable[[pd.DataFrame], Composed], open_keys: Mapping[str, str],
) -> pd.DataFrame:
    """quarantine → reserve → compose → store → deliver for one job; its summary rows."""
    url = ctx.settings.database_url
    bad = decision.quarantined
    parts = [
        pd.DataFrame({"job": job, "key": f"{source}/" + bad["source_id"], "recipient": pd.NA,
                      "status": RowStatus.QUARANTINED, "detail": bad["reason"]}).reindex(columns=ROW_COLUMNS),
        _handled_rows(job, decision.due[decision.due["handled"]], open_keys),
    ]
    candidates = decision.to_reserve
    if ctx.send_cap is not None and len(candidates) > ctx.send_cap:
        ordered = most_urgent_first(candidates)
        candidates, deferred = ordered.head(ctx.send_cap), ordered.iloc[ctx.send_cap:]
        parts.append(_rows(job, deferred, RowStatus.DEFERRED,
                           f"send cap of {ctx.send_cap} reached: a later run picks it up"))
    if ctx.dry_run:
        emails, failures = compose(candidates)
        subjects = {e.key: e.subject + (f" [{e.draft_source} paragraph]" if e.draft_source else "")
                    for e in emails} | dict(failures)
        parts.append(_rows(job, candidates, RowStatus.WOULD_SEND, subjects))
    else:
        quarantine_rows(url, job, bad, ctx.as_of, ctx.flow_run_id)
        won, lost = reserve_slots(url, job, candidates, ctx.as_of, ctx.flow_run_id,
                                  status=LedgerStatus.ADOPTED if ctx.adopt else LedgerStatus.PENDING)
        winners = candidates[candidates["key"].isin(won)]
        not_won = candidates[~candidates["key"].isin(won)]
        taken = not_won["key"].isin(lost)
        parts.append(_rows(job, not_won[taken], RowStatus.ALREADY_HANDLED, "reserved by another run"))
        parts.append(_rows(job, not_won[~taken], RowStatus.NO_LONGER_DUE,
                           "not reserved: the source row changed after extraction (paid, paused,"
                           " or its dunning step moved)"))
        if ctx.adopt:
            parts.append(_rows(job, winners, RowStatus.ADOPTED, "recorded as handled; not sent"))
        elif not winners.empty:
            parts.append(send_stored(ctx, job, winners, compose(winners)))
    kept = [p for p in parts if not p.empty]
    return pd.concat(kept, ignore_index=True) if kept else pd.DataFrame(columns=list(ROW_COLUMNS))


def send_unsent(ctx: RunContext, max_attempts: int) -> pd.DataFrame:
    """Send what earlier runs reserved and surely never handed to SMTP, and the failed rows
    due for another attempt; rows no longer due are withdrawn (G3, G4)."""
    settings, url = ctx.settings, ctx.settings.database_url
    withdrawn, unsent = find_unsent(url, ctx.as_of, ctx.flow_run_id, max_attempts)
    parts = [pd.DataFrame({"job": [k.split("/", 1)[0] for k in withdrawn], "key": withdrawn,
                           "recipient": pd.NA, "status": RowStatus.NO_LONGER_DUE,
                           "detail": "withdrawn: no longer due, never sent (ledger: failed)",
                           "retry": True}).reindex(columns=ROW_COLUMNS)]
    if not unsent.empty:
        unstored = unsent[~unsent["stored"]]
        failed: dict[str, str] = {}
        if not unstored.empty:
            emails, failures = render_unsent(url, unstored, ctx.as_of, ctx.renewal_locale,
                                             settings.sender(), settings.timezone,
                                             settings.escalation_address())
            store_messages(url, emails)
            record_unrendered(url, failures)
            failed = dict(failures)
        ready = unsent[~unsent["key"].isin(failed)]
        jobs = dict(zip(unsent["key"], unsent["job"], strict=True))
        parts.append(_rows("", unsent[unsent["key"].isin(failed)], RowStatus.FAILED, failed, retry=True)
                     .assign(job=lambda f: f["key"].map(jobs)))
        items = [Recipient(k, r or "") for k, r in zip(ready["key"], ready["recipient"], strict=True)]
        parts.append(_delivered(jobs, deliver(items, ctx.delivery, DELIVERY_WORKERS), retry=True))
    kept = [p for p in parts if not p.empty]
    return pd.concat(kept, ignore_index=True) if kept else pd.DataFrame(columns=list(ROW_COLUMNS))


@flow(name="nightly-alerts", task_runner=ThreadPoolTaskRunner(max_workers=DELIVERY_WORKERS))
def nightly_alerts(
    as_of: date | None = None,
    dry_run: bool = False,
    renewal_leads: list[int] = [60, 30, 15],  # noqa: B006 - Prefect copies parameters
    renewal_locale: str = "en",
    dunning_delays: list[int] = [7, 5, 7],  # noqa: B006 - days SENT→R1, R1→R2, R2→OVERDUE
    dunning_start: Literal["sent", "due"] = "sent",
    retry_max_attempts: int = 3,
    retry_backoff_minutes: int = 60,
    send_cap: int | None = None,
    adopt: bool = False,
) -> RunSummary:
    """Send every renewal alert and dunning step due on `as_of` exactly once.
    `dry_run` decides and renders on the same code path, and writes and sends nothing.
    `dunning_start` dates SENT by the invoice's `sent_at` ("sent") or `due_date` ("due").
    Rows that surely failed are retried by later runs, at most `retry_max_attempts`
    attempts in all, no sooner than `retry_backoff_minutes` after the last one.
    `send_cap` limits new emails per job and run (most urgent first; the rest wait for a
    later run, rules intact); `adopt` records everything due as handled without sending,
    to take over existing data without mailing it all at once."""
    settings = Settings.from_env().with_blocks()
    mail = parse_mail_url(settings.mail_url)  # a bad mail URL stops the run before any write
    as_of = as_of or settings.today()
    leads = normalise_leads(renewal_leads)
    if send_cap is not None and send_cap < 0:
        raise ConfigError(f"send_cap must be a non-negative number of emails, got {send_cap}")
    if dunning_start not in ("sent", "due"):
        raise ConfigError(f"dunning_start must be 'sent' or 'due', got {dunning_start!r}")
    delivery = DeliverySettings(mail, settings.sender(), settings.database_url, as_of,
                                timedelta(minutes=retry_backoff_minutes))
    ctx = RunContext(settings, delivery, as_of, dry_run, flow_run.get_id(), renewal_locale, send_cap,
                     adopt)
    engine = db.engine_for(settings.database_url)
    if problems := db.schema_problems(engine):
        raise ConfigError("the database is not ready: " + "; ".join(problems)
                          + " (run `dueflow init-db`)")
    params = (leads, dunning_delays, dunning_start, retry_max_attempts)
    if dry_run or not run_lock_enabled():
        return _nightly(ctx, *params)
    warnings: list[str] = []
    with run_lock(engine, warnings) as acquired:
        if not acquired:
            get_run_logger().warning("another dueflow run is active on this database; exiting")
            return RunSummary(as_of=as_of, dry_run=False, flow_run_id=ctx.flow_run_id,
                              skipped="another dueflow run is active on this database")
        summary = _nightly(ctx, *params)
    summary.warnings.extend(warnings)
    return summary


def _nightly(
    ctx: RunContext, leads: list[int], dunning_delays: list[int], dunning_start: Literal["sent", "due"],
    retry_max_attempts: int,
) -> RunSummary:
    settings, as_of, dry_run = ctx.settings, ctx.as_of, ctx.dry_run
    url = settings.database_url
    sender, escalation_to = settings.sender(), settings.escalation_address()
    retried = (pd.DataFrame(columns=list(ROW_COLUMNS)) if dry_run or ctx.adopt
               else send_unsent(ctx, retry_max_attempts))
    contracts, renewal_history = extract_renewals(url, as_of, leads)
    renewals = decide_renewals(contracts, renewal_history, as_of, leads)
    invoices, clients, dunning_history = extract_dunning(url)
    dunning = decide_dunning(invoices, clients, dunning_history, as_of, dunning_delays,
                             settings.timezone, escalation_to, dunning_start)
    open_keys = db.open_keys(db.engine_for(url))

    llm = resolve_llm_config()
    drafts: list[Draft] = []

    def compose_dunning_step(winners: pd.DataFrame) -> Composed:
        # Drafting happens here, after reservation: the model is only ever asked
        # about keys this run won, once, and the text is stored before sending.
        new = draft_reminders(winners, url, settings.timezone, llm)
        drafts.extend(new)
        return compose_dunning(winners, dunning_history, sender, new)

    rows = pd.concat(
        [
            retried,
            run_job(ctx, "renewal", "contracts", renewals,
                    lambda due: compose_renewals(due, ctx.renewal_locale, sender), open_keys),
            run_job(ctx, "dunning", "invoices", dunning, compose_dunning_step, open_keys),
        ],
        ignore_index=True,
    )
    warnings: list[str] = []
    ledger_counts: dict[str, int] = {}
    unsettled = None
    if not dry_run:
        try:  # the work is recorded: losing the database now is worth a warning, not a failure
            engine = db.engine_for(url)
            ledger_counts, unsettled = db.unsettled_counts(engine), db.unsettled_rows(engine)
        except Exception as exc:
            if not db.transient(exc):
                raise
            warnings.append(f"could not read the ledger's unsettled rows after the run: {exc.orig}")
    summary = summarize(as_of, dry_run, ctx.flow_run_id, rows, ledger_counts, unsettled,
                        drafts_frame(drafts), warnings)
    publish_report(summary)
    return summary
