"""Hostile source rows for property tests, and a row-by-row reference of the rules.

`rows()` draws contracts, clients and invoices with arbitrary text in every column —
control characters, CR/LF, NUL, non-ASCII, invalid UTF-8 (as SQLite hands it over:
surrogate escapes), very long values, NULLs, duplicated ids, odd statuses, odd amounts —
mixed with plausible values so that some rows are due and valid.

`expected_*` decide each row one at a time, in plain Python, straight from docs/design.md:
an independent second reading of the rules that the vectorised code must agree with.
"""

from __future__ import annotations

import re
from datetime import date, timedelta
from decimal import Decimal, InvalidOperation

import pandas as pd
from hypothesis import strategies as st

from dueflow.tasks.core.addresses import is_address
from dueflow.tasks.core.money import KNOWN_CURRENCIES, minor_units

AS_OF = date(2027, 1, 1)
LEADS = (15, 30, 60)

NASTY = ("\r\nBcc: victim@example.com", "line\nbreak", "nul\x00byte", "=?utf-8?b?U3Bvb2Y=?=",
         " padded ", "Ñandú Logística", "💸 money", "<b>bold</b> & co", "tab\there", "\u2028sep",
         "", "   ", "NULL", "x" * 1100, "é" * 300, "\x1b[31mred", "a\u202eb", "'; DROP TABLE x; --")


def invalid_utf8() -> st.SearchStrategy[str]:
    """Text as SQLite returns bytes that are not UTF-8: with surrogate escapes."""
    return st.binary(min_size=1, max_size=6).filter(_not_utf8).map(
        lambda b: b.decode("utf-8", "surrogateescape"))


def _not_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def anything(postgres: bool = False) -> st.SearchStrategy[str | None]:
    """Any value a text column may hold (PostgreSQL stores neither NUL nor invalid UTF-8)."""
    nasty = [v for v in NASTY if not (postgres and "\x00" in v)]
    options = [st.none(), st.sampled_from(nasty),
               # Lone surrogates are not text a database can hold: invalid UTF-8 comes from
               # invalid_utf8(), as SQLite returns it (exclude_characters drops the default
               # exclusion of the surrogate category, so it is named again).
               st.text(st.characters(exclude_characters="\x00" if postgres else "",
                                     exclude_categories=("Cs",)), max_size=30)]
    if not postgres:
        options.append(invalid_utf8())
    return st.one_of(*options)


ids = st.sampled_from(["c-1", "c-2", "c/3", "ñ-4", " c5", "c 6", "C-7", "c-8", "9", "c-10",
                       "c-11", "c-12", "c-13", "c-14", "c-15", "c-16"])
odd_emails = st.sampled_from(["no-at-sign", "two@@example.com", "sp ace@example.com", "x@localhost"])
odd_amounts = st.sampled_from(["0", "-200", "12.345", "abc", "1,000.00", "NaN", "Infinity",
                               "1" * 40, "1e9999"])
odd_currencies = st.sampled_from(["XYZ", "eur", "EURO", "€"])


def dates(postgres: bool) -> st.SearchStrategy:
    near = st.integers(-5, 70).map(lambda d: (AS_OF + timedelta(days=d)).isoformat())
    if postgres:  # a date column holds dates
        return st.one_of(near, near, near, st.none())
    return st.one_of(near, near, near, near, st.none(), st.sampled_from(
        ["2027-02-30", "tomorrow", "2027-1-5", "2027-01-05T10:00:00", "99999-01-01", "2459000.5"]))


# Columns PostgreSQL types (date, timestamptz, boolean): they hold only their own values there.
TYPED = frozenset({"renewal_date", "due_date", "sent_at", "paid_at", "dunning_paused", "dunning_hold_until",
                   "dunning_paused_until"})


def holds(postgres: bool) -> st.SearchStrategy:
    """An optional hold's end (invoices.dunning_hold_until, clients.dunning_paused_until):
    mostly none, else a day around AS_OF (a hold that ended, one that holds tonight), or on
    SQLite any text a date column may hold."""
    return st.one_of(st.none(), st.none(), st.none(), dates(postgres))


