"""The nightly run: extract → decide → reserve → compose → deliver → report (DESIGN.md),
for both jobs — renewal alerts and invoice dunning — in one flow run."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Literal

import pandas as pd
from prefect import flow, get_run_logger
from prefect.runtime import flow_run
from prefect.task_runners import ThreadPoolTaskRunner

from dueflow.blocks.settings import ConfigError, Settings
from dueflow.tasks.adapters import db
from dueflow.tasks.adapters.db import Database
from dueflow.tasks.adapters.lock import run_lock
from dueflow.tasks.adapters.mail import parse_mail_url
from dueflow.tasks.core import defaults
from dueflow.tasks.core.decide import normalise_leads
from dueflow.tasks.core.render import Draft
from dueflow.tasks.core.report import RunSummary, concat_rows, drafts_frame, summarize
from dueflow.tasks.deliver import DeliverySettings
from dueflow.tasks.jobs import (
    DELIVERY_WORKERS,
    JOBS,
    RunContext,
    RunParameters,
    compose,
    reserve,
    send_unsent,
    store_and_deliver,
)
from dueflow.tasks.steps import publish_report


@flow(name="nightly-alerts", task_runner=ThreadPoolTaskRunner(max_workers=DELIVERY_WORKERS))
def nightly_alerts(
    as_of: date | None = None,
    dry_run: bool = False,
    renewal_leads: list[int] = list(defaults.RENEWAL_LEADS),  # noqa: B006 - Prefect copies it
    renewal_locale: str = "en",
    dunning_delays: list[int] = list(defaults.DUNNING_DELAYS),  # noqa: B006
    dunning_start: Literal["sent", "due"] = "sent",
    retry_max_attempts: int = defaults.RETRY_MAX_ATTEMPTS,
    retry_backoff_minutes: int = defaults.RETRY_BACKOFF_MINUTES,
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
    settings.check_templates()  # a broken DUEFLOW_TEMPLATES_DIR template: one line, nothing written
    if send_cap is not None and send_cap < 0:
        raise ConfigError(f"send_cap must be a non-negative number of emails, got {send_cap}")
    if dunning_start not in ("sent", "due"):
        raise ConfigError(f"dunning_start must be 'sent' or 'due', got {dunning_start!r}")
    params = RunParameters(tuple(normalise_leads(renewal_leads)), tuple(dunning_delays), dunning_start,
                           renewal_locale, retry_max_attempts, send_cap, adopt, dry_run)
    as_of = as_of or settings.today()
    database = Database(settings.database_url, settings.db_lock_timeout)
    delivery = DeliverySettings(parse_mail_url(settings.mail_url), settings.sender(), database, as_of,
                                timedelta(minutes=retry_backoff_minutes))
    ctx = RunContext(settings, database, delivery, as_of, flow_run.get_id(), params)
    if problems := db.schema_problems(database.engine):
        raise ConfigError("the database is not ready: " + "; ".join(problems)
                          + " (run `dueflow init-db`)")
    if dry_run or not settings.run_lock:
        return nightly_run(ctx)
    warnings: list[str] = []
    with run_lock(database.engine, warnings) as acquired:
        if not acquired:
            get_run_logger().warning("another dueflow run is active on this database; exiting")
            return RunSummary(as_of=as_of, dry_run=False, flow_run_id=ctx.flow_run_id,
                              skipped="another dueflow run is active on this database")
        summary = nightly_run(ctx)
    summary.warnings.extend(warnings)
    return summary


def nightly_run(ctx: RunContext) -> RunSummary:
    """The six steps, for each job, after what earlier runs left."""
    rows, drafts = [send_unsent(ctx)], []
    for job in JOBS:
        extracted = job.extract(ctx)                               # 1. extract
        decision = job.decide(extracted, ctx)                      # 2. decide
        winners, job_rows = reserve(ctx, job, decision)            # 3. reserve
        composed = compose(ctx, job, winners, extracted)           # 4. compose
        rows += [job_rows, store_and_deliver(ctx, job, winners, composed)]  # 5. deliver
        drafts += composed.drafts
    return report(ctx, concat_rows(rows), drafts)                  # 6. report


def report(ctx: RunContext, rows: pd.DataFrame, drafts: list[Draft]) -> RunSummary:
    """The run's summary and artifacts. The work is recorded by now: losing the database
    here is worth a warning, not a failure."""
    warnings: list[str] = []
    ledger_counts: dict[str, int] = {}
    unsettled = None
    if not ctx.params.dry_run:
        try:
            ledger_counts = db.unsettled_counts(ctx.database.engine)
            unsettled = db.unsettled_rows(ctx.database.engine)
        except Exception as exc:
            if not db.transient(exc):
                raise
            warnings.append(f"could not read the ledger's unsettled rows after the run: {exc}")
    summary = summarize(ctx.as_of, ctx.params.dry_run, ctx.flow_run_id, rows, ledger_counts, unsettled,
                        drafts_frame(drafts), warnings)
    publish_report(summary)
    return summary
