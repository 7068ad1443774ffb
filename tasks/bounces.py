"""Bounce intake, as the flow runs it (docs/bounces.md): read the bounce mailbox in
batches; for each batch, parse the reports, match them to ledger rows and commit what they
change in one transaction, and only then mark the batch's messages processed.

A run that dies anywhere leaves nothing half done: a batch committed but not marked is read
again by the next run and changes nothing twice (each report is recorded by its identity,
and a row already bounced is not marked again); a batch not committed is not marked.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from prefect import task
from prefect.cache_policies import NO_CACHE

from dueflow.blocks.endpoints import BounceConfig
from dueflow.tasks.adapters import db
from dueflow.tasks.adapters.db import Database
from dueflow.tasks.adapters.mailbox import BounceMailbox, Fetched, open_mailbox
from dueflow.tasks.core.bounces import BounceKind, match_reports, parse_report, reports_frame
from dueflow.tasks.core.frames import pd

BATCH = 100  # messages fetched, recorded and marked at a time


@dataclass
class IntakeSummary:
    """What one intake did. `bounced` lists the rows it marked (key, reason); `kept` the
    messages it kept aside (reason, detail, source)."""

    mailbox: str
    read: int = 0
    already_recorded: int = 0  # read again after a run that died before marking them
    hard: int = 0
    soft: int = 0
    marked: list[str] = field(default_factory=list)
    kept: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["reason", "detail", "source"]))
    ledger_bounced: int = 0

    def headline(self) -> str:
        if self.read == 0:
            return (f"Bounces: nothing new in {self.mailbox}; {self.ledger_bounced} bounced row(s) in"
                    " the ledger.")
        return (f"Bounces: {self.read} message(s) read from {self.mailbox}: {len(self.marked)} row(s) marked"
                f" bounced ({self.hard} hard, {self.soft} soft report(s)), {len(self.kept)} kept aside,"
                f" {self.already_recorded} already recorded; {self.ledger_bounced} bounced row(s) in the"
                " ledger.")

    def counts(self) -> dict[str, int]:
        return {"read": self.read, "bounced": len(self.marked), "hard": self.hard, "soft": self.soft,
                "kept_aside": len(self.kept), "already_recorded": self.already_recorded,
                "ledger_bounced": self.ledger_bounced}


def read_batch(fetched: list[Fetched]) -> pd.DataFrame:
    """The reports of a batch (tasks.core.bounces.REPORT_COLUMNS), one row per recipient a
    message names; a report without a date of its own is dated by its arrival in the mailbox."""
    reports = []
    for item in fetched:
        for report in parse_report(item.raw, item.source, item.size):
            if report.seen_at is None:
                report = replace(report, seen_at=item.arrived or datetime.now(UTC))
            reports.append(report)
    return reports_frame(reports)


@dataclass(frozen=True)
class Recorded:
    """What recording one batch did."""

    already: int  # messages recorded by an earlier run (read again: it died before marking)
    hard: int  # recipients' entries applied: hard ones (a row marked, or already bounced)
    soft: int
    marked: list[str]  # the keys of the rows marked bounced
    kept: pd.DataFrame  # reports kept aside: reason, detail, source


def record(database: Database, fetched: list[Fetched]) -> Recorded:
    """Parse, match and commit one batch (one transaction); the counts of what it did."""
    engine = database.engine
    reports = read_batch(fetched)
    seen = db.bounces_seen(engine, reports["report_id"].tolist())
    fresh = reports[~reports["report_id"].isin(seen)].drop_duplicates("report_id")
    ids = fresh["message_id"].dropna().astype(str).unique().tolist()
    matched = match_reports(fresh, db.bounce_candidates(engine, ids))
    marked = db.record_bounces(engine, matched.bounces, matched.kept)
    kinds = matched.bounces["kind"]
    # Counted in messages: the recipients of one message are recorded in one transaction.
    already = reports.loc[reports["report_id"].isin(seen), "source"].nunique()
    return Recorded(already=already, hard=int((kinds == BounceKind.HARD).sum()),
                    soft=int((kinds == BounceKind.SOFT).sum()), marked=marked,
                    kept=matched.kept.loc[:, ["reason", "detail", "source"]])


# The same, as a Prefect task: what the flow runs (a test calls `record` itself).
record_batch = task(name="record-bounces", cache_policy=NO_CACHE)(record)


def intake(database: Database, config: BounceConfig, batch: int = BATCH,
           box: BounceMailbox | None = None,
           recorder: Callable[[Database, list[Fetched]], Recorded] = record) -> IntakeSummary:
    """Read every unprocessed message of the bounce mailbox, batch by batch."""
    summary = IntakeSummary(config.describe())
    kept: list[pd.DataFrame] = []
    with open_mailbox(config) if box is None else contextlib.nullcontext(box) as mailbox:
        refs = mailbox.unprocessed()
        for start in range(0, len(refs), batch):
            fetched = mailbox.fetch(refs[start:start + batch])
            if not fetched:
                continue
            done = recorder(database, fetched)
            mailbox.mark([item.ref for item in fetched])  # after the commit, never before
            summary.read += len(fetched)
            summary.already_recorded += done.already
            summary.hard += done.hard
            summary.soft += done.soft
            summary.marked += done.marked
            kept.append(done.kept)
    if kept:
        summary.kept = pd.concat(kept, ignore_index=True)
    summary.ledger_bounced = db.unsettled_counts(database.engine).get("bounced", 0)
    return summary


def markdown(summary: IntakeSummary, bounced: pd.DataFrame, limit: int = 50) -> str:
    """The intake's artifact: its counts, the rows that bounced with what settles them, and
    what was kept aside."""
    lines = ["# dueflow — bounces", "", summary.headline(), ""]
    lines += [f"- **{value}** {name.replace('_', ' ')}" for name, value in summary.counts().items() if value]
    if not bounced.empty:
        lines += ["", "## Needs attention", "", "| status | key | to | reason | what to do |",
                  "|---|---|---|---|---|"]
        for row in bounced.head(limit).itertuples(index=False):
            lines.append(f"| bounced | `{row.key}` | {_cell(row.recipient)} | {_cell(row.error)} |"
                         f" fix the address, then `dueflow resolve {row.key} --as failed` |")
    if not summary.kept.empty:
        lines += ["", "## Kept aside", "", "Not applied to any row; listed by `dueflow bounces --kept`.", "",
                  "| reason | detail | where |", "|---|---|---|"]
        for row in summary.kept.head(limit).itertuples(index=False):
            lines.append(f"| {row.reason} | {_cell(row.detail)} | {_cell(row.source)} |")
    return "\n".join(lines).rstrip() + "\n"


def _cell(value: object) -> str:
    if value is None or (not isinstance(value, str) and pd.isna(value)):  # type: ignore[call-overload]
        return ""
    return " ".join(str(value).split()).replace("|", "\\|")
