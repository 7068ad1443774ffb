"""The nightly run: extract → decide → reserve → compose → deliver → report (DESIGN.md),
for both jobs — renewal alerts and invoice dunning — in one flow run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta

import pandas as pd
from prefect import flow, get_run_logger
from prefect.runtime import flow_run
from prefect.task_runners import ThreadPoolTaskRunner

from blocks.settings import ConfigError, Settings
from tasks import db
from tasks.compose import Composed, OutgoingEmail
from tasks.decide import Decision, most_urgent_first, normalise_leads
from tasks.deliver import deliver
from tasks.llm import Draft, resolve_llm_config
from tasks.lock import run_lock, run_lock_enabled
from tasks.mail import MailConfig, parse_mail_url
from tasks.report import ROW_COLUMNS, RunSummary, drafts_frame, summarize
from tasks.steps import (
    claim_retries,
    compose_dunning,
    compose_renewals,
    decide_dunning,
    decide_renewals,
    draft_reminders,
    extract_dunning,
    extract_renewals,
    publish_report,
    quarantine_rows,
    record_failures,
    reserve_slots,
    store_messages,
)

DELIVERY_WORKERS = 4  # parallel SMTP connections; the thread pool is bounded to this


@dataclass(frozen=True)
class RunContext:
    settings: Settings
    mail: MailConfig
    as_of: date
    dry_run: bool
    flow_run_id: str | None
    retry_backoff: timedelta
    send_cap: int | None = None  # at most this many new emails per job; the rest wait a night
    adopt: bool = False  # record what is due as handled ('adopted') and send nothing


def _rows(job: str, frame: pd.DataFrame, status: str, detail: str | dict[str, str]) -> pd.DataFrame:
    """Summary rows for `frame`; `detail` is one text for all, or a text per key."""
    return pd.DataFrame(
        {"job": job, "key": frame["key"], "recipient": frame["recipient"], "status": status,
         "detail": frame["key"].map(detail) if isinstance(detail, dict) else detail}
    ).reindex(columns=ROW_COLUMNS)


def deliver_winners(
    ctx: RunContext, job: str, winners: pd.DataFrame, compose: Callable[[pd.DataFrame], Composed]
) -> pd.DataFrame:
    """compose → store (G2) → deliver the keys this run won; one summary row per key."""
    url = ctx.settings.database_url
    emails, failures = compose(winners)
    store_messages(url, emails)
    record_failures(url, failures)
    failed = dict(failures)
    deliveries = deliver(emails, ctx.mail, ctx.settings.mail_from, url, DELIVERY_WORKERS,
                         ctx.retry_backoff)
    return pd.concat([
        _rows(job, winners[winners["key"].isin(failed)], "failed", failed),
        pd.DataFrame([{"job": job, "key": d.key, "recipient": d.recipient, "status": d.status,
                       "detail": d.detail} for d in deliveries], columns=list(ROW_COLUMNS)),
    ], ignore_index=True)


def run_job(
    ctx: RunContext, job: str, source: str, decision: Decision,
    compose: Callable[[pd.DataFrame], Composed],
) -> pd.DataFrame:
    """quarantine → reserve → compose → store → deliver for one job; its summary rows."""
    url = ctx.settings.database_url
    bad = decision.quarantined
    parts = [
        pd.DataFrame({"job": job, "key": f"{source}/" + bad["source_id"], "recipient": pd.NA,
                      "status": "quarantined", "detail": bad["reason"]}).reindex(columns=ROW_COLUMNS),
        _rows(job, decision.due[decision.due["handled"]], "already handled", "already in the ledger"),
    ]
    candidates = decision.to_reserve
    if ctx.send_cap is not None and len(candidates) > ctx.send_cap:
        ordered = most_urgent_first(candidates)
        candidates, deferred = ordered.head(ctx.send_cap), ordered.iloc[ctx.send_cap:]
        parts.append(_rows(job, deferred, "deferred",
                           f"send cap of {ctx.send_cap} reached: a later run picks it up"))
    if ctx.dry_run:
        emails, failures = compose(candidates)
        subjects = {e.key: e.subject + (f" [{e.draft_source} paragraph]" if e.draft_source else "")
                    for e in emails} | dict(failures)
        parts.append(_rows(job, candidates, "would send", subjects))
    else:
        quarantine_rows(url, job, bad, ctx.as_of, ctx.flow_run_id)
        won = reserve_slots(url, job, candidates, ctx.as_of, ctx.flow_run_id,
                            status="adopted" if ctx.adopt else "pending")
        winners = candidates[candidates["key"].isin(won)]
        parts.append(_rows(job, candidates[~candidates["key"].isin(won)], "already handled",
                           "reserved by another run"))
        if ctx.adopt:
            parts.append(_rows(job, winners, "adopted", "recorded as handled; not sent"))
        else:
            parts.append(deliver_winners(ctx, job, winners, compose))
    kept = [p for p in parts if not p.empty]
    return pd.concat(kept, ignore_index=True) if kept else pd.DataFrame(columns=list(ROW_COLUMNS))


def retry_failed(ctx: RunContext, max_attempts: int) -> pd.DataFrame:
    """Claim the failed rows due for another attempt and resend their stored messages."""
    url = ctx.settings.database_url
    claimed = claim_retries(url, ctx.as_of, ctx.flow_run_id, max_attempts)
    emails = [OutgoingEmail(r.key, r.recipient, r.subject, r.body_text, r.body_html, r.message_id)
              for r in claimed.itertuples(index=False)]
    deliveries = deliver(emails, ctx.mail, ctx.settings.mail_from, url, DELIVERY_WORKERS,
                         ctx.retry_backoff)
    jobs = dict(zip(claimed["key"], claimed["job"], strict=True))
    return pd.DataFrame(
        [{"job": jobs[d.key], "key": d.key, "recipient": d.recipient, "status": d.status,
          "detail": d.detail, "retry": True} for d in deliveries],
        columns=list(ROW_COLUMNS),
    )


@flow(name="nightly-alerts", task_runner=ThreadPoolTaskRunner(max_workers=DELIVERY_WORKERS))
def nightly_alerts(
    as_of: date | None = None,
    dry_run: bool = False,
    renewal_leads: list[int] = [60, 30, 15],  # noqa: B006 - Prefect copies parameters
    renewal_locale: str = "en",
    dunning_delays: list[int] = [7, 5, 7],  # noqa: B006 - days SENT→R1, R1→R2, R2→OVERDUE
    retry_max_attempts: int = 3,
    retry_backoff_minutes: int = 60,
    send_cap: int | None = None,
    adopt: bool = False,
) -> RunSummary:
    """Send every renewal alert and dunning step due on `as_of` exactly once.
    `dry_run` decides and renders on the same code path, and writes and sends nothing.
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
    ctx = RunContext(settings, mail, as_of, dry_run, flow_run.get_id(),
                     timedelta(minutes=retry_backoff_minutes), send_cap, adopt)
    engine = db.engine_for(settings.database_url)
    if problems := db.schema_problems(engine):
        raise ConfigError("the database is not ready: " + "; ".join(problems)
                          + " (run `dueflow init-db`)")
    if dry_run or not run_lock_enabled():
        return _nightly(ctx, leads, renewal_locale, dunning_delays, retry_max_attempts)
    with run_lock(engine) as acquired:
        if not acquired:
            get_run_logger().warning("another dueflow run is active on this database; exiting")
            return RunSummary(as_of=as_of, dry_run=False, flow_run_id=ctx.flow_run_id,
                              skipped="another dueflow run is active on this database")
        return _nightly(ctx, leads, renewal_locale, dunning_delays, retry_max_attempts)


