"""Compose: render each reserved key into the exact email that will be sent (pure: the
templates are package data or files of a directory the operator names, the facts come
from the decided rows).

Each email is three templates — `.subject`, `.txt`, `.html` — looked up per kind, step
and locale: `dunning.REMINDED_2.es.html` if there is one, else `dunning.es.html`. A
templates directory (`EmailLook.templates_dir`, DUEFLOW_TEMPLATES_DIR) is searched before
the packaged templates, file by file; `check_templates` renders every template a run can
use with the documented variables before anything is written, so a broken override is
one clear error at start-up, never a failed email at night.
"""

from __future__ import annotations

import os
import re
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import date, timedelta
from decimal import Decimal
from functools import cache
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

# Jinja is imported where a template is loaded: a night with nothing to render (the
# most common night) loads no template engine (docs/performance.md).
if TYPE_CHECKING:
    from jinja2 import BytecodeCache, Environment, Template

from dueflow.tasks.core.addresses import Mailbox
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.keys import DunningStep
from dueflow.tasks.core.locales import DEFAULT_LOCALE, SUPPORTED_LOCALES, supported_locale, words
from dueflow.tasks.core.message import OutgoingEmail, message_id_for
from dueflow.tasks.core.money import format_money, sums_by_currency
from dueflow.tasks.core.statuses import LedgerStatus
from dueflow.tasks.core.text import clean_line
from dueflow.tasks.core.tone import Draft, PlanSource, read_plan, read_relationship
from dueflow.tasks.core.wording import count_days, long_date, relative_day

SUBJECT_LIMIT = 250  # characters: a subject is read in a list, and data can be very long
PARTS = ("subject", "txt", "html")
KINDS = ("renewal", "dunning", "escalation", "statement")
# The steps a template file may be named after: renewal leads are any `{days}d`.
KIND_STEPS = {"dunning": (DunningStep.REMINDED_1.value, DunningStep.REMINDED_2.value),
              "escalation": (DunningStep.OVERDUE.value,),
              "statement": (DunningStep.OVERDUE.value,)}  # statement.OVERDUE: escalations as one
PAYMENT_LINK_FIELDS = ("number", "invoice_id", "amount", "currency")


@dataclass(frozen=True)
class EmailLook:
    """What a company changes about its emails without forking dueflow (settings
    DUEFLOW_COMPANY_NAME, DUEFLOW_SIGNATURE, DUEFLOW_PAYMENT_INSTRUCTIONS,
    DUEFLOW_PAYMENT_LINK, DUEFLOW_CONTRACT_CONTACT, DUEFLOW_TEMPLATES_DIR). Empty means
    not shown."""

    company: str = ""
    signature: str = ""  # may span lines
    payment_instructions: str = ""  # may span lines: bank account, reference to quote…
    # https://pay.example/{number}?amount={amount}&cur={currency}: fields are URL-quoted
    payment_link: str = ""
    contract_contact: str = ""  # who to ask about a contract: a name, an address, both
    templates_dir: str | None = None
    bcc: str = ""  # DUEFLOW_BCC: the archive copy of every email (envelope only)
    # The database's secret for Message-IDs (dueflow_secrets; a night sets it): never shown.
    message_id_key: str = field(default="", repr=False)

    def payment_url(self, number: str, invoice_id: str, amount: str, currency: str) -> str:
        if not self.payment_link:
            return ""
        values = {"number": number, "invoice_id": invoice_id, "amount": amount, "currency": currency}
        return self.payment_link.format_map({k: quote(str(v), safe="") for k, v in values.items()})


DEFAULT_LOOK = EmailLook()


_LOCALE_HEADER = re.compile(r"\[([a-z]{2})\]")


def payment_text(instructions: str, locale: str) -> str:
    """How to pay, in the reminder's language: DUEFLOW_PAYMENT_INSTRUCTIONS may carry a
    section per locale, each under a line `[es]`, `[de]`, `[en]`; the text before the first
    such line is for every locale without its own (a Spanish reminder's "Cómo pagar" box
    then says it in Spanish when a `[es]` section is there)."""
    sections: dict[str, list[str]] = {"": []}
    current = ""
    for line in instructions.strip().splitlines():
        if (header := _LOCALE_HEADER.fullmatch(line.strip())) and header.group(1) in SUPPORTED_LOCALES:
            current = header.group(1)
            sections.setdefault(current, [])
        else:
            sections[current].append(line)
    texts = {name: "\n".join(lines).strip() for name, lines in sections.items()}
    # Its own section, else the text for every locale, else the one section there is.
    return texts.get(locale) or texts[""] or next((t for t in texts.values() if t), "")