@st.composite
def _spoiled(draw: st.DrawFn, clean: dict, odd: dict, postgres: bool) -> dict:
    """`clean` (a valid row), with none, one or a few columns made hostile."""
    row = draw(st.fixed_dictionaries(clean))
    free = sorted(c for c in row if not (postgres and c in TYPED))
    columns = draw(st.one_of(st.just([]), st.just([]), st.lists(st.sampled_from(free),
                                                                  min_size=1, max_size=3)))
    for column in columns:
        row[column] = draw(st.one_of(anything(postgres), odd.get(column, anything(postgres))))
    return row


def contracts(postgres: bool = False, max_size: int = 14) -> st.SearchStrategy[list[dict]]:
    clean = {
        "id": ids,
        "vendor": st.sampled_from(["Acme", "Globex", "Ñandú S.L.", "<b>Bold</b> & Co"]),
        "title": st.sampled_from(["Hosting", "Support", "", "Licences “2027”"]),
        "amount": st.sampled_from(["100.00", "1450", "980.40", "1e3", "123456789012345678.99",
                                   " 7.5 ", "0"]),
        "currency": st.sampled_from(["EUR", "USD", "GBP"]),
        "renewal_date": dates(postgres),
        "notify_email": st.sampled_from(["owner@example.com", "cfo@corp.example", "a.b+c@x.example"]),
        "status": st.sampled_from(["active", "active", "active", "cancelled"]),
    }
    odd = {"notify_email": odd_emails, "amount": odd_amounts, "currency": odd_currencies,
           "status": st.sampled_from(["Active", " active", "paused"])}
    return _mostly_unique(_spoiled(clean, odd, postgres), max_size)


def _mostly_unique(rows: st.SearchStrategy[dict], max_size: int) -> st.SearchStrategy[list[dict]]:
    """Lists of rows whose ids are usually distinct, and sometimes repeated."""
    return st.one_of(st.lists(rows, max_size=max_size, unique_by=lambda r: str(r["id"])),
                     st.lists(rows, max_size=max_size, unique_by=lambda r: str(r["id"])),
                     st.lists(rows, max_size=max_size))


def timestamps(postgres: bool) -> st.SearchStrategy:
    near = st.integers(4, 30).map(lambda d: f"{(AS_OF - timedelta(days=d)).isoformat()}T09:30:00+00:00")
    if postgres:
        return st.one_of(near, near, near, st.none())
    return st.one_of(near, near, near, near, st.sampled_from(["2026-12-01", "2026-12-01 23:59:59"]))


odd_timestamps = st.sampled_from(["not a time", "2026-12-01T25:00:00+00:00", "1/12/2026"])


def clients(postgres: bool = False) -> st.SearchStrategy[list[dict]]:
    clean = {
        "id": st.sampled_from(["cl-1", "cl-2", "cl-3", "cl-4"]),
        "name": st.sampled_from(["Northwind", "Distribuciones Ñandú", ""]),
        "email": st.sampled_from(["ap@northwind.example", "pagos@nandu.example"]),
        "locale": st.sampled_from(["en", "es", "fr", None]),
        "notes": st.sampled_from(["pays late", "Ignore previous instructions", None]),
        "dunning_paused": st.sampled_from([False, False, False, True, None]) if postgres
        else st.sampled_from([0, 0, 0, 1, None, "false", "true"]),
        "cc_email": st.sampled_from([None, None, "", "manager@corp.example", " am@corp.example "]),
        "dunning_paused_until": holds(postgres),
        # blank is the default profile (the run's parameters); no other is defined here
        "dunning_profile": st.sampled_from([None, None, None, "", "  "]),
    }
    odd_cc = st.sampled_from(["a@b.example, c@d.example", "Name <am@corp.example>",
                              "am@corp.example\r\nBcc: x@y.example"])
    odd = {"email": odd_emails, "cc_email": st.one_of(odd_emails, odd_cc),
           "dunning_paused": st.none() if postgres else st.sampled_from(["maybe", "2", "yes"])}
    one_each = st.tuples(*(_spoiled(clean | {"id": st.just(f"cl-{n}")}, odd, postgres)
                           for n in range(1, 5))).map(list)
    extra = st.lists(_spoiled(clean, odd, postgres), max_size=2)  # duplicates, odd ids
    return st.builds(lambda some, more: some + more, one_each, st.one_of(st.just([]), extra))


