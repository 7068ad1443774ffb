"""What the client still owes on each invoice (docs/design.md, "What the client still owes"):
the invoice's amount less what was paid and credited on it up to the night, read the way
the company keeps it — an `amount_open` or `amount_paid` column of the invoice, or the sums
of a payments relation that the database made in the same read (sql/fragments/payments_of:
integers of 10^-4, exact). Pure and vectorised: whole columns of int64 units, no loop over
rows and never a float.

What cannot be set against the invoice without a guess — a payment in another currency, a
payment that cannot be read, more paid than owed, credit notes above the invoice — is a
problem the invoice is quarantined with (invoices.INVOICE_REASONS); an open amount of zero
ends dunning as `paid` does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dueflow.tasks.core.decide import column_text
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.money import KNOWN_CURRENCIES, SUM_PLACES, minor_units
from dueflow.tasks.core.text import present_texts, stripped

# The columns sql/dunning_candidates (and invoices_by_id, extract_invoices) add to an invoice.
PAYMENT_COLUMNS = ("amount_open", "amount_paid", "paid_e4", "credited_e4", "paid_last", "paid_currency_low",
                   "paid_currency_high", "payments_unreadable", "payment_state")
_SCALE = 10**SUM_PLACES


@dataclass(frozen=True)
class Owed:
    """Per invoice (aligned with its rows): the open amount and what it was read from."""

    open: pd.Series  # decimal text: what the client still owes (the amount where nothing is known)
    received: pd.Series  # decimal text of what was paid (NA: nothing)
    credited: pd.Series  # decimal text of what credit notes took off (NA: none)
    received_on: pd.Series  # the last payment's date, YYYY-MM-DD (NA: none, or from a column)
    settled: pd.Series  # bool: nothing left to pay (dunning ends, as for `paid`)
    problem: pd.Series  # why it cannot be told without a guess (NA: it can)
    state: pd.Series  # what it was read from, as the reservation compares it (text, '' when none)


def units_of(values: pd.Series) -> pd.Series:
    """Decimal text as int64 units of 10^-4 (Int64; NA where missing or not such a decimal:
    [+-], up to 14 digits, up to 4 decimals). Over the column's array with numpy."""
    present, texts = present_texts(values)
    units = pd.Series(pd.NA, index=values.index, dtype="Int64")
    if not texts:
        return units
    text = np.strings.strip(np.asarray(texts, dtype=str))
    minus = np.strings.startswith(text, "-")
    body = np.where(minus | np.strings.startswith(text, "+"), np.strings.slice(text, 1, None), text)
    whole, _dot, fraction = np.strings.partition(body, ".")
    fraction = np.strings.rstrip(fraction, "0")  # numeric without a scale: 18.6400000000000000
    ascii_digits = np.strings.isdigit(np.strings.encode(whole, "ascii", "replace"))
    fraction_digits = (fraction == "") | np.strings.isdigit(np.strings.encode(fraction, "ascii", "replace"))
    readable = (ascii_digits & fraction_digits & (np.strings.str_len(whole) <= 14)
                & (np.strings.str_len(fraction) <= SUM_PLACES))
    if readable.any():
        value = (whole[readable].astype(np.int64) * _SCALE
                 + np.strings.ljust(fraction[readable], SUM_PLACES, "0").astype(np.int64))
        read = np.full(len(texts), 0, dtype=np.int64)
        read[readable] = np.where(minus[readable], -value, value)
        where = np.flatnonzero(present)
        units.iloc[where[readable]] = read[readable]
    return units


def _sums(values: pd.Series) -> pd.Series:
    """The database's sums and counts (integers; text on PostgreSQL) as Int64 (a float's
    `.0`, where a frame made one of a column with NULLs, is the integer it holds)."""
    text = pd.Series(values, dtype="string").str.strip()
    return text.str.replace(r"\.0*\Z", "", regex=True).astype("Int64")


