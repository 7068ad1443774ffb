"""Vectorised checks shared by every job: addresses, currencies, amounts, dates."""

from __future__ import annotations

import numpy as np
import pandas as pd

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

# Deliberately strict: one @, no spaces, quotes, angle brackets or line breaks, a dotted domain.
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_EMAIL = rf"[A-Za-z0-9.!#$%&'*+/=?^_`{{|}}~-]+@{_LABEL}(?:\.{_LABEL})+"


def valid_email(values: pd.Series) -> pd.Series:
    """True where the value is a single plain email address."""
    text = values.astype("string")
    return text.str.fullmatch(_EMAIL).fillna(False).astype(bool) & (text.str.len() <= 254).fillna(
        False
    ).astype(bool)


def known_currency(values: pd.Series) -> pd.Series:
    return values.astype("string").isin(KNOWN_CURRENCIES).fillna(False).astype(bool)


def as_dates(values: pd.Series) -> pd.Series:
    """Dates as datetime64 (midnight); anything missing or unparseable becomes NaT."""
    return pd.to_datetime(values.astype("string"), errors="coerce", format="ISO8601").dt.normalize()


def as_amounts(values: pd.Series) -> pd.Series:
    """Amounts as floats for display and checks; missing or non-numeric becomes NaN."""
    amounts = pd.to_numeric(values.astype("string"), errors="coerce")
    return amounts.where(np.isfinite(amounts))


def quote(values: pd.Series) -> pd.Series:
    """repr-like quoting of each value, for reasons an operator can read."""
    return "'" + values.astype("string").fillna("").str.slice(0, 80) + "'"


def first_reason(checks: list[tuple[pd.Series, pd.Series | str]], index: pd.Index) -> pd.Series:
    """The reason of the first failing check per row (NA where every check passes)."""
    reasons = pd.Series(pd.NA, index=index, dtype="string")
    for failed, reason in reversed(checks):
        reasons = reasons.mask(failed.fillna(False).astype(bool), reason)
    return reasons
