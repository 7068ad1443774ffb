"""The renewal rule (docs/design.md, "The rules") as pure functions, with property tests."""

from __future__ import annotations

from datetime import date, timedelta

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dueflow.tasks.core.calendar import BusinessCalendar, parse_business_days
from dueflow.tasks.core.renewal_rule import due_lead, due_renewal_alerts
from tests import examples
from tests.helpers.oracles import expected_renewal_keys

START = date(2027, 1, 1)
HISTORY_COLUMNS = ["subject_id", "cycle", "handled_rank"]


def contracts_frame(renewals: list[date | None], **overrides) -> pd.DataFrame:
    n = len(renewals)
    frame = pd.DataFrame(
        {
            "id": [f"c-{i}" for i in range(n)],
            "vendor": ["Acme"] * n,
            "title": ["Hosting"] * n,
            "amount": ["100.00"] * n,
            "currency": ["EUR"] * n,
            "renewal_date": [r.isoformat() if r else None for r in renewals],
            "notify_email": ["owner@example.com"] * n,
            "status": ["active"] * n,
        }
    )
    for column, values in overrides.items():
        frame[column] = values
    return frame


def simulate(renewals: list[date], run_dates: list[date], leads: list[int], calendar=None):
    """Run the pure rule over a calendar, 'reserving' everything it decides (like the
    ledger would). Returns every (run_date, key, contract index, lead) emitted."""
    reserved: dict[tuple[str, str], int] = {}  # (contract, cycle) -> most urgent lead so far
    emitted = []
    contracts = contracts_frame(renewals)
    for run_date in run_dates:
        history = pd.DataFrame(
            [(c, cycle, rank) for (c, cycle), rank in reserved.items()], columns=HISTORY_COLUMNS
        )
        decision = due_renewal_alerts(contracts, history, run_date, leads, calendar)
        for row in decision.to_reserve.itertuples(index=False):
            slot = (row.subject_id, row.cycle)
            assert slot not in reserved or reserved[slot] > row.step_rank
            reserved[slot] = row.step_rank
            emitted.append((run_date, row.key, int(row.subject_id[2:]), row.step_rank))
    return emitted


leads_strategy = st.lists(st.integers(min_value=0, max_value=90), min_size=1, max_size=4, unique=True)


@st.composite
def calendars(draw):
    leads = draw(leads_strategy)
    renewals = draw(
        st.lists(st.integers(min_value=-10, max_value=130).map(lambda d: START + timedelta(d)),
                 min_size=1, max_size=8)
    )
    steps = draw(st.lists(st.integers(min_value=0, max_value=12), min_size=1, max_size=40))
    run_dates, day = [], START - timedelta(days=draw(st.integers(0, 100)))
    for step in steps:  # increasing, with gaps (step > 1) and repeats (step == 0)
        day += timedelta(days=step)
        run_dates.append(day)
    return leads, renewals, run_dates


@settings(max_examples=examples(12), deadline=None)
@given(calendars())
def test_each_key_once_and_first_alert_is_most_urgent_lead_crossed(calendar):
    leads, renewals, run_dates = calendar
    emitted = simulate(renewals, run_dates, leads)
    keys = [key for _, key, _, _ in emitted]
    assert len(keys) == len(set(keys)), "a key was decided twice"

    first_alert: dict[int, tuple[date, int]] = {}
    for run_date, _key, contract, lead in emitted:
        days_left = (renewals[contract] - run_date).days
        assert 0 <= days_left <= lead, "alert outside its lead window"
        # The lead sent is the most urgent one crossed at that date.
        assert lead == min(x for x in leads if x >= days_left)
        first_alert.setdefault(contract, (run_date, lead))
    # Leads of one cycle only ever get more urgent.
    for contract in {c for _, _, c, _ in emitted}:
        sent = [lead for _, _, c, lead in emitted if c == contract]
        assert sent == sorted(sent, reverse=True) and len(sent) == len(set(sent))
    # A contract is alerted on the first run date inside its window, and never missed.
    for contract, renewal in enumerate(renewals):
        inside = [r for r in run_dates if 0 <= (renewal - r).days <= max(leads)]
        if inside:
            assert first_alert[contract][0] == inside[0]
        else:
            assert contract not in first_alert


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(st.integers(-400, 400), min_size=1, max_size=50), leads_strategy)
def test_due_lead_matches_the_definition(days, leads):
    got = due_lead(np.asarray(days, dtype=np.int64), leads)
    for d, lead in zip(days, got, strict=True):
        eligible = [x for x in leads if 0 <= d <= x]
        assert lead == (min(eligible) if eligible else -1)


@pytest.mark.parametrize(
    ("days_left", "expected"),
    [(61, None), (60, "60d"), (59, "60d"), (31, "60d"), (30, "30d"), (16, "30d"), (15, "15d"),
     (1, "15d"), (0, "15d"), (-1, None)],
)
def test_boundaries(days_left, expected):
    as_of = date(2027, 3, 1)
    decision = due_renewal_alerts(
        contracts_frame([as_of + timedelta(days=days_left)]),
        pd.DataFrame(columns=HISTORY_COLUMNS), as_of, [60, 30, 15],
    )
    steps = decision.due["step"].tolist()
    assert steps == ([] if expected is None else [expected])
    if expected:
        cycle = (as_of + timedelta(days=days_left)).isoformat()
        assert decision.due["key"].tolist() == [f"renewal/c-0/{cycle}/{expected}"]


