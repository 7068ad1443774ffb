"""The words of the emails, read as a recipient would: calendars of real decisions
rendered in both locales — the relative dates right on every boundary day, never
"overdue" before the due date, no key or internal step name in any body — and money in
each currency's own minor units."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from functools import cache

import pandas as pd
import pytest
from babel.dates import format_date as babel_date
from hypothesis import given, settings
from hypothesis import strategies as st

from dueflow.tasks.core.addresses import Mailbox
from dueflow.tasks.core.dunning_rule import due_dunning_steps
from dueflow.tasks.core.keys import DUNNING_STEPS, DunningStep
from dueflow.tasks.core.locales import SUPPORTED_LOCALES
from dueflow.tasks.core.message import OutgoingEmail
from dueflow.tasks.core.render import (
    EmailLook,
    compose_dunning_emails,
    compose_renewal_alerts,
    dunning_context,
    render,
)
from dueflow.tasks.core.renewal_rule import due_renewal_alerts
from dueflow.tasks.core.wording import count_days, long_date, relative_day
from tests import examples

SENDER = Mailbox("alerts@corp.example", "Finance")
LEADS = (60, 30, 15)
RENEWAL = date(2027, 6, 30)
INTERNAL = re.compile(r"REMINDED_1|REMINDED_2|OVERDUE|renewal/|dunning/|\b\d+d\b|dueflow_ledger")
OVERDUE_WORDS = {"en": re.compile(r"overdue|past due|was due", re.IGNORECASE),
                 "es": re.compile(r"vencid|venció|retraso", re.IGNORECASE),
                 "de": re.compile(r"überfällig|fällig war|war am|Verzug", re.IGNORECASE)}
# A count that reads wrong in any locale: "1 days", "in 0 days" and their translations.
WRONG_COUNT = re.compile(r"(?<!\d)1 (days|días|Tage\b)|\b(in|dentro de) [01] (days?|días?|Tag(en)?)\b")
HISTORY_COLUMNS = ["subject_id", "step", "step_rank", "as_of", "status"]
CLIENT_COLUMNS = ["id", "name", "email", "locale", "notes", "dunning_paused"]


def bodies(email: OutgoingEmail) -> list[str]:
    return [email.subject, email.body_text, email.body_html]


def assert_no_internal_words(email: OutgoingEmail) -> None:
    for text in bodies(email):
        assert email.key not in text
        assert not INTERNAL.search(text), (INTERNAL.search(text), text[:400])


# --------------------------------------------------------------------------- words


@pytest.mark.parametrize(("days", "en", "es"), [
    (0, "today", "hoy"), (1, "tomorrow", "mañana"), (2, "in 2 days", "dentro de 2 días"),
    (15, "in 15 days", "dentro de 15 días"), (-1, "yesterday", "ayer"), (-2, "2 days ago", "hace 2 días"),
])
def test_relative_days(days, en, es):
    assert (relative_day(days, "en"), relative_day(days, "es")) == (en, es)


@pytest.mark.parametrize(("n", "en", "es"), [(1, "1 day", "1 día"), (2, "2 days", "2 días"),
                                             (0, "0 days", "0 días"), (21, "21 days", "21 días")])
def test_counted_days_have_their_plural(n, en, es):
    assert (count_days(n, "en"), count_days(n, "es")) == (en, es)


@settings(max_examples=examples(100), deadline=None)
@given(day=st.dates(min_value=date(1900, 1, 1), max_value=date(2200, 12, 31)))
def test_long_dates_are_babels_long_format(day):
    # One date style in every email: CLDR's long dates (en_GB and es), written without
    # Babel on the hot path but identical to it.
    assert long_date(day, "en") == babel_date(day, format="long", locale="en_GB")
    assert long_date(day, "es") == babel_date(day, format="long", locale="es")


# --------------------------------------------------------------------------- renewals


def contracts(days_left: list[int]) -> pd.DataFrame:
    n = len(days_left)
    return pd.DataFrame({
        "id": [f"c-{d}" for d in days_left], "vendor": ["Acme Cloud"] * n, "title": ["Hosting"] * n,
        "amount": ["12500.00"] * n, "currency": ["EUR"] * n,
        "renewal_date": [(RENEWAL).isoformat()] * n, "notify_email": ["cfo@corp.example"] * n,
        "status": ["active"] * n,
    })


EXPECTED_WHEN = {"en": {0: "today", 1: "tomorrow"}, "es": {0: "hoy", 1: "mañana"}}


@cache
def renewal_calendar() -> list[tuple[int, pd.DataFrame]]:
    """(days left, the alerts due) for every night from 61 days before the renewal
    to the day itself; the rule does not depend on the locale: decided once for both."""
    history = pd.DataFrame(columns=["subject_id", "cycle", "handled_rank"])
    nights = []
    for days_left in range(0, 62):
        as_of = RENEWAL - timedelta(days=days_left)
        nights.append((days_left, due_renewal_alerts(contracts([days_left]), history, as_of, LEADS).due))
    return nights


@pytest.mark.xdist_group("renewal-calendar")  # one worker decides the calendar once
@pytest.mark.parametrize("locale", ["en", "es"])
def test_renewal_calendar_words_fit_the_day(locale):
    """Every day of a renewal cycle, decided and rendered as the flow does: each alert
    says when the contract renews relative to the run, in the reader's words; boundary
    days 0, 1, 2 and each lead and lead ± 1 are all in the calendar."""
    seen_days = set()
    for days_left, due in renewal_calendar():
        if days_left > max(LEADS):
            assert due.empty
            continue
        composed = compose_renewal_alerts(due, locale, SENDER)
        assert not composed.failures
        [email] = composed.emails
        seen_days.add(days_left)
        when = EXPECTED_WHEN[locale].get(days_left) or relative_day(days_left, locale)
        renews = "Contract renews" if locale == "en" else "El contrato se renueva"
        assert email.subject.startswith(f"{renews} {when}: Acme Cloud")
        assert ("renews " if locale == "en" else "se renueva ") + when in email.body_text
        for text in bodies(email):
            assert not re.search(r"\b(in|dentro de) [01] (days?|días?)\b", text), text[:300]
            assert not re.search(r"(?<!\d)1 (days|días)", text), text[:300]
        lead = min(x for x in LEADS if x >= days_left)
        within = f"within {lead} days" if locale == "en" else f"en los próximos {lead} días"
        assert (within in email.body_text) == (days_left > 1)  # the window, never a false count
        assert_no_internal_words(email)
    assert {0, 1, 2, 14, 15, 16, 29, 30, 31, 59, 60} <= seen_days


# --------------------------------------------------------------------------- dunning


CALENDARS = [("sent", 30), ("sent", 0), ("sent", 14), ("due", 30), ("sent", 12), ("sent", 13)]
LOCALES = ("en", "es")


@cache
def dunning_calendars(start: str, delays: tuple[int, ...] = (7, 5, 7)) -> dict[tuple[str, int], list[tuple]]:
    """Nights 0..59 of one invoice per (locale, days to its due date) of CALENDARS that
    count from `start`, each sent on day 0 and each of its own client, decided and rendered
    as the flow does (each step sent the night it is due). One simulation for all of them:
    the rule decides each invoice on its own rows, and a night costs one call, not twelve."""
    sent = date(2027, 1, 4)
    sent_at = datetime(sent.year, sent.month, sent.day, 9, tzinfo=UTC).isoformat()
    cases = {f"inv-{locale}-{due_after}": (locale, due_after)
             for start_, due_after in CALENDARS if start_ == start for locale in LOCALES}
    invoices = pd.DataFrame([
        (invoice_id, f"cl-{invoice_id}", "F-2027-007", "980.40", "EUR", "sent", sent_at,
         (sent + timedelta(days=due_after)).isoformat(), None)
        for invoice_id, (_, due_after) in cases.items()],
        columns=["id", "client_id", "number", "amount", "currency", "status", "sent_at", "due_date",
                 "paid_at"])
    clients = pd.DataFrame([(f"cl-{invoice_id}", "Ñandú SL", "pagos@nandu.example", locale, None, False)
                            for invoice_id, (locale, _) in cases.items()], columns=CLIENT_COLUMNS)
    history: list[tuple] = []
    out: dict[tuple[str, int], list[tuple]] = {case: [] for case in cases.values()}
    for night in range(60):
        if all(len(emails) == len(DUNNING_STEPS) for emails in out.values()):
            break  # every calendar has had its three emails: the later nights decide nothing
        as_of = sent + timedelta(days=night)
        ledger = pd.DataFrame(history, columns=HISTORY_COLUMNS)
        decision = due_dunning_steps(invoices, clients, ledger, as_of, delays,
                                     escalation_to="collections@corp.example", start=start)
        due = decision.to_reserve
        if due.empty:
            continue
        composed = compose_dunning_emails(due, ledger.assign(attempt_as_of=ledger["as_of"]), SENDER,
                                          as_of=as_of)
        assert not composed.failures, composed.failures
        for row, email in zip(due.itertuples(index=False), composed.emails, strict=True):
            history.append((row.subject_id, row.step, row.step_rank, as_of.isoformat(), "sent"))
            locale, due_after = cases[row.subject_id]
            out[(locale, due_after)].append((as_of, sent + timedelta(days=due_after), str(row.step), email))
    return out


@pytest.mark.xdist_group("dunning-calendars")  # one worker simulates each calendar once
@pytest.mark.parametrize("locale", LOCALES)
@pytest.mark.parametrize(("start", "due_after"), CALENDARS)
def test_dunning_calendar_never_says_overdue_before_the_due_date(locale, start, due_after):
    emails = dunning_calendars(start)[(locale, due_after)]
    assert [step for _, _, step, _ in emails] == ["REMINDED_1", "REMINDED_2", "OVERDUE"]
    for as_of, due_date, step, email in emails:
        reader = "en" if step == DunningStep.OVERDUE else locale
        days_overdue = (as_of - due_date).days
        assert_no_internal_words(email)
        for text in bodies(email):
            if days_overdue <= 0:
                assert not OVERDUE_WORDS[reader].search(text), (as_of, due_date, step, text[:500])
        if days_overdue > 0 and step == DunningStep.REMINDED_2:
            expected = (f"is now {count_days(days_overdue, 'en')} overdue" if reader == "en"
                        else f"lleva {count_days(days_overdue, 'es')} de retraso")
            assert expected in email.body_text
        if days_overdue > 0 and step == DunningStep.OVERDUE:
            assert f"is {count_days(days_overdue, 'en')} overdue" in email.subject
        if days_overdue < 0:  # before the due date: when payment falls due, relative to the run
            when = relative_day(-days_overdue, reader)
            assert (f"falls due {when}" if reader == "en" else f"vence {when}") in email.body_text.lower()
        if days_overdue == 0:
            assert ("is due today" if reader == "en" else "vence hoy") in email.body_text.lower()


def reminder(step: str, locale: str, as_of: date, due_date: date | None, **extra) -> OutgoingEmail:
    look = extra.pop("look", EmailLook())
    locale = "en" if step == DunningStep.OVERDUE else locale  # escalations are in English
    context = dunning_context(
        step=step, invoice_id="inv-1", number="F-1", amount=extra.pop("amount", "980.40"),
        currency=extra.pop("currency", "EUR"), issue_date=date(2027, 1, 1), due_date=due_date,
        client_id="cl-1", client_name=extra.pop("client_name", "Ñandú SL"),
        client_email="ap@x.example", history=extra.pop("history", []), paragraph="",
        as_of=as_of, locale=locale, look=look)
    kind = "escalation" if step == DunningStep.OVERDUE else "dunning"
    subject, text, html = render(kind, locale, context, step, look)
    return OutgoingEmail("dunning/inv-1/" + step, "ap@x.example", subject, text, html, "<a@b.example>")


@settings(max_examples=examples(120), deadline=None)
@given(locale=st.sampled_from(SUPPORTED_LOCALES),
       step=st.sampled_from(["REMINDED_1", "REMINDED_2", "OVERDUE"]),
       due_in=st.one_of(st.integers(-400, 400), st.none()))
def test_any_day_against_any_due_date(locale, step, due_in):
    as_of = date(2027, 3, 1)
    due_date = None if due_in is None else as_of + timedelta(days=due_in)
    email = reminder(step, locale, as_of, due_date)
    reader = "en" if step == "OVERDUE" else locale
    assert_no_internal_words(email)
    overdue_said = any(OVERDUE_WORDS[reader].search(t) for t in bodies(email))
    assert overdue_said == (due_in is not None and due_in < 0)
    for text in bodies(email):
        assert not WRONG_COUNT.search(text), text[:500]


@pytest.mark.parametrize(("locale", "greeting"), [("en", "Hello,"), ("es", "Buenos días:"),
                                                  ("de", "Sehr geehrte Damen und Herren,")])
def test_a_client_without_a_name_is_greeted_without_one(locale, greeting):
    email = reminder("REMINDED_1", locale, date(2027, 3, 1), date(2027, 2, 1), client_name="")
    assert email.body_text.startswith(greeting)
    assert "Dear ," not in email.body_html and "Estimado/a :" not in email.body_html


@pytest.mark.parametrize("locale", SUPPORTED_LOCALES)
def test_the_second_reminder_asks_once(locale):
    email = reminder("REMINDED_2", locale, date(2027, 3, 1), date(2027, 2, 1))
    ask = {"en": "arrange payment", "es": "realice el pago", "de": "veranlassen Sie die Zahlung"}[locale]
    assert email.body_text.count(ask) == 1 and email.body_html.count(ask) == 1


def test_the_escalation_names_each_step_with_its_date_and_outcome():
    history = [{"step": "REMINDED_1", "as_of": "2027-02-08", "status": "sent"},
               {"step": "REMINDED_2", "as_of": "2027-02-13", "status": "adopted"}]
    email = reminder("OVERDUE", "en", date(2027, 3, 1), date(2027, 2, 15), history=history)
    assert "First reminder, 8 February 2027: sent" in email.body_text
    assert ("Second reminder, 13 February 2027: handled outside dueflow, before it took over"
            in email.body_text)
    assert "Ñandú SL" in email.body_text and "ap@x.example" in email.body_text
    assert "14 days overdue" in email.subject and "needs a person" not in email.subject
    assert not re.search(r"\d{4}-\d{2}-\d{2}", email.body_text + email.body_html)  # one date style
    assert_no_internal_words(email)


# --------------------------------------------------------------------------- money


@pytest.mark.parametrize(("currency", "amount", "en", "es"), [
    ("EUR", "1450", "€1,450.00", "1.450,00\xa0€"),
    ("EUR", "1234567.5", "€1,234,567.50", "1.234.567,50\xa0€"),
    ("USD", "4300.5", "$4,300.50", "4.300,50\xa0US$"),
    ("JPY", "145000", "¥145,000", "145.000\xa0JPY"),
    ("KWD", "12.345", "KWD12.345", "12,345\xa0KWD"),
    ("KWD", "1250", "KWD1,250.000", "1.250,000\xa0KWD"),
])
def test_money_in_the_emails_uses_each_currency_minor_units(currency, amount, en, es):
    for locale, shown in (("en", en), ("es", es)):
        for step in ("REMINDED_1", "REMINDED_2"):
            email = reminder(step, locale, date(2027, 3, 1), date(2027, 2, 1),
                             amount=amount, currency=currency)
            assert shown in email.body_text and shown in email.body_html
            assert shown.replace("\xa0", " ") in email.subject  # a subject is one plain line
            if currency == "JPY":
                assert not re.search(r"145[.,]000[.,]00", email.body_text)  # no decimals for yen


def test_every_packaged_locale_names_every_step_and_outcome():
    from dueflow.tasks.core.locales import WORDS
    from dueflow.tasks.core.statuses import LedgerStatus

    for code, words in WORDS.items():
        assert set(words.steps) == {*DunningStep}, code
        assert set(words.outcomes) == {*LedgerStatus}, code
        assert all(name.strip() for name in [*words.steps.values(), *words.outcomes.values()]), code
