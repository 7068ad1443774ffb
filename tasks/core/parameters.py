"""The flows' parameters, checked once and all together before the night writes anything
(docs/parameters.md): a value out of range is one ParameterError naming the parameter and
what it allows, never a failure half-way through a night that has already sent emails.

Pure: the caller gives today (in the business time zone) and the ledger's first night.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from enum import StrEnum
from typing import Literal

from dueflow.tasks.core.defaults import (
    DUNNING_DELAYS,
    DUNNING_START,
    RENEWAL_LEADS,
    RETRY_BACKOFF_MAX_MINUTES,
    RETRY_BACKOFF_MINUTES,
    RETRY_MAX_ATTEMPTS,
)
from dueflow.tasks.core.locales import SUPPORTED_LOCALES

DunningStart = Literal["sent", "due"]
DUNNING_STARTS: tuple[DunningStart, ...] = ("sent", "due")


class Statements(StrEnum):
    """DUEFLOW_STATEMENTS: which of a client's emails of one night go as one."""

    OFF = "off"  # one email per invoice step (the default)
    REMINDERS = "reminders"  # a client's reminders as one statement
    ALL = "all"  # and the escalations of one client's invoices as one


STATEMENT_CHOICES: tuple[str, ...] = tuple(s.value for s in Statements)

DELAY_UNITS = ("calendar", "business")  # dunning_delay_unit: how the delays count days

# The ranges the run form shows (flows/nightly_alerts.py) and this module enforces.
MAX_LEADS = 10
MAX_LEAD_DAYS = 730  # a renewal alert at most two years ahead
DUNNING_STEP_COUNT = 3  # SENT→REMINDED_1, REMINDED_1→REMINDED_2, REMINDED_2→OVERDUE
MAX_DELAY_DAYS = 365
MAX_ATTEMPTS = 100
MAX_BACKOFF_MINUTES = RETRY_BACKOFF_MAX_MINUTES  # 30 days: a later run retries within a month
MAX_SEND_CAP = 10_000_000
MAX_FORECAST_DAYS = 366
MAX_BLOCK_NAME = 200  # characters of a Prefect block's name (email_block)
# A night more than this many days after today is a typo unless the run says it is meant.
FUTURE_DAYS = 31
# Dates every step can compute with (pandas timestamps end in 2262; leads and delays add
# at most a few years): outside them a run is refused even when any as_of is allowed.
EARLIEST_AS_OF = date(1900, 1, 1)
LATEST_AS_OF = date(2199, 12, 31)


class ParameterError(ValueError):
    """A parameter outside what it allows; the message names it, for the operator."""

    def __init__(self, name: str, allowed: str, value: object) -> None:
        self.name = name
        shown = repr(value)
        super().__init__(f"parameter {name}: {allowed}, got {shown[:80]}{'…' if len(shown) > 80 else ''}")


@dataclass(frozen=True)
class RunParameters:
    """The nightly flow's parameters, checked (`run_parameters`)."""

    leads: tuple[int, ...]  # distinct, most urgent (smallest) first
    delays: tuple[int, ...]
    dunning_start: DunningStart
    renewal_locale: str
    retry_max_attempts: int
    send_cap: int | None  # at most this many new emails per job; the rest wait a night
    adopt: bool  # record what is due as handled ('adopted') and send nothing
    dry_run: bool  # decide and render on the same path; write and send nothing
    retry_backoff_minutes: int = 60
    delay_unit: str = "calendar"  # 'calendar' or 'business' days (DUEFLOW_BUSINESS_DAYS…)
    renewal_on_any_day: bool = False  # renewal alerts go out on closed days too

    @property
    def retry_backoff(self) -> timedelta:
        return timedelta(minutes=self.retry_backoff_minutes)


def _whole(name: str, value: object, low: int, high: int, allowed: str | None = None) -> int:
    # bool is an int to Python, never a count to an operator
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ParameterError(name, allowed or f"a whole number from {low:,} to {high:,}", value)
    return value