def test_a_late_first_sight_sends_only_the_most_urgent_lead():
    as_of = date(2027, 3, 1)
    contracts = contracts_frame([as_of + timedelta(days=20)])
    decision = due_renewal_alerts(contracts, pd.DataFrame(columns=HISTORY_COLUMNS), as_of, [60, 30, 15])
    assert decision.to_reserve["step"].tolist() == ["30d"]


def test_a_less_urgent_lead_is_never_due_after_a_more_urgent_one():
    as_of = date(2027, 3, 1)
    renewal = as_of + timedelta(days=40)  # the 60d lead is due today...
    history = pd.DataFrame([("c-0", renewal.isoformat(), 30)], columns=HISTORY_COLUMNS)
    decision = due_renewal_alerts(contracts_frame([renewal]), history, as_of, [60, 30, 15])
    assert decision.to_reserve.empty  # ...but 30d of this cycle is already reserved
    assert decision.due["handled"].tolist() == [True]


def test_a_new_renewal_date_is_a_new_cycle():
    as_of = date(2027, 3, 1)
    old, new = as_of + timedelta(days=10), as_of + timedelta(days=10 + 365)
    history = pd.DataFrame([("c-0", old.isoformat(), 15)], columns=HISTORY_COLUMNS)
    later = new - timedelta(days=60)
    decision = due_renewal_alerts(contracts_frame([new]), history, later, [60, 30, 15])
    assert decision.to_reserve["key"].tolist() == [f"renewal/c-0/{new.isoformat()}/60d"]


def test_bad_rows_are_quarantined_with_a_reason_and_good_rows_kept():
    as_of = date(2027, 3, 1)
    due = as_of + timedelta(days=30)
    contracts = contracts_frame(
        [due, None, due, due, due, due, due, due + timedelta(days=400), due],
        status=["active", "active", "paused", None, "active", "active", "active", "weird",
                "cancelled"],
        notify_email=["a@example.com", "b@example.com", "c@example.com", "d@example.com",
                      "not an address", "f@example.com", "g@example.com", "h@example.com",
                      "i@example.com"],
        currency=["EUR", "EUR", "EUR", "EUR", "EUR", "EURO", "USD", "EUR", "EUR"],
        amount=["1", "1", "1", "1", "1", "1", None, "1", "1"],
    )
    decision = due_renewal_alerts(contracts, pd.DataFrame(columns=HISTORY_COLUMNS), as_of, [60, 30])
    reasons = dict(zip(decision.quarantined["source_id"], decision.quarantined["reason"], strict=True))
    assert reasons == {
        "c-1": "renewal_date missing or not a valid date",
        "c-2": "unknown status 'paused'",
        "c-3": "status missing",
        "c-4": "notify_email is not a valid address: 'not an address': it is not a plain ASCII address"
               " name@domain (one @; no spaces, quotes, brackets or accents)",
        "c-5": "unknown currency 'EURO'",
        "c-6": "amount missing or not a number",
    }  # c-7 is not due tonight, c-8 is cancelled: neither is anyone's problem tonight
    assert decision.to_reserve["subject_id"].tolist() == ["c-0"]


def test_dates_as_python_dates_or_malformed_text():
    as_of = date(2027, 3, 1)
    contracts = contracts_frame([None, None])
    contracts["renewal_date"] = pd.Series([as_of + timedelta(days=15), "2027-02-30"], dtype=object)
    decision = due_renewal_alerts(contracts, pd.DataFrame(columns=HISTORY_COLUMNS), as_of, [15])
    assert decision.to_reserve["subject_id"].tolist() == ["c-0"]
    assert decision.quarantined["source_id"].tolist() == ["c-1"]


@settings(max_examples=examples(10), deadline=None)
@given(calendars(), st.sampled_from(["mon-fri", "mon-sat", "tue,thu"]), st.booleans(),
       st.lists(st.integers(0, 120), max_size=6))
def test_on_business_days_each_alert_goes_out_on_the_next_one_as_the_oracle_says(
        calendar, weekdays, holidays, closed):
    """Alerts wait for business days: a lead due on a weekend, a holiday (ES-MD, with Easter's
    long weekend) or a closure goes out on the next business day, once; a renewal on a closed
    day still gets its most urgent alert the business day after."""
    leads, renewals, run_dates = calendar
    business = BusinessCalendar(parse_business_days(weekdays), *(("ES", "MD") if holidays else (None, None)),
                                tuple((START + timedelta(days=d), "closure") for d in sorted(set(closed))))
    emitted = simulate(renewals, run_dates, leads, business)
    contracts = {f"c-{i}": (r, True) for i, r in enumerate(renewals)}
    expected = expected_renewal_keys(lambda _: contracts, run_dates, leads,
                                     lambda d: business.why_closed(d) is None)
    assert [key for _, key, _, _ in emitted] == expected
    assert all(business.why_closed(night) is None for night, _, _, _ in emitted)


def test_a_renewal_on_a_saturday_is_alerted_on_monday_unless_any_day():
    saturday, monday = date(2027, 3, 6), date(2027, 3, 8)
    business = BusinessCalendar(parse_business_days("mon-fri"))
    frame = contracts_frame([saturday])
    none = pd.DataFrame(columns=HISTORY_COLUMNS)
    assert due_renewal_alerts(frame, none, saturday, [0, 15], business).due.empty
    monday_alert = due_renewal_alerts(frame, none, monday, [0, 15], business).due
    assert monday_alert[["step", "days_left", "due_since"]].values.tolist() == [["0d", -2, saturday]]
    assert due_renewal_alerts(frame, none, saturday, [0, 15]).due["step"].tolist() == ["0d"]
