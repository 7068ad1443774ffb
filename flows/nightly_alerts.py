"""The nightly run: extract → decide → reserve → compose → deliver → report (DESIGN.md)."""

from __future__ import annotations

from datetime import date

import pandas as pd
from prefect import flow
from prefect.runtime import flow_run
from prefect.task_runners import ThreadPoolTaskRunner

from blocks.settings import Settings
from tasks import db
from tasks.decide import Decision, normalise_leads
from tasks.deliver import deliver
from tasks.mail import parse_mail_url
from tasks.report import ROW_COLUMNS, RunSummary, summarize
from tasks.steps import (
    compose_renewals,
    decide_renewals,
    extract_renewals,
    publish_report,
    quarantine_rows,
    reserve_slots,
    store_messages,
)

DELIVERY_WORKERS = 4  # parallel SMTP connections; the thread pool is bounded to this


def _rows(job: str, frame: pd.DataFrame, status: str, detail: str | pd.Series) -> pd.DataFrame:
    return pd.DataFrame(
        {"job": job, "key": frame["key"], "recipient": frame["recipient"], "status": status,
         "detail": detail}
    ).reindex(columns=ROW_COLUMNS)


def _quarantine_rows(job: str, table: str, decision: Decision) -> pd.DataFrame:
    bad = decision.quarantined
    return pd.DataFrame(
        {"job": job, "key": f"{table}/" + bad["source_id"], "recipient": pd.NA,
         "status": "quarantined", "detail": bad["reason"]}
    ).reindex(columns=ROW_COLUMNS)


@flow(name="nightly-alerts", task_runner=ThreadPoolTaskRunner(max_workers=DELIVERY_WORKERS))
def nightly_alerts(
    as_of: date | None = None,
    dry_run: bool = False,
    renewal_leads: list[int] = [60, 30, 15],  # noqa: B006 - Prefect copies parameters
    renewal_locale: str = "en",
) -> RunSummary:
    """Send every renewal alert due on `as_of` exactly once; `dry_run` writes and sends nothing."""
    settings = Settings.from_env()
    mail = parse_mail_url(settings.mail_url)  # a bad mail URL stops the run before any write
    as_of = as_of or settings.today()
    leads = normalise_leads(renewal_leads)
    run_id = flow_run.get_id()
    url = settings.database_url

    contracts, history = extract_renewals(url, as_of, leads)
    decision = decide_renewals(contracts, history, as_of, leads)
    due = decision.due
    parts = [
        _quarantine_rows("renewal", "contracts", decision),
        _rows("renewal", due[due["handled"]], "already handled", "already in the ledger"),
    ]
    candidates = decision.to_reserve
    if dry_run:
        emails = compose_renewals(candidates, renewal_locale, settings.mail_from)
        parts.append(_rows("renewal", candidates, "would send",
                           pd.Series([e.subject for e in emails], index=candidates.index)))
    else:
        quarantine_rows(url, "renewal", decision.quarantined, as_of, run_id)
        won = reserve_slots(url, "renewal", candidates, as_of, run_id)
        winners = candidates[candidates["key"].isin(won)]
        lost = candidates[~candidates["key"].isin(won)]
        parts.append(_rows("renewal", lost, "already handled", "reserved by another run"))
        emails = compose_renewals(winners, renewal_locale, settings.mail_from)
        store_messages(url, emails)
        deliveries = deliver(emails, mail, settings.mail_from, url, DELIVERY_WORKERS)
        parts.append(
            pd.DataFrame(
                [{"job": "renewal", "key": d.key, "recipient": d.recipient, "status": d.status,
                  "detail": d.detail} for d in deliveries],
                columns=list(ROW_COLUMNS),
            )
        )
    rows = pd.concat([p for p in parts if not p.empty], ignore_index=True) if any(
        not p.empty for p in parts) else pd.DataFrame(columns=list(ROW_COLUMNS))
    ledger_counts = {} if dry_run else db.unsettled_counts(db.engine_for(url))
    summary = summarize(as_of, dry_run, run_id, rows, ledger_counts)
    publish_report(summary)
    return summary
