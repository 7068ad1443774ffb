"""Compose: render each reserved key into the exact email that will be sent."""

from __future__ import annotations

import hashlib
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


def format_date(day: date, locale: str) -> str:
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


def compose_renewal_alerts(due: pd.DataFrame, locale: str, mail_from: str) -> list[OutgoingEmail]:
    """Render the renewal alert of each row of `due` (rows from `due_renewal_alerts`)."""
    emails = []
    for row in due.itertuples(index=False):
        context = {
            "key": row.key,
            "vendor": row.vendor,
            "title": row.title,
            "amount": format_money(float(row.amount), row.currency, locale),
            "renewal_date": format_date(row.renewal_date, locale),
            "days_left": int(row.days_left),
            "lead": int(row.step_rank),
        }
        subject, text, html = render("renewal", locale, context)
        emails.append(
            OutgoingEmail(
                key=row.key,
                recipient=header_safe(row.recipient),
                subject=subject,
                body_text=text,
                body_html=html,
                message_id=message_id_for(row.key, mail_from),
            )
        )
    return emails
