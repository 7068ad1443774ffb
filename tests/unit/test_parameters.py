"""The flows' parameters checked before a night (tasks/core/parameters.py, docs/parameters.md)."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dueflow.tasks.core import parameters as P
from dueflow.tasks.core.parameters import ParameterError, as_of_window, run_parameters

TODAY = date(2026, 12, 1)
GOOD = {"renewal_leads": [60, 30, 15], "dunning_delays": [7, 5, 7], "dunning_start": "sent",
        "renewal_locale": "en", "retry_max_attempts": 3, "retry_backoff_minutes": 60,
        "send_cap": None, "adopt": False, "dry_run": False}


def test_the_defaults_are_allowed():
    params = run_parameters(**GOOD)
    assert params.leads == (15, 30, 60) and params.delays == (7, 5, 7)
    assert params.retry_backoff == timedelta(hours=1)


@pytest.mark.parametrize(("name", "value", "says"), [
    ("dunning_delays", [7], "three whole numbers of days, each 1 to 365"),
    ("dunning_delays", [0, 0, 0], "three whole numbers of days, each 1 to 365"),
    ("dunning_delays", [-1, 5, 7], "three whole numbers of days"),
    ("dunning_delays", [7, 5, 7, 7], "three whole numbers of days"),
    ("dunning_delays", "757", "three whole numbers of days"),
    ("renewal_leads", [], "a list of 1 to 10 whole numbers of days"),
    ("renewal_leads", [-5], "each 0 to 730"),
    ("renewal_leads", [10**9], "each 0 to 730"),
    ("retry_backoff_minutes", 10**12, "from 0 to 43,200"),
    ("retry_backoff_minutes", -1, "from 0 to 43,200"),
    ("retry_max_attempts", 0, "from 1 to 100"),
    ("retry_max_attempts", True, "from 1 to 100"),
    ("send_cap", -1, "empty (no cap) or a whole number of emails"),
    ("dunning_start", "paid", "'sent' or 'due'"),
    ("renewal_locale", "fr", "'en' or 'de' or 'es'"),
    ("adopt", "yes", "true or false"),
])
def test_a_value_out_of_range_is_one_line_naming_the_parameter(name, value, says):
    with pytest.raises(ParameterError) as caught:
        run_parameters(**GOOD | {name: value})
    message = str(caught.value)
    assert message.startswith(f"parameter {name}: ") and says in message and "\n" not in message
    assert caught.value.name == name


@given(st.fixed_dictionaries({
    "renewal_leads": st.lists(st.integers(-10, 2000), max_size=12),
    "dunning_delays": st.lists(st.integers(-3, 400), max_size=5),
    "retry_max_attempts": st.integers(-5, 200),
    "retry_backoff_minutes": st.one_of(st.integers(-5, 50_000), st.integers(10**9, 10**15)),
    "send_cap": st.none() | st.integers(-5, 10**8),
}))
def test_any_values_are_checked_or_refused_by_name(values):
    try:
        params = run_parameters(**GOOD | values)
    except ParameterError as exc:
        assert exc.name in values and str(exc).count("\n") == 0
        return
    # What was allowed computes: the widest renewal window and the backoff cannot overflow.
    assert 1 <= len(params.leads) <= P.MAX_LEADS and len(params.delays) == 3
    assert min(params.delays) >= 1 and max(params.delays) <= P.MAX_DELAY_DAYS
    assert P.LATEST_AS_OF + timedelta(days=max(params.leads) + sum(params.delays)) <= date(2262, 1, 1)
    assert params.retry_backoff <= timedelta(days=30)


def test_as_of_more_than_31_days_ahead_is_refused_unless_allowed():
    assert as_of_window(TODAY + timedelta(days=31), TODAY, None, False) == TODAY + timedelta(days=31)
    with pytest.raises(ParameterError, match=r"at most 31 days after today \(2026-12-01\).*-any-as-of"):
        as_of_window(date(2027, 12, 25), TODAY, None, False)
    assert as_of_window(date(2027, 12, 25), TODAY, None, True) == date(2027, 12, 25)


def test_as_of_before_the_ledgers_first_night_is_refused_unless_allowed():
    first = date(2026, 11, 20)
    assert as_of_window(first, TODAY, first, False) == first
    with pytest.raises(ParameterError, match=r"not before the ledger's first night \(2026-11-20\)"):
        as_of_window(date(2025, 11, 20), TODAY, first, False)
    assert as_of_window(date(2025, 11, 20), TODAY, first, True) == date(2025, 11, 20)


@pytest.mark.parametrize("night", [date(9999, 12, 1), date(1, 1, 1), date.max])
def test_dates_at_the_ends_of_the_calendar_are_one_line_even_when_any_is_allowed(night):
    with pytest.raises(ParameterError, match="a date from 1900-01-01 to 2199-12-31"):
        as_of_window(night, TODAY, None, True)
    with pytest.raises(ParameterError, match="parameter start: a date from 1900-01-01"):
        P.forecast_start(night)


@pytest.mark.parametrize(("value", "night"), [
    (None, None), ("", None), ("  ", None), ("2027-01-15", date(2027, 1, 15)),
    (date(2027, 1, 15), date(2027, 1, 15)),
])
def test_as_of_from_the_run_forms_plain_field_or_a_call(value, night):
    from dueflow.tasks.core.parameters import as_of_of

    assert as_of_of(value) == night


@pytest.mark.parametrize("value", ["2027-02-30", "tomorrow", 20270115])
def test_as_of_that_is_not_a_date_is_one_line(value):
    from dueflow.tasks.core.parameters import ParameterError, as_of_of

    with pytest.raises(ParameterError, match="parameter as_of: a date YYYY-MM-DD, or empty for today"):
        as_of_of(value)
