"""Compose: render each reserved key into the exact email that will be sent (pure: the
templates are package data, the facts come from the decided rows)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date
from functools import cache
from typing import Any, Literal

import pandas as pd
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from dueflow.tasks.core.addresses import Mailbox
from dueflow.tasks.core.keys import DunningStep
from dueflow.tasks.core.locales import DEFAULT_LOCALE, SUPPORTED_LOCALES
from dueflow.tasks.core.message import OutgoingEmail, message_id_for
from dueflow.tasks.core.money import format_money
from dueflow.tasks.core.statuses import LedgerStatus
from dueflow.tasks.core.text import clean_line

SUBJECT_LIMIT = 250  # characters: a subject is read in a list, and data can be very long

_MONTHS = {
    "en": ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December"),
    "es": ("enero", "febrero", "marzo", "abril", "mayo", "junio", "julio", "agosto",
           "septiembre", "octubre", "noviembre", "diciembre"),
}


@cache
def _templates() -> Environment:
    return Environment(
        loader=PackageLoader("dueflow.tasks", "templates"),
        autoescape=select_autoescape(enabled_extensions=("html",), default=False),
        undefined=StrictUndefined,
        keep_trailing_newline=True,
        auto_reload=False,  # templates do not change while a run renders thousands of emails
    )


def format_date(day: date | None, locale: str) -> str:
    if day is None or pd.isna(day):
        return "—"
    month = _MONTHS[locale][day.month - 1]
    return f"{day.day} de {month} de {day.year}" if locale == "es" else f"{day.day} {month} {day.year}"


def render(kind: str, locale: str, context: dict[str, Any]) -> tuple[str, str, str]:
    """Subject, text body and HTML body of one email (HTML autoescaped)."""
    if locale not in SUPPORTED_LOCALES:
        raise ValueError(f"unsupported locale {locale!r}; use one of {', '.join(SUPPORTED_LOCALES)}")
    env = _templates()
    subject = env.get_template(f"{kind}.{locale}.subject").render(context)
    text = env.get_template(f"{kind}.{locale}.txt").render(context)
    html = env.get_template(f"{kind}.{locale}.html").render(context)
    return clean_line(subject, SUBJECT_LIMIT), text, html


def render_paragraph(step: str, locale: str) -> str:
    """The template paragraph of a reminder step (templates/paragraph.STEP.LOCALE.txt)."""
    return _templates().get_template(f"paragraph.{step}.{locale}.txt").render().strip()


@dataclass(frozen=True)
class Draft:
    """The paragraph chosen for one key, where it came from, and why if not the LLM."""

    key: str
    paragraph: str
    source: Literal["llm", "template"]
    tone: str | None  # the model's tone label when source == "llm"
    note: str | None  # why the template was used; None for a good llm draft
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True)
class Composed:
    """What compose made of some keys: the emails, the keys it could not render (with
    why), and the reminder paragraphs it used."""

    emails: list[OutgoingEmail] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)
    drafts: list[Draft] = field(default_factory=list)

    def __add__(self, other: Composed) -> Composed:
        return Composed(self.emails + other.emails, self.failures + other.failures,
                        self.drafts + other.drafts)


def compose_each(due: pd.DataFrame, render_one: Callable[[Any], OutgoingEmail]) -> Composed:
    """Render every row; a row that cannot be rendered is reported, not fatal (G6)."""
    emails, failures = [], []
    for row in due.itertuples(index=False):
        try:
            emails.append(render_one(row))
        except Exception as exc:
            failures.append((row.key, f"could not render the email: {exc}"))
    return Composed(emails, failures)


def _email(row: Any, sender: Mailbox, rendered: tuple[str, str, str],
           draft: Draft | None = None) -> OutgoingEmail:
    subject, text, html = rendered
    return OutgoingEmail(
        key=row.key,
        recipient=str(row.recipient),
        subject=subject,
        body_text=text,
        body_html=html,
        message_id=message_id_for(row.key, sender),
        draft_source=draft.source if draft else None,
        draft_note=(draft.note or (f"tone: {draft.tone}" if draft.tone else None)) if draft else None,
    )


def compose_renewal_alerts(due: pd.DataFrame, locale: str, sender: Mailbox) -> Composed:
    """Render the renewal alert of each row of `due` (rows from `due_renewal_alerts`)."""

    def render_one(row: Any) -> OutgoingEmail:
        context = {
            "key": row.key,
            "vendor": row.vendor,
            "title": row.title,
            "amount": format_money(row.amount, row.currency, locale),
            "renewal_date": format_date(row.renewal_date, locale),
            "days_left": int(row.days_left),
            "lead": int(row.step_rank),
        }
        return _email(row, sender, render("renewal", locale, context))

    return compose_each(due, render_one)


def reminder_history(history: pd.DataFrame) -> dict[str, list[dict[str, str]]]:
    """Per invoice, its dunning steps in order: step, date (of the run that got it out, or
    that reserved it while it is not out) and status."""
    ordered = history.sort_values(["subject_id", "step_rank"])
    attempted = (ordered["attempt_as_of"] if "attempt_as_of" in ordered
                 else pd.Series(pd.NA, index=ordered.index))
    dates = attempted.astype("string").fillna(ordered["as_of"].astype("string")).str.slice(0, 10)
    ordered = ordered.assign(step_date=dates)
    return {
        str(invoice): [{"step": str(r.step), "as_of": str(r.step_date), "status": str(r.status)}
                       for r in rows.itertuples(index=False)]
        for invoice, rows in ordered.groupby("subject_id", sort=False)
    }


def compose_dunning_emails(
    due: pd.DataFrame,
    history: pd.DataFrame,
    sender: Mailbox,
    drafts: Mapping[str, Draft] | None = None,
) -> Composed:
    """Reminders to the client in their locale, or the OVERDUE escalation (in English)
    with the invoice's whole reminder history. `drafts` maps a key to its
    `core.llm_guard.Draft`: the paragraph placed inside the template (G7: the facts
    around it come from the data, never from the model)."""
    if due.empty:
        return Composed()
    # Only the history of tonight's invoices: the whole table is ~100k rows at scale.
    steps = reminder_history(history[history["subject_id"].isin(due["subject_id"])])
    drafts = drafts or {}

    def render_one(row: Any) -> OutgoingEmail:
        # Only steps that went out are earlier steps of this one: no email refers to a
        # reminder that was not sent (the hold rule makes them sent or adopted).
        invoice_steps = [s for s in steps.get(row.subject_id, []) if int(
            DunningStep(s["step"]).rank) < int(row.step_rank)]
        sent_steps = [s for s in invoice_steps if s["status"] == LedgerStatus.SENT]
        locale = DEFAULT_LOCALE if row.step == DunningStep.OVERDUE else row.locale
        context = {
            "key": row.key,
            "step": row.step,
            "invoice_id": row.subject_id,
            "number": row.number,
            "amount": format_money(row.amount, row.currency, locale),
            "issue_date": format_date(row.issue_date, locale),
            "due_date": format_date(row.due_date, locale),
            "client_id": row.client_id,
            "client_name": row.client_name,
            "client_email": row.client_email,
            "history": invoice_steps,
            "previous_date": format_date(date.fromisoformat(sent_steps[-1]["as_of"]), locale)
            if sent_steps else "",
            "paragraph": draft.paragraph if (draft := drafts.get(row.key)) else "",
        }
        kind = "escalation" if row.step == DunningStep.OVERDUE else "dunning"
        return _email(row, sender, render(kind, locale, context), draft)

    composed = compose_each(due, render_one)
    return Composed(composed.emails, composed.failures, list(drafts.values()))
