"""Money: amounts travel as their exact decimal text and become `Decimal` to be shown,
never a float; each currency is shown with its own minor units (JPY 0, EUR 2, KWD 3)
and the reader's symbols and separators (Babel)."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation, localcontext
from functools import cache

import numpy as np

from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.text import present_texts, stripped

# ISO 4217 codes in circulation; an amount in anything else is quarantined.
KNOWN_CURRENCIES = frozenset(
    """
    AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BRL BSD BTN
    BWP BYN BZD CAD CDF CHF CLP CNY COP CRC CUP CVE CZK DJF DKK DOP DZD EGP ERN ETB EUR FJD
    FKP GBP GEL GHS GIP GMD GNF GTQ GYD HKD HNL HTG HUF IDR ILS INR IQD IRR ISK JMD JOD JPY
    KES KGS KHR KMF KPW KRW KWD KYD KZT LAK LBP LKR LRD LSL LYD MAD MDL MGA MKD MMK MNT MOP
    MRU MUR MVR MWK MXN MYR MZN NAD NGN NIO NOK NPR NZD OMR PAB PEN PGK PHP PKR PLN PYG QAR
    RON RSD RUB RWF SAR SBD SCR SDG SEK SGD SHP SLE SOS SRD SSP STN SYP SZL THB TJS TMT TND
    TOP TRY TTD TWD TZS UAH UGX USD UYU UZS VES VND VUV WST XAF XCD XOF XPF YER ZAR ZMW ZWL
    """.split()
)
# A plain decimal number as databases print them (PostgreSQL numeric, SQLite's REAL text).
_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d{1,4})?"
_NUMBER_PATTERN = re.compile(_NUMBER)
MAX_DIGITS = 30  # digits written out (integer part and decimals): more than any money needs


def known_currency(values: pd.Series) -> pd.Series:
    # isin on the values as they are: a "string" dtype backed by pyarrow refuses text that
    # is not valid UTF-8 (lone surrogates) instead of calling it an unknown currency.
    return values.isin(KNOWN_CURRENCIES).fillna(False).astype(bool)


@cache
def minor_units(currency: str) -> int:
    """Decimals the currency is counted in: EUR 2, JPY 0, KWD 3."""
    from babel.numbers import get_currency_precision

    return int(get_currency_precision(currency))


def to_decimal(text: object) -> Decimal | None:
    """The exact value of an amount's text, or None when it is not a finite number."""
    if text is None or text is pd.NA:
        return None
    value = str(text).strip()
    if not _NUMBER_PATTERN.fullmatch(value):
        return None
    try:
        return Decimal(value)
    except InvalidOperation:  # pragma: no cover - the pattern admits only valid literals
        return None


def _decimals(amount: Decimal) -> int:
    """Decimal places the value really uses (trailing zeros do not count)."""
    _sign, digits, exponent = amount.as_tuple()
    assert isinstance(exponent, int)
    kept = list(digits)
    while exponent < 0 and len(kept) > 1 and kept[-1] == 0:
        kept.pop()
        exponent += 1
    return max(0, -exponent)


def _written_digits(amount: Decimal) -> int:
    """Digits the amount takes written out without an exponent: 1e3 → 4, 0.05 → 3."""
    return max(amount.adjusted() + 1, 1) + _decimals(amount)


def amount_problem(text: str | None, currency: object, *, positive: bool) -> str | None:
    """`amount_problems` for one amount (the reference the columns are tested against, and
    the path of the rare amounts the columns leave to it: exponents, other scripts' digits)."""
    value = to_decimal(text)
    if value is None:
        return "amount missing or not a number"
    if _written_digits(value) > MAX_DIGITS:
        return f"amount has more than {MAX_DIGITS} digits"
    if positive and value <= 0:
        return ("amount is zero: nothing to collect" if value == 0 else
                "amount is negative (a credit note): nothing to collect")
    if value < 0:
        return "amount is negative"
    if isinstance(currency, str) and currency in KNOWN_CURRENCIES and (
            _decimals(value) > (units := minor_units(currency))):
        return f"amount {str(text).strip()} has more decimals than {currency} uses ({units})"
    return None


def _ascii_digits(parts: np.ndarray) -> np.ndarray:
    """Each part is empty or only 0-9 (re's \\d would take any script's digits too)."""
    return (parts == "") | np.strings.isdigit(np.strings.encode(parts, "ascii", "replace"))