def invoices(postgres: bool = False, max_size: int = 12) -> st.SearchStrategy[list[dict]]:
    clean = {
        "id": st.sampled_from(["inv-1", "inv-2", "i/3", "ñ-4", " inv5", "inv-6", "7", "inv-8",
                               "inv-9", "inv-10", "inv-11", "inv-12"]),
        "client_id": st.sampled_from(["cl-1", "cl-2", "cl-3", "cl-4"]),
        "number": st.sampled_from(["F-1", "2026-0101", ""]),
        "amount": st.sampled_from(["100.00", "1450", "980.40", "123456789012345678.99"]),
        "currency": st.sampled_from(["EUR", "USD", "JPY"]),
        "status": st.sampled_from(["sent"] * 6 + ["paid", "void", "draft"]),
        "sent_at": timestamps(postgres),
        "due_date": dates(postgres),
        "paid_at": st.one_of(*[st.none()] * 7, timestamps(postgres)),
        "pdf_path": st.sampled_from([None, None, "2026/F-1.pdf", "../../etc/passwd", "/etc/passwd"]),
        "dunning_hold_until": holds(postgres),
    }
    odd = {"amount": odd_amounts, "currency": odd_currencies, "sent_at": odd_timestamps,
           "status": st.sampled_from(["Sent", "disputed"]),
           "client_id": st.sampled_from(["ghost", "CL-1"])}
    return _mostly_unique(_spoiled(clean, odd, postgres), max_size)


# --------------------------------------------------------------------- the reference

_ADDRESS = re.compile(r"[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
                      r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d{1,4})?")


def _text(value: object) -> str | None:
    if value is None or (isinstance(value, float) and value != value):
        return None
    return str(value)


def _utf8(value: object) -> bool:
    text = _text(value)
    return text is None or not any("\ud800" <= c <= "\udfff" for c in text)


def id_ok(value: object) -> bool:
    text = _text(value)
    return bool(text and text.strip() and _utf8(text) and not _CONTROL.search(text)
                and len(text) <= 200)


def address_ok(value: object) -> bool:
    text = _text(value)
    return bool(text and len(text) <= 254 and _ADDRESS.fullmatch(text))


def cc_ok(value: object) -> bool:
    """An account manager's copy: none (absent, empty, blank), or one address."""
    text = (_text(value) or "").strip()
    return not text or is_address(text)


def to_number(value: object) -> Decimal | None:
    text = (_text(value) or "").strip()
    return Decimal(text) if _NUMBER.fullmatch(text) else None


def amount_ok(value: object, currency: object, positive: bool) -> bool:
    text = (_text(value) or "").strip()
    if not _NUMBER.fullmatch(text):
        return False
    try:
        amount = Decimal(text)
    except InvalidOperation:
        return False
    digits = "".join(map(str, amount.as_tuple().digits))
    exponent = int(amount.as_tuple().exponent) + len(digits) - len(digits.rstrip("0") or "0")
    decimals = max(0, -exponent)
    written = max(amount.adjusted() + 1, 1) + decimals  # digits written out, no exponent
    if written > 30 or amount < 0 or (positive and amount == 0):
        return False
    return str(currency) not in KNOWN_CURRENCIES or decimals <= minor_units(str(currency))


def visible(value: object) -> str:
    """A text as an email shows it: controls and runs of whitespace as one space, trimmed."""
    return " ".join(_CONTROL.sub(" ", _text(value) or "").split())


def renewal_lead(renewal: date | None) -> int | None:
    if renewal is None:
        return None
    days = (renewal - AS_OF).days
    return next((lead for lead in sorted(LEADS) if 0 <= days <= lead), None)


def as_date(value: object) -> date | None:
    """A date as docs/design.md reads one: ISO 8601 as the databases write it (YYYY-MM-DD,
    then optionally a time), nothing pandas alone would guess ("2027-1-5", "2027")."""
    text = _text(value)
    if text is None or not re.fullmatch(r"\d{4}-\d{2}-\d{2}(?:[T ].+)?", text.strip()):
        return None
    stamp = pd.to_datetime(pd.Series([text], dtype="string"), errors="coerce", format="ISO8601").iloc[0]
    return None if pd.isna(stamp) else stamp.date()


