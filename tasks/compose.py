"""Compose: render each reserved key into the exact email that will be sent."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from datetime import date
from functools import cache
from typing import Any

import pandas as pd
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

LOCALES = ("en", "es")

_MONTHS = {
    "en": ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December"),
    "es": ("enero", "febrero", "marzo", "abril", "mayo", "junio", "julio", "agosto",
           "septiembre", "octubre", "noviembre", "diciembre"),
}


@dataclass(frozen=True)
class OutgoingEmail:
    """One rendered email, exactly as stored on its ledger row and sent."""

    key: str
    recipient: str
    subject: str
    body_text: str
    body_html: str
    message_id: str
    draft_source: str | None = None  # dunning reminders: 'llm' or 'template' paragraph
    draft_note: str | None = None  # why the template was used, or the model's tone

    def as_row(self) -> dict[str, Any]:
        return asdict(self)


@cache
def _templates() -> Environment:
    return Environment(
        loader=PackageLoader("tasks", "templates"),
        autoescape=select_autoescape(enabled_extensions=("html",), default=False),
        undefined=StrictUndefined,
        keep_trailing_newline=True,
    )


def header_safe(value: str) -> str:
    """A header value on one line: CR, LF and other line breaks become spaces."""
    return " ".join(str(value).split())


def message_id_for(key: str, mail_from: str) -> str:
    """Deterministic Message-ID: the same key always yields the same id."""
    domain = header_safe(mail_from).rpartition("@")[2].strip("<> ") or "dueflow.invalid"
    return f"<{hashlib.sha256(key.encode()).hexdigest()[:32]}@{domain}>"


def format_money(amount: float, currency: str, locale: str) -> str:
    text = f"{amount:,.2f}"
    if locale == "es":
        text = text.replace(",", " ").replace(".", ",").replace(" ", ".")
    return f"{text} {currency}"


def format_date(day: date | None, locale: str) -> str:
    if day is None or pd.isna(day):
        return "—"
    month = _MONTHS[locale][day.month - 1]
    return f"{day.day} de {month} de {day.year}" if locale == "es" else f"{day.day} {month} {day.year}"


def render(kind: str, locale: str, context: dict[str, Any]) -> tuple[str, str, str]:
    """Subject, text body and HTML body of one email (HTML autoescaped)."""
    if locale not in LOCALES:
        raise ValueError(f"unsupported locale {locale!r}; use one of {', '.join(LOCALES)}")
    env = _templates()
    subject = env.get_template(f"{kind}.{locale}.subject").render(context)
    text = env.get_template(f"{kind}.{locale}.txt").render(context)
    html = env.get_template(f"{kind}.{locale}.html").render(context)
    return header_safe(subject), text, html


Composed = tuple[list[OutgoingEmail], list[tuple[str, str]]]


def compose_each(due: pd.DataFrame, render_one: Callable[[Any], OutgoingEmail]) -> Composed:
    """Render every row; a row that cannot be rendered is reported, not fatal (G6)."""
    emails, failures = [], []
    for row in due.itertuples(index=False):
        try:
            emails.append(render_one(row))
        except Exception as exc:
            failures.append((row.key, f"could not render the email: {exc}"))
    return emails, failures


def _email(row: Any, mail_from: str, rendered: tuple[str, str, str], draft: Any = None) -> OutgoingEmail:
    subject, text, html = rendered
    return OutgoingEmail(
        key=row.key,
        recipient=header_safe(row.recipient),
        subject=subject,
        body_text=text,
        body_html=html,
        message_id=message_id_for(row.key, mail_from),
        draft_source=draft.source if draft else None,
        draft_note=(draft.note or (f"tone: {draft.tone}" if draft.tone else None)) if draft else None,
    )


def compose_renewal_alerts(due: pd.DataFrame, locale: str, mail_from: str) -> Composed:
    """Render the renewal alert of each row of `due` (rows from `due_renewal_alerts`)."""

    def render_one(row: Any) -> OutgoingEmail:
        context = {
            "key": row.key,
            "vendor": row.vendor,
            "title": row.title,
            "amount": format_money(float(row.amount), row.currency, locale),
            "renewal_date": format_date(row.renewal_date, locale),
            "days_left": int(row.days_left),
            "lead": int(row.step_rank),
        }
        return _email(row, mail_from, render("renewal", locale, context))

    return compose_each(due, render_one)


def reminder_history(history: pd.DataFrame) -> dict[str, list[dict[str, str]]]:
    """Per invoice, its reserved dunning steps in order: step, as_of, status."""
    ordered = history.sort_values(["subject_id", "step_rank"])
    return {
        str(invoice): [{"step": str(r.step), "as_of": str(r.as_of), "status": str(r.status)}
                       for r in rows.itertuples(index=False)]
        for invoice, rows in ordered.groupby("subject_id", sort=False)
    }


def compose_dunning_emails(
    due: pd.DataFrame,
    history: pd.DataFrame,
    mail_from: str,
    drafts: Mapping[str, Any] | None = None,
) -> Composed:
    """Reminders to the client in their locale, or the OVERDUE escalation (in English)
    with the invoice's whole reminder history. `drafts` maps a key to its
    `tasks.llm.Draft`: the paragraph placed inside the template (G7: the facts
    around it come from the data, never from the model)."""
    if due.empty:
        return [], []
    # Only the history of tonight's invoices: the whole table is ~100k rows at scale.
    steps = reminder_history(history[history["subject_id"].isin(due["subject_id"])])
    drafts = drafts or {}

    def render_one(row: Any) -> OutgoingEmail:
        invoice_steps = steps.get(row.subject_id, [])
        locale = "en" if row.step == "OVERDUE" else row.locale
        context = {
            "key": row.key,
            "step": row.step,
            "invoice_id": row.subject_id,
            "number": row.number,
            "amount": format_money(float(row.amount), row.currency, locale),
            "issue_date": format_date(row.issue_date, locale),
            "due_date": format_date(row.due_date, locale),
            "client_id": row.client_id,
            "client_name": row.client_name,
            "client_email": row.client_email,
            "history": invoice_steps,
            "previous_date": format_date(
                date.fromisoformat(invoice_steps[-1]["as_of"]) if invoice_steps else None, locale),
            "paragraph": draft.paragraph if (draft := drafts.get(row.key)) else "",
        }
        kind = "escalation" if row.step == "OVERDUE" else "dunning"
        return _email(row, mail_from, render(kind, locale, context), draft)

    return compose_each(due, render_one)