def amount_problems(amounts: pd.Series, currencies: pd.Series, *, positive: bool) -> pd.Series:
    """Why each amount cannot be shown as money (NA where it can): missing or not a number,
    zero or negative (`positive`, e.g. a credit note: nothing to collect) or negative,
    or more decimals than its currency has. Currencies are checked on their own.
    Plain decimals ([+-]digits[.digits], what databases print) are judged over whole
    columns with numpy; anything else, rare, by `amount_problem`."""
    n = len(amounts)
    present, texts = present_texts(amounts)
    problems = np.full(n, None, dtype=object)
    problems[~present] = "amount missing or not a number"
    if not texts:
        return pd.Series(problems, index=amounts.index, dtype="string")
    text = np.strings.strip(np.asarray(texts, dtype=str))
    minus = np.strings.startswith(text, "-")
    body = np.where(minus | np.strings.startswith(text, "+"), np.strings.slice(text, 1, None), text)
    whole, _dot, fraction = np.strings.partition(body, ".")
    plain = _ascii_digits(whole) & _ascii_digits(fraction) & ((whole != "") | (fraction != ""))
    # The value is digits × 10^-len(fraction): its significant digits, the decimals it
    # really uses (trailing zeros do not count, except for zero itself, as Decimal does).
    digits = np.strings.lstrip(np.strings.add(whole, fraction), "0")
    zero = digits == ""
    places = np.strings.str_len(fraction)
    trailing = np.strings.str_len(digits) - np.strings.str_len(np.strings.rstrip(digits, "0"))
    decimals = np.where(zero, places, places - np.minimum(trailing, places))
    written = np.where(zero, 1, np.maximum(np.strings.str_len(digits) - places, 1)) + decimals
    negative = minus & ~zero
    currency = currencies[present].astype(object).to_numpy()
    known = pd.Series(currency).isin(KNOWN_CURRENCIES).to_numpy(dtype=bool)
    units = pd.Series(currency).map({c: minor_units(c) for c in set(currency[known])}).to_numpy(
        dtype=float, na_value=np.nan)
    judged = np.full(len(texts), None, dtype=object)
    undecided = plain.copy()
    many = known & (decimals > units)
    for failed, reason in (
            (written > MAX_DIGITS, f"amount has more than {MAX_DIGITS} digits"),
            (zero & positive, "amount is zero: nothing to collect"),
            (negative & positive, "amount is negative (a credit note): nothing to collect"),
            (negative, "amount is negative"),
            (many, None)):
        hit = failed & undecided
        if hit.any():
            judged[hit] = reason if reason is not None else [  # worded for the bad rows only
                f"amount {t} has more decimals than {c} uses ({int(u)})"
                for t, c, u in zip(text[hit], currency[hit], units[hit], strict=True)]
            undecided &= ~hit
    rare = np.flatnonzero(~plain)
    if len(rare):
        judged[rare] = [amount_problem(texts[i], currency[i], positive=positive) for i in rare]
    problems[present] = judged
    return pd.Series(problems, index=amounts.index, dtype="string")


_WHOLE = rf"[+-]?\d{{1,{MAX_DIGITS}}}"


def amounts_from_minor(frame: pd.DataFrame) -> pd.DataFrame:
    """Where a source gives its amounts as integer minor units (`amount_minor`: 12345 EUR is
    123.45), the amount as exact decimal text, by the currency's minor units; over whole
    columns, one pass per number of minor units. A value that is not a whole number is
    kept as it is, so the amount check quarantines it; an unknown currency has no amount
    (the currency check quarantines it)."""
    if "amount_minor" not in frame:
        return frame
    minor = frame["amount_minor"].astype("string").str.strip()
    if minor.isna().all():  # the source gives `amount`
        return frame.drop(columns="amount_minor")
    currency = frame["currency"].astype("string")
    known = [c for c in currency.dropna().unique() if c in KNOWN_CURRENCIES]
    units = currency.map({c: minor_units(c) for c in known})
    whole = minor.str.fullmatch(_WHOLE).fillna(False).astype(bool)
    amount = minor.where(~whole)  # not a whole number: left for the amount check
    for unit in units.dropna().unique():
        rows = whole & (units == unit).fillna(False).astype(bool)
        if not rows.any():
            continue
        value = minor[rows]
        sign = value.str.slice(0, 1).where(value.str.slice(0, 1) == "-", "")
        digits = value.str.lstrip("+-").str.zfill(int(unit) + 1)
        amount[rows] = (sign + digits.str.slice(0, -int(unit)) + "." + digits.str.slice(-int(unit))
                        if unit else sign + digits)
    return frame.drop(columns="amount_minor").assign(amount=amount.astype(object).where(amount.notna(), None))


@cache
def _currency_pattern(locale: str) -> tuple:
    from babel import Locale

    parsed = Locale.parse(locale)
    return parsed, parsed.currency_formats["standard"]