def payment_link_problem(template: str) -> str | None:
    """Why a payment link template cannot be used (None when it can): it must be an http(s)
    URL whose only `{fields}` are number, invoice_id, amount and currency."""
    try:
        probe = template.format_map({k: "x" for k in PAYMENT_LINK_FIELDS})
    except (KeyError, IndexError, ValueError) as exc:
        return (f"has an unknown or malformed field ({exc}); use {{number}}, {{invoice_id}},"
                " {amount} or {currency}")
    parts = urlsplit(probe)
    if parts.scheme not in ("https", "http") or not parts.netloc or any(c.isspace() for c in probe):
        return "is not an http(s) URL"
    return None


# --------------------------------------------------------------------------- templates


@cache
def _environment(templates_dir: str | None) -> Environment:
    from jinja2 import (
        ChoiceLoader,
        Environment,
        FileSystemLoader,
        PackageLoader,
        StrictUndefined,
        select_autoescape,
    )

    package = PackageLoader("dueflow.tasks", "templates")
    loader = ChoiceLoader([FileSystemLoader(templates_dir), package]) if templates_dir else package
    return Environment(
        loader=loader,
        bytecode_cache=_bytecode_cache(),
        autoescape=select_autoescape(enabled_extensions=("html",), default=False),
        undefined=StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        auto_reload=False,  # templates do not change while a run renders thousands of emails
    )


def _bytecode_cache() -> BytecodeCache | None:
    """Jinja's own cache of compiled templates, in the directory it makes private to this
    user (mode 0700, its owner checked), keyed by each template's name and checked against
    its source's checksum: compiling every template took most of the start-up check, every
    night (docs/performance.md). None where no such directory can be made: compiled again."""
    from jinja2 import FileSystemBytecodeCache

    try:
        return FileSystemBytecodeCache()
    except (OSError, RuntimeError):
        return None


def template_names(kind: str, step: str | None, locale: str, part: str) -> list[str]:
    """Where the template of one part is looked for, most specific first."""
    names = [f"{kind}.{locale}.{part}"]
    return [f"{kind}.{step}.{locale}.{part}", *names] if step else names


@cache
def _templates_for(templates_dir: str | None, kind: str, step: str | None,
                   locale: str) -> tuple[Template, ...]:
    """The subject, text and HTML templates of one kind, step and locale, resolved once
    (a miss costs a file lookup: never per email)."""
    env = _environment(templates_dir)
    return tuple(env.select_template(template_names(kind, step, locale, part)) for part in PARTS)


def render(kind: str, locale: str, context: Mapping[str, Any], step: str | None = None,
           look: EmailLook = DEFAULT_LOOK) -> tuple[str, str, str]:
    """Subject, text body and HTML body of one email (HTML autoescaped). `context` holds
    the documented variables (`renewal_context`, `dunning_context`)."""
    if locale not in SUPPORTED_LOCALES:
        raise ValueError(f"unsupported locale {locale!r}; use one of {', '.join(SUPPORTED_LOCALES)}")
    subject, text, html = (t.render(context) for t in _templates_for(look.templates_dir, kind, step, locale))
    return clean_line(subject, SUBJECT_LIMIT), text, html


def render_paragraph(step: str, locale: str, due_state: str = "overdue") -> str:
    """The template paragraph of a reminder step (templates/paragraph.STEP.LOCALE.txt), worded
    for where the invoice stands on the run's day (`due_state`: upcoming, today, overdue or
    unknown): a reminder sent before the due date does not read as one about a late invoice."""
    template = _environment(None).get_template(f"paragraph.{step}.{locale}.txt")
    return template.render(due_state=due_state).strip()


# --------------------------------------------------------------------------- contexts


def _common(locale: str, look: EmailLook, as_of: date | None) -> dict[str, Any]:
    return {
        "locale": locale,
        "company": look.company,
        "signature": look.signature.strip(),
        "today": long_date(as_of, locale) if as_of else "",
    }