def flag_of(name: str, value: object) -> bool:
    """An on/off parameter: true or false, nothing read as one ("yes", 1)."""
    if not isinstance(value, bool):
        raise ParameterError(name, "true or false", value)
    return value


def block_name(value: object, name: str) -> str:
    """The name of a Prefect block given as a parameter: one line of 1 to MAX_BLOCK_NAME
    characters (Prefect's own rule for the name — lowercase letters, digits, dashes — is
    checked when the block is loaded, with its own message)."""
    if (not isinstance(value, str) or not value.strip() or len(value) > MAX_BLOCK_NAME
            or re.search(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]", value)):
        raise ParameterError(name, f"a block name, one line of 1 to {MAX_BLOCK_NAME} characters", value)
    return value.strip()


def leads_of(value: object) -> tuple[int, ...]:
    """Renewal leads: 1 to MAX_LEADS day counts from 0 to MAX_LEAD_DAYS (repeats count once)."""
    allowed = (f"a list of 1 to {MAX_LEADS} whole numbers of days before the renewal date, each"
               f" 0 to {MAX_LEAD_DAYS}, e.g. [60, 30, 15]")
    if isinstance(value, str | bytes) or not isinstance(value, Sequence) or not 1 <= len(value) <= MAX_LEADS:
        raise ParameterError("renewal_leads", allowed, value)
    leads = [_whole("renewal_leads", lead, 0, MAX_LEAD_DAYS, allowed) for lead in value]
    return tuple(sorted(set(leads)))


def delays_of(value: object) -> tuple[int, ...]:
    """Dunning delays: exactly three waits of 1 to MAX_DELAY_DAYS days. A zero wait would let
    a second run on the same day take the next step at once."""
    allowed = (f"three whole numbers of days, each 1 to {MAX_DELAY_DAYS} (SENT→REMINDED_1,"
               " REMINDED_1→REMINDED_2, REMINDED_2→OVERDUE), e.g. [7, 5, 7]")
    if isinstance(value, str | bytes) or not isinstance(value, Sequence) or len(value) != DUNNING_STEP_COUNT:
        raise ParameterError("dunning_delays", allowed, value)
    return tuple(_whole("dunning_delays", delay, 1, MAX_DELAY_DAYS, allowed) for delay in value)


def dunning_start_of(value: object) -> DunningStart:
    if value not in DUNNING_STARTS or not isinstance(value, str):
        raise ParameterError("dunning_start", "'sent' or 'due'", value)
    return value


# The parameters that are settings too and are not switches (blocks/table.py, `parameter`):
# each one's reader of a given value (Settings.with_parameters; empty keeps the variable).
SETTING_PARAMETERS: dict[str, Callable[[object], object]] = {
    "email_block": lambda value: block_name(value, "email_block"),
    "dunning_start": dunning_start_of,
}


def locale_of(value: object) -> str:
    if not isinstance(value, str) or value not in SUPPORTED_LOCALES:
        raise ParameterError("renewal_locale", " or ".join(repr(x) for x in SUPPORTED_LOCALES), value)
    return value


def as_of_of(value: object, name: str = "as_of") -> date | None:
    """The night a run is for: a date, or YYYY-MM-DD text (the run form's plain field);
    None or empty text means today (decided by the caller)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, date) and not isinstance(value, datetime):
        return value
    if isinstance(value, str):
        try:
            return date.fromisoformat(value.strip())
        except ValueError:
            pass
    raise ParameterError(name, "a date YYYY-MM-DD, or empty for today", value)


def as_of_window(as_of: object, today: date, first_night: date | None, allow_any: bool,
                 name: str = "as_of") -> date:
    """`as_of` if the night is meant: not more than FUTURE_DAYS after today, not before the
    ledger's first night (`first_night`, None for an empty ledger) — unless `allow_any`
    (a backfill, a test on dates of its own) — and within the dates every step can compute."""
    if not isinstance(as_of, date) or isinstance(as_of, datetime):
        raise ParameterError(name, "a date YYYY-MM-DD", as_of)
    if not EARLIEST_AS_OF <= as_of <= LATEST_AS_OF:
        raise ParameterError(name, f"a date from {EARLIEST_AS_OF} to {LATEST_AS_OF}", as_of.isoformat())
    if allow_any:
        return as_of
    latest = today + timedelta(days=FUTURE_DAYS)
    if as_of > latest:
        raise ParameterError(name, f"at most {FUTURE_DAYS} days after today ({today}), i.e. up to"
                             f" {latest}; to run a later night on purpose, set allow_any_as_of"
                             " (`--allow-any-as-of`)", as_of.isoformat())
    if first_night is not None and as_of < first_night:
        raise ParameterError(name, f"not before the ledger's first night ({first_night}); to run an"
                             " earlier night on purpose (a backfill), set allow_any_as_of"
                             " (`--allow-any-as-of`)", as_of.isoformat())
    return as_of


def run_parameters(
    *,
    renewal_leads: object,
    dunning_delays: object,
    dunning_start: object,
    renewal_locale: object,
    retry_max_attempts: object,
    retry_backoff_minutes: object,
    send_cap: object,
    adopt: object,
    dry_run: object,
    dunning_delay_unit: object = "calendar",
    renewal_on_any_day: object = False,
) -> RunParameters:
    """The nightly flow's parameters from raw values (a Python call, a deployment's JSON),
    checked all together: the first one out of range is a ParameterError."""
    if send_cap is not None:
        send_cap = _whole("send_cap", send_cap, 0, MAX_SEND_CAP,
                          f"empty (no cap) or a whole number of emails from 0 to {MAX_SEND_CAP:,}")
    return RunParameters(
        leads=leads_of(renewal_leads),
        delays=delays_of(dunning_delays),
        dunning_start=dunning_start_of(dunning_start),
        renewal_locale=locale_of(renewal_locale),
        retry_max_attempts=_whole("retry_max_attempts", retry_max_attempts, 1, MAX_ATTEMPTS),
        send_cap=send_cap,
        adopt=flag_of("adopt", adopt),
        dry_run=flag_of("dry_run", dry_run),
        retry_backoff_minutes=_whole(
            "retry_backoff_minutes", retry_backoff_minutes, 0, MAX_BACKOFF_MINUTES,
            f"a whole number of minutes from 0 to {MAX_BACKOFF_MINUTES:,} (30 days)"),
        delay_unit=delay_unit_of(dunning_delay_unit),
        renewal_on_any_day=flag_of("renewal_on_any_day", renewal_on_any_day),
    )


def delay_unit_of(value: object) -> str:
    if not isinstance(value, str) or value not in DELAY_UNITS:
        raise ParameterError("dunning_delay_unit", "'calendar' or 'business'", value)
    return value


def default_parameters(dunning_start: str = DUNNING_START) -> RunParameters:
    """The nightly flow's parameters as a run that names none has them (`dunning_start`:
    the settings', DUEFLOW_DUNNING_START)."""
    return run_parameters(renewal_leads=RENEWAL_LEADS, dunning_delays=DUNNING_DELAYS,
                          dunning_start=dunning_start,
                          renewal_locale="en", retry_max_attempts=RETRY_MAX_ATTEMPTS,
                          retry_backoff_minutes=RETRY_BACKOFF_MINUTES, send_cap=None, adopt=False,
                          dry_run=False)


def forecast_days(value: object) -> int:
    return _whole("days", value, 1, MAX_FORECAST_DAYS,
                  f"a whole number of nights from 1 to {MAX_FORECAST_DAYS}")


def forecast_start(start: object) -> date:
    """A forecast's first night: any date every step can compute with for a year after it."""
    if not isinstance(start, date) or isinstance(start, datetime):
        raise ParameterError("start", "a date YYYY-MM-DD", start)
    latest = LATEST_AS_OF - timedelta(days=MAX_FORECAST_DAYS)
    if not EARLIEST_AS_OF <= start <= latest:
        raise ParameterError("start", f"a date from {EARLIEST_AS_OF} to {latest}", start.isoformat())
    return start
