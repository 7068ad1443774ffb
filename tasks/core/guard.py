"""A night that looks wrong waits for a person (issue 40).

Exactly-once keeps a client from the same email twice; it does not keep a company from
the accident finance teams fear most: a broken sync marks every paid invoice unpaid, a
restore brings back last year's contracts, a mapping reads the wrong column — and that
night every client is reminded, once each, of money nobody owes. Before it reserves
anything, a night compares what it would send with what nights usually send:

- per job, the emails due tonight against the median of the recent nights that sent
  (and a first night against nothing): more than `factor` times it, and more than
  `min_emails`, is not an ordinary night;
- per currency, the amount reminded against the recent nights' median, the same way;
- the share of the open invoices it would remind (more than `open_share` of them);
- the open invoices against the last night's count: more than `factor` times as many.

A night under `min_emails` in each job never waits: small nights are what dunning is.
The bounds are settings (blocks/table.py, group "guard"). Everything here is pure: the
night reads the figures (tasks/night.py) and asks a person (the flow pauses in Prefect;
the command stops and says how to approve).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from enum import StrEnum
from statistics import median

from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.money import sums_by_currency

SAMPLE = 5  # recipients and subjects a person is shown of each job


@dataclass(frozen=True)
class Bounds:
    """What an ordinary night may do (the settings of group "guard")."""

    min_emails: int = 100  # a job under this many emails tonight never waits
    factor: float = 5.0  # more than this many times the recent nights' median waits
    open_share: float = 0.5  # reminding more than this share of the open invoices waits
    recent_nights: int = 14  # the nights compared with


@dataclass(frozen=True)
class Figures:
    """What one night would do, per job: emails, and amounts per currency; with the
    number of open invoices when it was read (None: not read)."""

    emails: Mapping[str, int]
    amounts: Mapping[str, Mapping[str, Decimal]] = field(default_factory=dict)  # job -> currency -> sum
    open_invoices: int | None = None


@dataclass(frozen=True)
class Tripped:
    """One bound a night crossed, and by how much, in words a finance team reads."""

    bound: str  # emails, amount, share, open invoices
    job: str
    tonight: str
    usual: str

    def line(self) -> str:
        return f"{self.job}: {self.tonight} tonight, against {self.usual}"


def figures_json(figures: Figures) -> str:
    """How a night's figures are kept (dueflow_nights.figures)."""
    amounts = {job: {c: str(v) for c, v in sums.items()} for job, sums in figures.amounts.items()}
    return json.dumps({"emails": dict(figures.emails), "open_invoices": figures.open_invoices,
                       "amounts": amounts}, sort_keys=True)


def figures_from_json(text: str) -> Figures:
    data = json.loads(text)
    amounts = {job: {currency: Decimal(value) for currency, value in sums.items()}
               for job, sums in data.get("amounts", {}).items()}
    emails = {job: int(n) for job, n in data.get("emails", {}).items()}
    return Figures(emails, amounts, data.get("open_invoices"))


def night_row(as_of: date, flow_run_id: str | None, figures: Figures, tripped: Sequence[Tripped] = (),
              approval: Approval | None = None, at: str | None = None) -> dict[str, object]:
    """dueflow_nights' row of one night (sql/night_record)."""
    return {"as_of": as_of.isoformat(), "flow_run_id": flow_run_id or "", "figures": figures_json(figures),
            "tripped": json.dumps([t.line() for t in tripped]) if tripped else None,
            "choice": str(approval.choice) if approval else None,
            "up_to": approval.up_to if approval else None,
            "approved_by": approval.by if approval else None, "approved_at": at if approval else None}


def each_night(rows: pd.DataFrame, nights: int) -> list[Figures]:
    """The figures of each night, newest first, at most `nights` (`rows`: as_of and figures
    of every run recorded, newest night first): the emails and amounts of all its runs
    together — a night a cap or a person held back and a later run finished is one night —
    and the most open invoices any of its runs read."""
    found: list[Figures] = []
    for _, runs in rows.groupby("as_of", sort=False):
        each = [figures_from_json(text) for text in runs["figures"]]
        emails: dict[str, int] = {}
        amounts: dict[str, dict[str, Decimal]] = {}
        for figures in each:
            for job, count in figures.emails.items():
                emails[job] = emails.get(job, 0) + count
            for job, sums in figures.amounts.items():
                totals = amounts.setdefault(job, {})
                for currency, value in sums.items():
                    totals[currency] = totals.get(currency, Decimal(0)) + value
        read = [f.open_invoices for f in each if f.open_invoices is not None]
        found.append(Figures(emails, amounts, max(read) if read else None))
        if len(found) == nights:
            break
    return found


def figures_of(due: Mapping[str, pd.DataFrame], open_invoices: int | None = None) -> Figures:
    """Tonight's figures from each job's rows to reserve (amounts where a row has one)."""
    emails = {job: len(rows) for job, rows in due.items()}
    amounts: dict[str, dict[str, Decimal]] = {}
    for job, rows in due.items():
        if rows.empty or "amount" not in rows or "currency" not in rows:
            continue
        amounts[job] = sums_by_currency(rows["amount"], rows["currency"])
    return Figures(emails, amounts, open_invoices)