def _nightly(
    ctx: RunContext, leads: list[int], renewal_locale: str, dunning_delays: list[int],
    retry_max_attempts: int,
) -> RunSummary:
    settings, as_of, dry_run = ctx.settings, ctx.as_of, ctx.dry_run
    url = settings.database_url
    contracts, renewal_history = extract_renewals(url, as_of, leads)
    renewals = decide_renewals(contracts, renewal_history, as_of, leads)
    invoices, clients, dunning_history = extract_dunning(url)
    dunning = decide_dunning(invoices, clients, dunning_history, as_of, dunning_delays,
                             settings.timezone, settings.escalation_to)

    llm = resolve_llm_config()
    drafts: list[Draft] = []

    def compose_dunning_step(winners: pd.DataFrame) -> Composed:
        # Drafting happens here, after reservation: the model is only ever asked
        # about keys this run won, once, and the text is stored before sending.
        new = draft_reminders(winners, url, settings.timezone, llm)
        drafts.extend(new)
        return compose_dunning(winners, dunning_history, settings.mail_from, new)

    rows = pd.concat(
        [
            pd.DataFrame(columns=list(ROW_COLUMNS)) if dry_run or ctx.adopt
            else retry_failed(ctx, retry_max_attempts),
            run_job(ctx, "renewal", "contracts", renewals,
                    lambda due: compose_renewals(due, renewal_locale, settings.mail_from)),
            run_job(ctx, "dunning", "invoices", dunning, compose_dunning_step),
        ],
        ignore_index=True,
    )
    engine = db.engine_for(url)
    ledger_counts = {} if dry_run else db.unsettled_counts(engine)
    unsettled = None if dry_run else db.unsettled_rows(engine)
    summary = summarize(as_of, dry_run, ctx.flow_run_id, rows, ledger_counts, unsettled,
                        drafts_frame(drafts))
    publish_report(summary)
    return summary