def decimal_texts(units: pd.Series, currencies: pd.Series) -> pd.Series:
    """Int64 units of 10^-4 as decimal text with the currency's minor units (JPY 0, EUR 2),
    more only where the value has more (a payment of 0.001 EUR is not rounded away)."""
    present = units.notna()
    shown = pd.Series(pd.NA, index=units.index, dtype="string")
    if not present.any():
        return shown
    value = units[present].astype("int64").to_numpy()
    magnitude = np.abs(value)
    whole = (magnitude // _SCALE).astype(str)
    fraction = np.strings.zfill((magnitude % _SCALE).astype(str), SUM_PLACES)
    sign = np.where(value < 0, "-", "")
    currency = currencies[present].astype(object).to_numpy()
    known = pd.Series(currency).isin(KNOWN_CURRENCIES).to_numpy(dtype=bool)
    places = pd.Series(currency).map({c: minor_units(c) for c in set(currency[known])}).fillna(
        SUM_PLACES).astype(int).to_numpy()
    # Trailing zeros beyond the currency's own decimals go; those it has stay (980.40).
    kept = np.strings.rstrip(fraction, "0")
    for unit in np.unique(places):
        rows = places == unit
        kept[rows] = np.strings.ljust(kept[rows], int(unit), "0")
    dot = np.where(np.strings.str_len(kept) > 0, ".", "")
    text = np.strings.add(np.strings.add(sign, whole), np.strings.add(dot, kept))
    shown[present] = text
    return shown


def _nothing_paid(rows: pd.DataFrame) -> Owed:
    none = pd.Series(pd.NA, index=rows.index, dtype="string")
    return Owed(open=stripped(column_text(rows, "amount")), received=none, credited=none, received_on=none,
                settled=pd.Series(False, index=rows.index), problem=none,
                state=column_text(rows, "payment_state").fillna(""))


def owed(rows: pd.DataFrame) -> Owed:
    """What each invoice still owes, from its amount and PAYMENT_COLUMNS (absent: nothing
    known, the amount is open)."""
    index = rows.index
    given = [column_text(rows, c).notna() for c in ("amount_open", "amount_paid", "paid_e4", "credited_e4",
                                                     "payments_unreadable", "paid_currency_low")]
    if not any(g.any() for g in given):  # nothing known of any payment: the amount is open
        return _nothing_paid(rows)
    currency = column_text(rows, "currency")
    amount = units_of(column_text(rows, "amount"))
    open_given, paid_given = column_text(rows, "amount_open"), column_text(rows, "amount_paid")
    open_column, paid_column = units_of(open_given), units_of(paid_given)
    paid = _sums(column_text(rows, "paid_e4"))
    credited = _sums(column_text(rows, "credited_e4"))
    unreadable = _sums(column_text(rows, "payments_unreadable")).fillna(0)
    low, high = column_text(rows, "paid_currency_low"), column_text(rows, "paid_currency_high")
    by_payments = paid.notna() | credited.notna() | (unreadable > 0) | low.notna()
    # A column of the invoice, where the mapping gives one, says it; else the payments do.
    by_open, by_paid = open_given.notna(), paid_given.notna()
    received = paid.where(~by_paid, paid_column).where(~by_open, amount - open_column)
    credit = credited.where(~(by_open | by_paid))
    known = by_open | by_paid | by_payments
    remaining = amount - received.fillna(0) - credit.fillna(0)

    problem = pd.Series(pd.NA, index=index, dtype="string")

    def say(where: pd.Series, words: pd.Series | str) -> None:
        hit = where.fillna(False).astype(bool) & problem.isna()
        if hit.any():
            problem[hit] = words[hit] if isinstance(words, pd.Series) else words

    other = low.where(low != currency, high)
    say(by_open & open_column.isna(), "amount_open is not a number: " + open_given.fillna(""))
    say(by_paid & paid_column.isna(), "amount_paid is not a number: " + paid_given.fillna(""))
    say(~(by_open | by_paid) & (unreadable > 0),
        unreadable.astype("string") + " payment(s) of this invoice cannot be read (amount not a number, or no"
        " currency or received_at): nothing is guessed")
    say(~(by_open | by_paid) & by_payments & ((low != currency) | (high != currency)),
        "a payment in " + other.fillna("") + " on an invoice in " + currency.fillna("")
        + ": not converted, nothing is guessed")
    say(known & amount.isna(), "amount " + column_text(rows, "amount").fillna("")
        + " cannot be set against its payments")
    say(credit.notna() & (credit > amount), "credit notes of " + decimal_texts(credit, currency).fillna("")
        + " exceed the invoice's amount " + decimal_texts(amount, currency).fillna(""))
    say(known & (remaining < 0), "overpaid: " + decimal_texts(received.fillna(0) + credit.fillna(0),
                                                              currency).fillna("")
        + " paid and credited on an invoice of " + decimal_texts(amount, currency).fillna(""))
    usable = known & problem.isna() & remaining.notna()
    open_text = stripped(column_text(rows, "amount")).where(~usable.fillna(False).astype(bool),
                                                            decimal_texts(remaining.where(usable), currency))
    state = column_text(rows, "payment_state").fillna("")
    return Owed(open=open_text,
                received=decimal_texts(received.where(usable & (received > 0)), currency),
                credited=decimal_texts(credit.where(usable & (credit > 0)), currency),
                received_on=column_text(rows, "paid_last").str.slice(0, 10).where(usable & by_payments),
                settled=(usable & (remaining == 0)).fillna(False).astype(bool),
                problem=problem, state=state)