def format_money(amount: Decimal | str, currency: str, locale: str) -> str:
    """`amount` in `currency` as a reader of `locale` writes it: €1,450.00, 980,40 €, ¥1,450."""
    parsed, pattern = _currency_pattern(locale)
    value = amount if isinstance(amount, Decimal) else Decimal(str(amount))
    with localcontext() as context:  # room for MAX_DIGITS digits and the currency's decimals
        context.prec = 2 * MAX_DIGITS
        return str(pattern.apply(value, parsed, currency=currency, currency_digits=True))


def money_texts(amounts: pd.Series, currencies: pd.Series, locale: str = "en") -> pd.Series:
    """Amounts with their currency as the emails write them (`format_money`): '£2,100.00';
    '' where either is missing. Decimal text is written exactly as it is; a number through
    its shortest repr (exact to 15 significant digits). For the rows a person is shown (a
    table's first rows), not a whole night's."""
    shown = []
    for amount, currency in zip(amounts.astype(object), currencies.astype(object), strict=True):
        if amount is None or currency is None or pd.isna(amount) or pd.isna(currency):
            shown.append("")
            continue
        try:
            exact = amount.strip() if isinstance(amount, str) else repr(float(amount))
            shown.append(format_money(Decimal(exact), str(currency), locale))
        except (ValueError, ArithmeticError):  # not a number, or a code Babel cannot write
            shown.append(f"{amount} {currency}")
    return pd.Series(shown, index=amounts.index, dtype="string")


# The largest minimum DUEFLOW_DUNNING_MINIMUM may set: below 10^9, and amounts carry at
# most 3 decimals (amount_problems), so comparing them as floating point is exact where it
# matters (two different amounts under 10^12 differ by at least 0.001, far above a float's
# rounding), and an amount past 10^12 is above every minimum however it rounds.
MAX_MINIMUM = Decimal(10) ** 9


def parse_minimums(text: str | None, name: str = "DUEFLOW_DUNNING_MINIMUM",
                   word: str = "minimum") -> dict[str, Decimal]:
    """`EUR 5, USD 5, JPY 500`: per currency, the open amount below which no reminder goes
    out. A ValueError line naming the setting and the fix otherwise."""
    if text is None or not text.strip():
        return {}
    minimums: dict[str, Decimal] = {}
    for part in text.split(","):
        words = part.split()
        amount = to_decimal(words[1]) if len(words) == 2 else None
        if (len(words) != 2 or words[0] not in KNOWN_CURRENCIES or amount is None or amount < 0
                or amount >= MAX_MINIMUM or _decimals(amount) > minor_units(words[0])
                or words[0] in minimums):
            raise ValueError(f"{name}={text[:80]!r}: write each {word} once as CURRENCY AMOUNT, comma"
                             " separated, e.g. 'EUR 5, USD 5, JPY 500' (a known ISO code, an amount"
                             " from 0 below 1000000000 in the currency's decimals)")
        minimums[words[0]] = amount
    return minimums


SUM_PLACES = 4  # the sums below are exact to this many decimals (no currency has more than 3)


def sums_by_currency(amounts: pd.Series, currencies: pd.Series) -> dict[str, Decimal]:
    """The exact sum of the amounts (valid, non-negative decimal text, as the rules let
    through) per currency, without a loop over rows and without floating point: each
    amount as an integer of 10^-SUM_PLACES units."""
    text = stripped(amounts)
    parts = text.str.extract(r"\A([0-9]+)(?:\.([0-9]{0,4}))?\Z")
    known = (parts[0].notna() & currencies.notna()).to_numpy()
    if not known.any():
        return {}
    whole = parts.loc[known, 0].astype("int64").to_numpy()
    fraction = parts.loc[known, 1].fillna("").str.ljust(SUM_PLACES, "0").astype("int64").to_numpy()
    units = pd.Series(whole * 10**SUM_PLACES + fraction, index=parts.index[known])
    totals = units.groupby(currencies[known].astype(str)).sum()
    return {str(c): Decimal(int(total)).scaleb(-SUM_PLACES).normalize() for c, total in totals.items()}


def below_minimum(amounts: pd.Series, currencies: pd.Series, minimums: dict[str, Decimal]) -> pd.Series:
    """Rows whose amount (valid decimal text) is below its currency's minimum (False where the
    currency has none or the amount is unreadable)."""
    if not minimums:
        return pd.Series(False, index=amounts.index)
    floor = currencies.astype(object).map({c: float(m) for c, m in minimums.items()}).astype("float64")
    value = pd.to_numeric(stripped(amounts), errors="coerce")
    return (value < floor).fillna(False).astype(bool)