def looks_wrong(tonight: Figures, recent: Sequence[Figures], bounds: Bounds) -> list[Tripped]:
    """The bounds tonight crosses, compared with the recent nights (newest first); none
    for a night under `min_emails` in every job."""
    tripped: list[Tripped] = []
    for job, emails in tonight.emails.items():
        if emails <= bounds.min_emails:
            continue
        usual = [night.emails.get(job, 0) for night in recent if night.emails.get(job, 0) > 0]
        if not usual:
            tripped.append(Tripped("emails", job, f"{emails:,} emails", "no earlier night that sent any"))
        elif emails > bounds.factor * median(usual):
            tripped.append(Tripped("emails", job, f"{emails:,} emails",
                                   f"a median of {median(usual):,.0f} over the last {len(usual)} nights"))
        for currency, amount in sorted(tonight.amounts.get(job, {}).items()):
            past = [night.amounts.get(job, {}).get(currency) for night in recent]
            sums = [value for value in past if value]
            if sums and amount > Decimal(str(bounds.factor)) * Decimal(str(median(sums))):
                tripped.append(Tripped("amount", job, f"{amount:,.2f} {currency} reminded",
                                       f"a median of {median(sums):,.2f} {currency} over the last"
                                       f" {len(sums)} nights"))
    reminders = tonight.emails.get("dunning", 0)
    if tonight.open_invoices and reminders > bounds.min_emails \
            and reminders > bounds.open_share * tonight.open_invoices:
        tripped.append(Tripped("share", "dunning", f"{reminders:,} reminders for {tonight.open_invoices:,}"
                               " open invoices", f"at most {bounds.open_share:.0%} of them"))
    before = next((night.open_invoices for night in recent if night.open_invoices is not None), None)
    if tonight.open_invoices is not None and before and reminders > bounds.min_emails \
            and tonight.open_invoices > bounds.factor * before:
        tripped.append(Tripped("open invoices", "dunning", f"{tonight.open_invoices:,} open invoices",
                               f"{before:,} on the last night"))
    return tripped


class Choice(StrEnum):
    """What a person decides for a night that looks wrong."""

    ALL = "send all"
    UP_TO = "send up to"
    NONE = "send none"


@dataclass(frozen=True)
class Approval:
    """A person's word on one night: who, what, and for `UP_TO` how many emails per job."""

    choice: Choice
    by: str
    up_to: int | None = None

    def cap(self, cap: int | None) -> int | None:
        """The night's send cap once approved: the smaller of the run's and the person's."""
        if self.choice is Choice.ALL:
            return cap
        allowed = 0 if self.choice is Choice.NONE else int(self.up_to or 0)
        return allowed if cap is None else min(cap, allowed)

    def said(self) -> str:
        what = f"send up to {self.up_to} per job" if self.choice is Choice.UP_TO else str(self.choice)
        return f"{what} (approved by {self.by})"


def approval_of(text: str, by: str) -> Approval:
    """`all`, `none` or a whole number (up to that many emails per job): ValueError otherwise."""
    word = text.strip().lower()
    if word in ("all", Choice.ALL):
        return Approval(Choice.ALL, by)
    if word in ("none", "0", Choice.NONE):
        return Approval(Choice.NONE, by)
    if word.isdigit():
        return Approval(Choice.UP_TO, by, int(word))
    raise ValueError(f"approve={text!r}: write all, none or a number of emails per job")


@dataclass(frozen=True)
class NightReview:
    """What a person is shown before deciding: what tripped, what would go, a sample."""

    as_of: date
    tripped: tuple[Tripped, ...]
    figures: Figures
    sample: tuple[str, ...]  # "job: recipient — subject or key", a few of each job

    def headline(self) -> str:
        return (f"The night of {self.as_of} looks wrong and waits for a person: "
                + "; ".join(t.line() for t in self.tripped))

    def markdown(self) -> str:
        lines = [f"# {self.headline()}", "", "| what | tonight | usually |", "|---|---|---|"]
        lines += [f"| {t.job}: {t.bound} | {t.tonight} | {t.usual} |" for t in self.tripped]
        lines += ["", "## What would go", ""]
        for job, emails in self.figures.emails.items():
            amounts = ", ".join(f"{v:,.2f} {c}" for c, v in sorted(self.figures.amounts.get(job, {}).items()))
            lines.append(f"- {job}: {emails:,} email(s)" + (f", {amounts}" if amounts else ""))
        lines += ["", "## A sample", ""] + [f"- {line}" for line in self.sample]
        lines += ["", "Resume the run with a choice: send all, send up to N per job, or send none."
                  " Nothing is reserved or sent until then."]
        return "\n".join(lines)


def sample_of(due: Mapping[str, pd.DataFrame]) -> tuple[str, ...]:
    """A few recipients and keys of each job, for the person who decides."""
    lines = []
    for job, rows in due.items():
        for key, recipient in list(zip(rows["key"], rows["recipient"], strict=True))[:SAMPLE]:
            lines.append(f"{job}: {recipient} — {key}")
    return tuple(lines)