def renewal_context(*, vendor: str, title: str, amount: str, currency: str, renewal_date: date,
                    days_left: int, lead: int, locale: str, look: EmailLook = DEFAULT_LOOK) -> dict[str, Any]:
    """The documented variables of a renewal alert (docs/emails.md, "The documented variables")."""
    return _common(locale, look, renewal_date - timedelta(days=days_left)) | {
        "vendor": vendor,
        "title": title,
        "amount": format_money(amount, currency, locale),
        "renewal_date": long_date(renewal_date, locale),
        "days_left": days_left,
        "when": relative_day(days_left, locale),
        "lead": lead,
        "lead_days": count_days(lead, locale),
        "contact": look.contract_contact,
    }


def _due_facts(due_date: date | None, as_of: date | None, locale: str) -> dict[str, Any]:
    """Where the invoice stands against its due date on `as_of`. Never overdue before the
    due date, nor when either date is unknown."""
    if due_date is None or as_of is None:
        return {"due_state": "unknown", "due_in": None, "due_when": "", "overdue": False,
                "days_overdue": 0, "overdue_for": ""}
    due_in = (due_date - as_of).days
    state = "upcoming" if due_in > 0 else "today" if due_in == 0 else "overdue"
    return {"due_state": state, "due_in": due_in, "due_when": relative_day(due_in, locale),
            "overdue": due_in < 0, "days_overdue": max(0, -due_in),
            "overdue_for": count_days(-due_in, locale) if due_in < 0 else ""}


def _day(value: object) -> date | None:
    if value is None or value is pd.NaT or (not isinstance(value, date) and pd.isna(value)):  # type: ignore[call-overload]
        return None
    return value.date() if isinstance(value, pd.Timestamp) else value  # type: ignore[return-value]