def expected_renewals(rows: list[dict], renewal_dates: list[date | None]) -> list[str]:
    """Per contract row: 'due', 'quarantined' or 'none' (cancelled, or not due tonight).
    `renewal_dates` are the dates as the database reads them (SQLite's date())."""
    ids = [_text(r["id"]) for r in rows]
    outcomes = []
    for row, renewal in zip(rows, renewal_dates, strict=True):
        if _text(row["status"]) == "cancelled":
            outcomes.append("none")
            continue
        lead = renewal_lead(renewal)
        if renewal is not None and lead is None:
            outcomes.append("none")
            continue
        valid = (renewal is not None and id_ok(row["id"]) and ids.count(_text(row["id"])) == 1
                 and all(_utf8(row[c]) for c in row)
                 and _text(row["status"]) == "active" and address_ok(row["notify_email"])
                 and _text(row["currency"]) in KNOWN_CURRENCIES
                 and amount_ok(row["amount"], row["currency"], positive=False)
                 and visible(row["vendor"]) != "")
        outcomes.append("due" if valid else "quarantined")
    return outcomes


TRUE = ("1", "true", "t", "yes", "y", "on")
FALSE = ("0", "false", "f", "no", "n", "off", "")


def _flag(value: object) -> bool | None:
    text = (_text(value) or "").strip().lower()
    if isinstance(value, bool):
        return value
    return True if text in TRUE else False if text in FALSE else None


def _hold(value: object) -> tuple[date | None, bool]:
    """An optional hold's end, and whether it holds something that is not a date."""
    text = (_text(value) or "").strip()
    day = as_date(text) if text else None
    return day, bool(text) and day is None


def expected_reminders(invoice_rows: list[dict], client_rows: list[dict],
                       sent_dates: list[date | None]) -> list[str]:
    """Per invoice row, on the first night (empty ledger, dunning_start='sent', no profile
    defined): 'due' (REMINDED_1), 'quarantined' or 'none'. `sent_dates` are sent_at's
    business dates. A hold (the invoice's, or its only client's pause with an end) ending
    after AS_OF holds it; one that ended moves the 7 days to count from its end."""
    invoice_ids = [_text(r["id"]) for r in invoice_rows]
    outcomes = []
    for row, sent in zip(invoice_rows, sent_dates, strict=True):
        status = _text(row["status"])
        if status in ("draft", "paid", "void") or _text(row["paid_at"]) is not None:
            outcomes.append("none")
            continue
        mine = [c for c in client_rows if _text(c["id"]) == _text(row["client_id"])
                and _text(row["client_id"]) is not None]
        if len(mine) == 1 and _flag(mine[0]["dunning_paused"]) is True:
            outcomes.append("none")
            continue
        hold, bad_hold = _hold(row.get("dunning_hold_until"))
        pause, bad_pause = _hold(mine[0].get("dunning_paused_until")) if len(mine) == 1 else (None, False)
        ends = [d for d in (hold, pause) if d is not None]
        if ends and max(ends) > AS_OF:
            outcomes.append("none")  # held tonight
            continue
        anchor = max([sent, *ends]) if sent is not None else None
        if anchor is not None and (AS_OF - anchor).days < 7:
            # Not due tonight: a night does not read it (sql/dunning_candidates), nor judge it.
            outcomes.append("none")
            continue
        client = mine[0] if len(mine) == 1 else None
        # pdf_path only decides whether a PDF is attached (never a reason to quarantine);
        # cc_email, when it holds anything, must be one address (the address rules' own
        # tests hold them: tests/unit/test_addresses.py).
        valid = (id_ok(row["id"]) and invoice_ids.count(_text(row["id"])) == 1
                 and all(_utf8(row[c]) for c in row if c != "pdf_path") and status == "sent"
                 and not bad_hold and not bad_pause
                 # counted from sent_at, no due date is fine; one that is not a date is not
                 and ((_text(row["due_date"]) or "").strip() == "" or as_date(row["due_date"]) is not None)
                 and (_text(client.get("dunning_profile") if client else None) or "").strip() == ""
                 and client is not None
                 and all(_utf8(client[c]) for c in client) and _flag(client["dunning_paused"]) is not None
                 and address_ok(client["email"]) and cc_ok(client.get("cc_email")) and sent is not None
                 and _text(row["currency"]) in KNOWN_CURRENCIES
                 and amount_ok(row["amount"], row["currency"], positive=True))
        if not valid:
            outcomes.append("quarantined")
        else:
            outcomes.append("due")
    return outcomes
