"""Fees, statutory interest and pay-by dates (docs/configuration.md, "Fees, interest and
pay-by dates"): opt-in per profile and step, stated on their own lines of a reminder and
never added to the invoice or to what the client owes on it.

- a fixed fee per step, per currency (`fees = { REMINDED_2 = "EUR 10, GBP 8" }`);
- statutory interest for late payment (Directive 2011/7/EU, B2B): the reference rate in
  force each day (DUEFLOW_REFERENCE_RATES, dated: it changes every half-year) plus 8
  points, a year of 365 days, on the open amount, for each day after the due date; and
  the flat compensation for recovery costs (DUEFLOW_LATE_COMPENSATION, 40 EUR), once;
- a pay-by date: the send date plus N business days of the company's calendar.

Pure and vectorised: exact integers (Python ints in object arrays, whole columns at once),
rounded half up to each currency's minor units (JPY none), never a float.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal

import numpy as np

from dueflow.tasks.core.calendar import BusinessCalendar
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.money import KNOWN_CURRENCIES, minor_units, parse_minimums, to_decimal
from dueflow.tasks.core.open_amount import decimal_texts, units_of

STATUTORY_POINTS = Decimal(8)  # 2011/7/EU art. 2(6): the reference rate plus at least 8 points
DAYS_A_YEAR = 365
_SCALE = 10**4  # amounts and rates in units of 10^-4 (open_amount.units_of)
CHARGE_COLUMNS = ("fee", "interest", "interest_rate", "interest_days", "compensation", "pay_by")


@dataclass(frozen=True)
class StepCharges:
    """What one step of a profile states besides the open amount."""

    fees: Mapping[str, Decimal] = field(default_factory=dict)  # per currency
    interest: bool = False  # statutory interest and the flat compensation
    pay_within: int | None = None  # business days from the send date


@dataclass(frozen=True)
class Rates:
    """The reference rates, each in force from its date (percent a year), and the flat
    compensation per currency."""

    reference: tuple[tuple[date, Decimal], ...] = ()
    compensation: Mapping[str, Decimal] = field(default_factory=dict)


def parse_rates(text: str | None, name: str = "DUEFLOW_REFERENCE_RATES") -> tuple[tuple[date, Decimal], ...]:
    """`2026-01-01 2.15, 2026-07-01 2.15`: the reference rate in percent a year from each
    date on (the ECB's main refinancing rate, or the country's). A ValueError line
    otherwise."""
    if text is None or not text.strip():
        return ()
    rates: dict[date, Decimal] = {}
    for part in text.split(","):
        words = part.split()
        try:
            day = date.fromisoformat(words[0]) if len(words) == 2 else None
        except ValueError:
            day = None
        rate = to_decimal(words[1]) if len(words) == 2 else None
        if day is None or rate is None or not Decimal(-10) <= rate <= Decimal(100) or day in rates \
                or rate != rate.quantize(Decimal("0.0001")):
            raise ValueError(f"{name}={text[:80]!r}: write each rate once as DATE PERCENT, comma separated,"
                             " e.g. '2026-01-01 2.15, 2026-07-01 2.15' (the reference rate in percent a year"
                             " from that date on, up to 4 decimals)")
        rates[day] = rate
    return tuple(sorted(rates.items()))


def parse_compensation(text: str | None) -> dict[str, Decimal]:
    """DUEFLOW_LATE_COMPENSATION: `EUR 40, GBP 40`, the flat sum per currency."""
    return parse_minimums(text, "DUEFLOW_LATE_COMPENSATION", "compensation")


def _money_units(values: Sequence[Decimal | None], index: pd.Index) -> pd.Series:
    return units_of(pd.Series([None if v is None else str(v) for v in values], index=index, dtype="string"))


def _round_to_minor(numerator: np.ndarray, denominator: int, currency: pd.Series) -> pd.Series:
    """numerator / denominator (in units of 10^-4), rounded half up to the currency's minor
    units, as Int64 units of 10^-4."""
    known = currency.where(currency.isin(KNOWN_CURRENCIES))
    places = known.map({c: minor_units(c) for c in known.dropna().unique()}).fillna(2).astype(int).to_numpy()
    step = (10 ** (4 - places)).astype(object)  # units of 10^-4 per minor unit
    whole = denominator * step
    rounded = (2 * numerator + whole) // (2 * whole) * step
    return pd.Series(rounded, index=currency.index).astype("Int64")


def charges(due: pd.DataFrame, steps: Mapping[tuple[str, str], StepCharges], rates: Rates, as_of: date,
            calendar: BusinessCalendar | None) -> pd.DataFrame:
    """Per due row (profile, step, amount: the open amount, currency, due_date), what it
    states besides: fee, interest (decimal text), interest_rate (percent a year, the rate of
    the night), interest_days, compensation, pay_by (a date); NA where none. `steps` maps
    (profile, step) to its charges (absent: none)."""
    index = due.index
    out = pd.DataFrame({column: pd.Series(pd.NA, index=index, dtype="string") for column in CHARGE_COLUMNS})
    out["interest_days"] = pd.Series(pd.NA, index=index, dtype="Int64")
    out["pay_by"] = pd.Series(pd.NaT, index=index, dtype="datetime64[ns]")
    if due.empty or not steps:
        return out
    profile, step = due["profile"].astype("string").fillna(""), due["step"].astype("string")
    currency = due["currency"].astype("string")
    fee_units = pd.Series(pd.NA, index=index, dtype="Int64")
    interested = pd.Series(False, index=index)
    within = pd.Series(pd.NA, index=index, dtype="Int64")
    for (name, step_name), said in steps.items():  # per profile and step, not per row
        rows = (profile == name) & (step == step_name)
        if not rows.any():
            continue
        for code, fee in said.fees.items():
            fee_units[rows & (currency == code)] = int(fee * _SCALE)
        interested |= rows & said.interest
        if said.pay_within is not None:
            within[rows] = said.pay_within
    out["fee"] = decimal_texts(fee_units, currency)
    if interested.any():
        out = _interest(due, interested.fillna(False).astype(bool), rates, as_of, out)
    if within.notna().any():
        out["pay_by"] = _pay_by(within, as_of, calendar)
    return out


def _interest(due: pd.DataFrame, wanted: pd.Series, rates: Rates, as_of: date,
              out: pd.DataFrame) -> pd.DataFrame:
    """Interest on the open amount for each day from the day after the due date to the
    night, at the reference rate in force that day plus 8 points; a year of 365 days."""
    due_day = pd.to_datetime(due["due_date"], errors="coerce")
    late = (pd.Timestamp(as_of) - due_day).dt.days
    wanted = wanted & (late > 0).fillna(False).astype(bool) & bool(rates.reference)
    amount = units_of(due["amount"].astype("string"))
    wanted &= amount.notna().to_numpy() & (amount > 0).fillna(False).to_numpy()
    if not wanted.any():
        return out
    first = due_day[wanted] + pd.Timedelta(days=1)
    # Rate-days: for each period of one reference rate (a loop over periods, not rows), the
    # days of it each row is late, times its yearly rate.
    rate_days = pd.Series(0, index=first.index, dtype=object)
    bounds = [*(day for day, _ in rates.reference[1:]), as_of + timedelta(days=1)]
    for (start, rate), end in zip(rates.reference, bounds, strict=True):
        stop = pd.Timestamp(min(end, as_of + timedelta(days=1)))
        days = (stop - first.where(first >= pd.Timestamp(start), pd.Timestamp(start))).dt.days.clip(lower=0)
        yearly = int((rate + STATUTORY_POINTS) * _SCALE)  # percent, in 10^-4
        rate_days = rate_days + days.astype("int64").astype(object) * yearly
    units = amount[wanted].astype(object).to_numpy()
    numerator = units * rate_days.to_numpy()
    currency = due.loc[wanted, "currency"].astype("string")
    interest = _round_to_minor(numerator, 100 * _SCALE * DAYS_A_YEAR, currency)
    out.loc[wanted, "interest"] = decimal_texts(interest, currency)
    out.loc[wanted, "interest_days"] = late[wanted].astype("Int64")
    tonight = next((rate for day, rate in reversed(rates.reference) if day <= as_of), rates.reference[0][1])
    out.loc[wanted, "interest_rate"] = str((tonight + STATUTORY_POINTS).normalize())
    comp = currency.map({c: int(v * _SCALE) for c, v in rates.compensation.items()}).astype("Int64")
    out.loc[wanted, "compensation"] = decimal_texts(comp, currency)
    return out


def _pay_by(within: pd.Series, as_of: date, calendar: BusinessCalendar | None) -> pd.Series:
    """The send date plus N business days of the company's calendar (every day without one)."""
    given = within.notna()
    counts = within[given].astype("int64").to_numpy()
    found = (calendar or BusinessCalendar()).business_days_after(as_of, counts)
    pay_by = pd.Series(pd.NaT, index=within.index, dtype="datetime64[ns]")
    pay_by[given] = pd.to_datetime(found)
    return pay_by