def dunning_context(*, step: str, invoice_id: str, number: str, amount: str, currency: str,
                    issue_date: date | None, due_date: date | None, client_id: str,
                    client_name: str, client_email: str, history: list[dict[str, str]],
                    paragraph: str, as_of: date | None, locale: str,
                    look: EmailLook = DEFAULT_LOOK, attachment: str = "",
                    paid: Mapping[str, Any] | None = None,
                    charged: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The documented variables of a reminder or an escalation (docs/emails.md, "The documented variables").
    `history` is the invoice's earlier steps (`reminder_history`): step, as_of (ISO
    date), status. `amount` is what the client still owes; `paid` what it was read from
    (`owed_facts`: invoice_amount, received, received_on, credited), when anything was."""
    rank = int(DunningStep(step).rank)
    said = words(locale)
    earlier = [s for s in history if int(DunningStep(s["step"]).rank) < rank]
    sent = [s for s in earlier if s["status"] == LedgerStatus.SENT]
    bounced = [s for s in earlier if s["status"] == LedgerStatus.BOUNCED]
    number_text = str(number)
    return _common(locale, look, as_of) | _due_facts(due_date, as_of, locale) | {
        "reminder": rank,  # 1: first reminder, 2: second, 3: the escalation
        "number": number_text,
        "invoice_id": str(invoice_id),
        "amount": format_money(amount, currency, locale),
        "issue_date": long_date(issue_date, locale),
        "due_date": long_date(due_date, locale),
        "client_id": str(client_id),
        "client_name": str(client_name or ""),
        "client_email": str(client_email or ""),
        "history": [{"label": said.steps.get(s["step"], s["step"]),
                     "date": long_date(date.fromisoformat(s["as_of"]), locale),
                     "outcome": said.outcomes.get(s["status"], s["status"])
                     + (f" ({str(s['bounce']).removeprefix('bounced: ')})" if s.get("bounce") else "")}
                    for s in earlier],
        "previous_date": long_date(date.fromisoformat(sent[-1]["as_of"]), locale) if sent else "",
        # A reminder bounced: the client could not be reached (the escalation says so, and why).
        "unreachable": bool(bounced),
        "bounce_reason": str(bounced[-1].get("bounce") or "").removeprefix("bounced: ") if bounced else "",
        "bounced_date": long_date(date.fromisoformat(bounced[-1]["as_of"]), locale) if bounced else "",
        "paragraph": paragraph,
        "payment_instructions": payment_text(look.payment_instructions, locale),
        "payment_link": look.payment_url(number_text, str(invoice_id), str(amount), str(currency)),
        "attachment": attachment,  # the invoice PDF's file name when it is attached, else ""
    } | owed_facts(paid or {}, currency, locale) | charge_facts(charged or {}, currency, locale)


PAID_FIELDS = ("invoice_amount", "received", "received_on", "credited")  # of a due row (dunning_rule)
CHARGED_FIELDS = ("fee", "interest", "interest_rate", "interest_days", "compensation", "pay_by")


def charge_facts(charged: Mapping[str, Any], currency: str, locale: str) -> dict[str, Any]:
    """What a profile's step states besides the open amount (docs/configuration.md, "Fees,
    interest and pay-by dates"), written for the reader; '' where none. `has_charges`: a
    fee, interest or compensation is stated (on their own lines, never added to the
    invoice)."""
    from babel.numbers import format_percent

    def money(name: str) -> str:
        value = charged.get(name)
        return format_money(str(value), currency, locale) if value not in (None, "") else ""

    rate, days = charged.get("interest_rate"), charged.get("interest_days")
    pay_by = _day(charged.get("pay_by"))
    said = {"fee": money("fee"), "interest": money("interest"), "compensation": money("compensation"),
            "interest_rate": format_percent(Decimal(str(rate)) / 100, locale=words(locale).date_locale,
                                            decimal_quantization=False) if rate not in (None, "") else "",
            "interest_days": count_days(int(days), locale) if days not in (None, "") else "",
            "pay_by": long_date(pay_by, locale) if pay_by else ""}
    return said | {"has_charges": bool(said["fee"] or said["interest"] or said["compensation"])}


def owed_facts(paid: Mapping[str, Any], currency: str, locale: str) -> dict[str, Any]:
    """What the email says of the payments (docs/emails.md): `partly_paid` when something was
    paid or credited; the invoice's own amount, what was received (and on which day) and
    credited, written for the reader; '' where none."""
    def money(name: str) -> str:
        value = paid.get(name)
        return format_money(str(value), currency, locale) if value not in (None, "") else ""

    received_on = paid.get("received_on")
    received, credited = money("received"), money("credited")
    return {"partly_paid": bool(received or credited), "invoice_amount": money("invoice_amount"),
            "received": received, "credited": credited,
            "received_on": long_date(date.fromisoformat(str(received_on)), locale) if received_on else ""}


def statement_context(rows: pd.DataFrame, steps: Mapping[str, list[dict[str, str]]],
                      as_of: date | None, locale: str, look: EmailLook) -> dict[str, Any]:
    """The documented variables of a statement (docs/emails.md): the client's,
    and `items`, one per invoice — each invoice's own reminder or escalation variables
    (`dunning_context`) — in the order of their due dates; `totals`, the sum per currency."""
    ordered = rows.sort_values(["due_date", "number", "key"], na_position="last", kind="stable")
    said = words(locale)
    items = []
    row: Any
    for row in ordered.itertuples(index=False):
        attached = str(_cell(row, "attachment_name") or "") if _cell(row, "attachment_sha256") else ""
        items.append(dunning_context(
            step=row.step, invoice_id=row.subject_id, number=row.number, amount=row.amount,
            currency=row.currency, issue_date=_day(row.issue_date), due_date=_day(row.due_date),
            client_id=row.client_id, client_name=row.client_name, client_email=row.client_email,
            history=steps.get(row.subject_id, []), paragraph="", as_of=as_of, locale=locale,
            look=look, attachment=attached, paid={name: _cell(row, name) for name in PAID_FIELDS},
            charged={name: _cell(row, name) for name in CHARGED_FIELDS}) | {"key": str(row.key),
                                               "step_label": said.steps.get(str(row.step), str(row.step))})
    first = items[0]
    totals = sums_by_currency(ordered["amount"].astype("string"), ordered["currency"].astype("string"))
    return {name: first[name] for name in ("locale", "company", "signature", "today", "client_id",
                                           "client_name", "client_email", "payment_instructions")} | {
        "items": items,
        "count": len(items),
        "reminder": max(int(item["reminder"]) for item in items),
        "overdue": any(item["overdue"] for item in items),
        "unreachable": any(item["unreachable"] for item in items),
        "totals": [format_money(amount, currency, locale) for currency, amount in sorted(totals.items())],
        "attachments": [item["attachment"] for item in items if item["attachment"]],
    }


# --------------------------------------------------------------------------- compose


def stored_drafts(rows: pd.DataFrame) -> dict[str, Draft]:
    """The plans ledger rows keep (`key`, `paragraph`, `draft_source`, `draft_note`,
    `tone_plan`): a message rendered again says the same paragraph (G7). A row of the
    model's or the rule's plan keeps its paragraph as stored (reviewed text, as it was
    rendered); a template paragraph is worded again for the day, and free text an earlier
    release let a model write is never kept (the row is planned anew)."""
    if rows.empty or "tone_plan" not in rows:
        return {}
    sources = rows["draft_source"].astype("string")
    kept = rows[sources.isin([PlanSource.MODEL.value, PlanSource.RULE.value]).fillna(False).to_numpy()
                & rows["paragraph"].notna().to_numpy() & rows["tone_plan"].notna().to_numpy()]
    drafts = {}
    for key, paragraph, source, plan in zip(kept["key"], kept["paragraph"], kept["draft_source"],
                                            kept["tone_plan"], strict=True):
        read = read_plan(plan)
        if read is not None:
            drafts[str(key)] = Draft(str(key), str(paragraph), PlanSource(source), read,
                                     read_relationship(plan))
    return drafts


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

    def addressed(self) -> Prepared:
        """What the steps after composing read, once the messages are stored."""
        return Prepared([Addressed(e.key, e.recipient, e.subject, e.draft_source, e.attachment_note,
                                   e.statement_key) for e in self.emails], self.failures, self.drafts)


@dataclass(frozen=True)
class Addressed:
    """An email whose message is stored on its ledger row: what the steps after composing
    read of it. Delivery sends the stored message (G2, G7): no body is kept in memory."""

    key: str
    recipient: str
    subject: str
    draft_source: str | None = None  # shown by a dry run
    attachment_note: str | None = None  # why a reminder goes without its invoice PDF
    statement_key: str | None = None  # in a statement: its carrier's key (tasks/core/statements.py)


@dataclass
class Prepared:
    """The composed emails of a run's winners, stored chunk by chunk: their addressing,
    the keys that could not be rendered (with why), and the paragraphs used."""

    emails: list[Addressed] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)
    drafts: list[Draft] = field(default_factory=list)

    def __add__(self, other: Prepared) -> Prepared:
        return Prepared(self.emails + other.emails, self.failures + other.failures,
                        self.drafts + other.drafts)

    def without_pdf(self) -> list[str]:
        """The summary's warning when reminders go without their invoice PDF (DUEFLOW_INVOICE_PDF
        is set, and a file is missing, too large or not a PDF): they are sent, and it is said."""
        notes = [(e.key, e.attachment_note) for e in self.emails if e.attachment_note]
        if not notes:
            return []
        shown = "; ".join(f"{key} ({note.removeprefix('not attached: ')})" for key, note in notes[:5])
        more = f"; and {len(notes) - 5} more" if len(notes) > 5 else ""
        return [f"{len(notes)} reminder(s) go without their invoice PDF: {shown}{more}. Put the file where"
                " DUEFLOW_INVOICE_PDF says; `dueflow invoices --id ID` shows each step's PDF"]


def compose_each(due: pd.DataFrame, render_one: Callable[[Any], OutgoingEmail]) -> Composed:
    """Render every row; a row that cannot be rendered is reported, not fatal (G6)."""
    emails, failures = [], []
    for row in due.itertuples(index=False):
        try:
            emails.append(render_one(row))
        except Exception as exc:
            failures.append((str(row.key), f"could not render the email: {exc}"))
    return Composed(emails, failures)


def _cell(row: Any, name: str) -> Any:
    """A column of the row that may be absent or missing: None then."""
    value = getattr(row, name, None)
    return None if value is None or value is pd.NA or (not isinstance(value, str) and pd.isna(value)) \
        else value


def _email(row: Any, sender: Mailbox, rendered: tuple[str, str, str],
           draft: Draft | None = None, look: EmailLook = DEFAULT_LOOK) -> OutgoingEmail:
    subject, text, html = rendered
    size = _cell(row, "attachment_size")
    return OutgoingEmail(
        key=row.key,
        recipient=str(row.recipient),
        subject=subject,
        body_text=text,
        body_html=html,
        message_id=message_id_for(row.key, sender, look.message_id_key),
        draft_source=draft.source.value if draft else None,
        draft_note=draft.note if draft else None,
        paragraph=draft.paragraph if draft and draft.source != PlanSource.TEMPLATE else None,
        tone_plan=draft.stored_plan if draft else None,
        refused_answer=draft.answer if draft else None,
        # Copies: the account manager's of a reminder (decided), the archive's of every email.
        cc_recipient=_cell(row, "cc_recipient"),
        bcc_recipient=look.bcc or None,
        # The invoice PDF of a reminder, checked and hashed by the shell (tasks/adapters/invoice_files).
        attachment_path=_cell(row, "attachment_path"),
        attachment_name=_cell(row, "attachment_name"),
        attachment_sha256=_cell(row, "attachment_sha256"),
        attachment_size=None if size is None else int(size),
        attachment_note=_cell(row, "attachment_note"),
    )


def compose_renewal_alerts(due: pd.DataFrame, locale: str, sender: Mailbox,
                           look: EmailLook | None = None) -> Composed:
    """Render the renewal alert of each row of `due` (rows from `due_renewal_alerts`)."""
    look = look or DEFAULT_LOOK

    def render_one(row: Any) -> OutgoingEmail:
        context = renewal_context(vendor=row.vendor, title=row.title, amount=row.amount,
                                  currency=row.currency, renewal_date=row.renewal_date,
                                  days_left=int(row.days_left), lead=int(row.step_rank),
                                  locale=locale, look=look)
        return _email(row, sender, render("renewal", locale, context, f"{int(row.step_rank)}d", look),
                      look=look)

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
        str(invoice): [{"step": str(r.step), "as_of": str(r.step_date), "status": str(r.status),
                        "bounce": "" if pd.isna(getattr(r, "bounce", None)) else str(r.bounce)}
                       for r in rows.itertuples(index=False)]
        for invoice, rows in ordered.groupby("subject_id", sort=False)
    }


def compose_dunning_emails(
    due: pd.DataFrame,
    history: pd.DataFrame,
    sender: Mailbox,
    drafts: Mapping[str, Draft] | None = None,
    as_of: date | None = None,
    look: EmailLook | None = None,
) -> Composed:
    """Reminders to the client in their locale, or the OVERDUE escalation (in English)
    with the invoice's whole reminder history. `drafts` maps a key to its
    `core.tone.Draft`: the paragraph placed inside the template — reviewed sentences, as
    planned (G7: the facts around it come from the data, never from a model). `as_of` is the run's business
    date: the wording says when payment falls due, or how long it is overdue (without
    it, only the due date is given)."""
    if due.empty:
        return Composed()
    look = look or DEFAULT_LOOK
    # Only the history of tonight's invoices: the whole table is ~100k rows at scale.
    steps = reminder_history(history[history["subject_id"].isin(due["subject_id"])])
    keys = set(due["key"])
    drafts = {key: draft for key, draft in (drafts or {}).items() if key in keys}  # these emails' own
    used: dict[str, Draft] = dict(drafts)

    def render_one(row: Any) -> OutgoingEmail:
        locale = DEFAULT_LOCALE if row.step == DunningStep.OVERDUE else row.locale
        draft = drafts.get(row.key)
        if draft is not None and draft.source == PlanSource.TEMPLATE and draft.paragraph:
            # The template paragraph fits the day: before, on or after the due date.
            due_state = _due_facts(_day(row.due_date), as_of, locale)["due_state"]
            draft = used[row.key] = replace(draft, paragraph=render_paragraph(
                str(row.step), supported_locale(locale), due_state))
        context = dunning_context(
            step=row.step, invoice_id=row.subject_id, number=row.number, amount=row.amount,
            currency=row.currency, issue_date=_day(row.issue_date), due_date=_day(row.due_date),
            client_id=row.client_id, client_name=row.client_name, client_email=row.client_email,
            history=steps.get(row.subject_id, []), paragraph=draft.paragraph if draft else "",
            as_of=as_of, locale=locale, look=look,
            attachment=str(_cell(row, "attachment_name") or "") if _cell(row, "attachment_sha256") else "",
            paid={name: _cell(row, name) for name in PAID_FIELDS},
            charged={name: _cell(row, name) for name in CHARGED_FIELDS})
        kind = "escalation" if row.step == DunningStep.OVERDUE else "dunning"
        return _email(row, sender, render(kind, locale, context, str(row.step), look), draft, look)

    composed = compose_each(due, render_one)
    return Composed(composed.emails, composed.failures, list(used.values()))


# --------------------------------------------------------------------------- start-up check


class TemplateProblem(ValueError):
    """A template of the templates directory cannot be used; the message is one line."""


def _sample_contexts(look: EmailLook) -> list[tuple[str, str | None, str, dict[str, Any]]]:
    """(kind, step, locale, context): every kind and step in every locale, in each state
    its wording depends on — what a run can render, with made-up facts."""
    as_of = date(2027, 3, 1)
    samples: list[tuple[str, str | None, str, dict[str, Any]]] = []
    for locale in SUPPORTED_LOCALES:
        for days_left in (0, 1, 30):
            samples.append(("renewal", "30d", locale, renewal_context(
                vendor="Vendor", title="Contract", amount="1250.50", currency="EUR",
                renewal_date=as_of + timedelta(days=days_left), days_left=days_left, lead=30,
                locale=locale, look=look)))
        history = [{"step": "REMINDED_1", "as_of": "2027-02-20", "status": "sent"},
                   {"step": "REMINDED_2", "as_of": "2027-02-25", "status": "adopted"}]
        for step in (*KIND_STEPS["dunning"], *KIND_STEPS["escalation"]):
            kind = "escalation" if step == DunningStep.OVERDUE else "dunning"
            if kind == "escalation" and locale != DEFAULT_LOCALE:
                continue  # escalations are written in English
            for due_in, paragraph, name in ((5, "A paragraph.", "Client"), (0, "", ""),
                                            (-6, "A paragraph.", "Client"), (None, "", "Client")):
                samples.append((kind, step, locale, dunning_context(
                    step=step, invoice_id="inv-1", number="F-1", amount="980.40", currency="EUR",
                    issue_date=as_of - timedelta(days=20),
                    due_date=None if due_in is None else as_of + timedelta(days=due_in),
                    client_id="cl-1", client_name=name, client_email="ap@client.example",
                    history=history, paragraph=paragraph, as_of=as_of, locale=locale, look=look,
                    attachment="F-1.pdf" if paragraph else "",
                    # partly paid: with a payment's date, and by a column without one
                    paid={"invoice_amount": "1000.00", "received": "400.00", "credited": "19.60",
                          "received_on": "2027-02-25" if paragraph else None} if due_in != 0 else None,
                    # a fee, statutory interest and a pay-by date; or a pay-by date alone
                    charged={"fee": "10.00", "interest": "5.13", "interest_rate": "10.4", "interest_days": 30,
                             "compensation": "40.00", "pay_by": as_of + timedelta(days=14)} if paragraph
                    else {"pay_by": as_of + timedelta(days=14)} if due_in == 0 else None)))
        for step in (DunningStep.REMINDED_1, DunningStep.REMINDED_2, DunningStep.OVERDUE):
            if step == DunningStep.OVERDUE and locale != DEFAULT_LOCALE:
                continue
            members = pd.DataFrame({
                "key": ["k1", "k2"], "step": [step.value, step.value], "subject_id": ["inv-1", "inv-2"],
                "number": ["F-1", "F-2"], "amount": ["980.40", "15.00"], "currency": ["EUR", "USD"],
                "issue_date": [as_of - timedelta(days=20)] * 2,
                "due_date": [as_of - timedelta(days=6), as_of + timedelta(days=5)],
                "client_id": ["cl-1"] * 2, "client_name": ["Client", "Client"],
                "client_email": ["ap@client.example"] * 2,
                "attachment_name": ["F-1.pdf", None], "attachment_sha256": ["0" * 64, None],
                # the first partly paid, with a fee, interest and a pay-by date; the second plain
                "invoice_amount": ["1000.00", None], "received": ["19.60", None], "received_on": [None, None],
                "credited": [None, None], "fee": ["10.00", None], "interest": ["5.13", None],
                "interest_rate": ["10.4", None], "interest_days": [30, None], "compensation": ["40.00", None],
                "pay_by": [as_of + timedelta(days=14), None]})
            named = DunningStep.OVERDUE.value if step == DunningStep.OVERDUE else None
            samples.append(("statement", named, locale,
                            statement_context(members, {"inv-1": history}, as_of, locale, look)))
    return samples


def _where(exc: BaseException, templates_dir: str) -> str:
    """'file.html, line 3' of the template frame that raised, when it is in the directory."""
    from jinja2 import TemplateSyntaxError

    if isinstance(exc, TemplateSyntaxError) and exc.name:
        return f"{exc.name}, line {exc.lineno}"
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename and os.path.abspath(frame.filename).startswith(os.path.abspath(templates_dir)):
            return f"{os.path.basename(frame.filename)}, line {frame.lineno}"
    return ""


def _known_name(name: str) -> bool:
    parts = name.split(".")
    if name.startswith("_"):
        return True  # a layout or macros file that templates extend or import
    if len(parts) not in (3, 4) or parts[0] not in KINDS or parts[-1] not in PARTS:
        return False
    if parts[-2] not in SUPPORTED_LOCALES:
        return False
    if len(parts) == 3:
        return True
    step = parts[1]
    if parts[0] == "renewal":
        return step.endswith("d") and step[:-1].isdigit()
    return step in KIND_STEPS[parts[0]]


# What a templates directory held (name, size, modification time of each file) when its
# templates were compiled, and the (look, files) pairs that passed check_templates: a
# process running night after night (a worker, the tests) compiles them once, not per run.
DirectoryFiles = tuple[tuple[str, int, int], ...] | None
_LOADED: dict[str | None, DirectoryFiles] = {}
_PASSED: set[tuple[EmailLook, DirectoryFiles]] = set()


def _directory_files(directory: str | None) -> DirectoryFiles:
    if not directory:
        return None  # the packaged templates do not change under a running process
    with os.scandir(directory) as entries:
        return tuple(sorted((e.name, (st := e.stat()).st_size, st.st_mtime_ns)
                            for e in entries if e.is_file()))


def check_templates(look: EmailLook) -> None:
    """Render every template a run can use, with the documented variables, before any
    write. Raises TemplateProblem with one line naming the file and what is wrong: a
    template file (.subject, .txt, .html) whose name dueflow does not use (a typo would
    otherwise be silently ignored), a syntax error, an undefined variable."""
    directory = look.templates_dir
    setting = "DUEFLOW_TEMPLATES_DIR"
    if directory and not os.path.isdir(directory):
        raise TemplateProblem(f"{setting}={directory!r} is not a directory")
    files = _directory_files(directory)
    if (look, files) in _PASSED:
        return  # this process checked these very files with this look: nothing to redo
    if _LOADED.get(directory) != files:
        _environment.cache_clear()  # read the directory as it is now
        _templates_for.cache_clear()
        _LOADED[directory] = files
    if directory:
        for name in sorted(os.listdir(directory)):
            path = os.path.join(directory, name)
            if name.startswith(".") or not os.path.isfile(path) or name.rsplit(".", 1)[-1] not in PARTS:
                continue  # not a template: a README, notes
            if not _known_name(name):
                raise TemplateProblem(
                    f"{setting}: {name} is not a template dueflow uses (expected KIND[.STEP].LOCALE.PART:"
                    f" kind {'/'.join(KINDS)}, locale {'/'.join(SUPPORTED_LOCALES)},"
                    f" part {'/'.join(PARTS)}, e.g. dunning.REMINDED_2.es.html)")
    from jinja2 import TemplateError

    for kind, step, locale, context in _sample_contexts(look):
        wanted = [(kind, step, locale)]
        if kind == "renewal" and directory:  # every lead-specific override in the directory
            wanted += [(kind, n.split(".")[1], locale) for n in os.listdir(directory)
                       if n.startswith("renewal.") and n.count(".") == 3 and n.split(".")[2] == locale]
        for kind_, step_, locale_ in wanted:
            try:
                templates = _templates_for(directory, kind_, step_, locale_)
                for template in templates:
                    template.render(context)
            except TemplateError as exc:
                name = _where(exc, directory) if directory else ""
                part = name or f"{kind_}.{step_ or ''}.{locale_}"
                message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise TemplateProblem(f"{setting}: {part} does not render: {message}") from None
    _PASSED.add((look, files))
