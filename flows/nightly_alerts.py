"""The nightly run: extract → decide → reserve → compose → deliver → report (DESIGN.md),
for both jobs — renewal alerts and invoice dunning — in one flow run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

import pandas as pd
from prefect import flow
from prefect.runtime import flow_run
from prefect.task_runners import ThreadPoolTaskRunner

from blocks.settings import Settings
from tasks import db
from tasks.compose import Composed
from tasks.decide import Decision, normalise_leads
from tasks.deliver import deliver
from tasks.mail import MailConfig, parse_mail_url
from tasks.report import ROW_COLUMNS, RunSummary, summarize
from tasks.steps import (
    compose_dunning,
    compose_renewals,
    decide_dunning,
    decide_renewals,
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


def _rows(job: str, frame: pd.DataFrame, status: str, detail: str | dict[str, str]) -> pd.DataFrame:
    """Summary rows for `frame`; `detail` is one text for all, or a text per key."""
    return pd.DataFrame(
        {"job": job, "key": frame["key"], "recipient": frame["recipient"], "status": status,
         "detail": frame["key"].map(detail) if isinstance(detail, dict) else detail}
    ).reindex(columns=ROW_COLUMNS)


def run_job(
    ctx: RunContext, job: str, source: str, decision: Decision,
    compose: Callable[[pd.DataFrame], Composed],
) -> pd.DataFrame:
    """reserve → compose → store → deliver for one job; returns the job's summary rows."""
    url = ctx.settings.database_url
    bad = decision.quarantined
    parts = [
        pd.DataFrame({"job": job, "key": f"{source}/" + bad["source_id"], "recipient": pd.NA,
                      "status": "quarantined", "detail": bad["reason"]}).reindex(columns=ROW_COLUMNS),
        _rows(job, decision.due[decision.due["handled"]], "already handled", "already in the ledger"),
    ]
    candidates = decision.to_reserve
    if ctx.dry_run:
        emails, failures = compose(candidates)
        subjects = {e.key: e.subject for e in emails} | dict(failures)
        parts.append(_rows(job, candidates, "would send", subjects))
    else:
        quarantine_rows(url, job, bad, ctx.as_of, ctx.flow_run_id)
        won = reserve_slots(url, job, candidates, ctx.as_of, ctx.flow_run_id)
        winners = candidates[candidates["key"].isin(won)]
        parts.append(_rows(job, candidates[~candidates["key"].isin(won)], "already handled",
                           "reserved by another run"))
        emails, failures = compose(winners)
        store_messages(url, emails)
        record_failures(url, failures)
        failed = dict(failures)
        parts.append(_rows(job, winners[winners["key"].isin(failed)], "failed", failed))
        deliveries = deliver(emails, ctx.mail, ctx.settings.mail_from, url, DELIVERY_WORKERS)
        parts.append(pd.DataFrame(
            [{"job": job, "key": d.key, "recipient": d.recipient, "status": d.status,
              "detail": d.detail} for d in deliveries],
            columns=list(ROW_COLUMNS),
        ))
    kept = [p for p in parts if not p.empty]
    return pd.concat(kept, ignore_index=True) if kept else pd.DataFrame(columns=list(ROW_COLUMNS))


@flow(name="nightly-alerts", task_runner=ThreadPoolTaskRunner(max_workers=DELIVERY_WORKERS))
def nightly_alerts(
    as_of: date | None = None,
    dry_run: bool = False,
    renewal_leads: list[int] = [60, 30, 15],  # noqa: B006 - Prefect copies parameters
    renewal_locale: str = "en",
    dunning_delays: list[int] = [7, 5, 7],  # noqa: B006 - days SENT→R1, R1→R2, R2→OVERDUE
) -> RunSummary:
    """Send every renewal alert and dunning step due on `as_of` exactly once.
    `dry_run` decides and renders on the same code path, and writes and sends nothing."""
    settings = Settings.from_env()
    mail = parse_mail_url(settings.mail_url)  # a bad mail URL stops the run before any write
    as_of = as_of or settings.today()
    leads = normalise_leads(renewal_leads)
    ctx = RunContext(settings, mail, as_of, dry_run, flow_run.get_id())
    url = settings.database_url

    contracts, renewal_history = extract_renewals(url, as_of, leads)
    renewals = decide_renewals(contracts, renewal_history, as_of, leads)
    invoices, clients, dunning_history = extract_dunning(url)
    dunning = decide_dunning(invoices, clients, dunning_history, as_of, dunning_delays,
                             settings.timezone, settings.escalation_to)

    rows = pd.concat(
        [
            run_job(ctx, "renewal", "contracts", renewals,
                    lambda due: compose_renewals(due, renewal_locale, settings.mail_from)),
            run_job(ctx, "dunning", "invoices", dunning,
                    lambda due: compose_dunning(due, dunning_history, settings.mail_from)),
        ],
        ignore_index=True,
    )
    ledger_counts = {} if dry_run else db.unsettled_counts(db.engine_for(url))
    summary = summarize(as_of, dry_run, ctx.flow_run_id, rows, ledger_counts)
    publish_report(summary)
    return summary
