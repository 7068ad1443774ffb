"""Fees, statutory interest and pay-by dates (issue 43 E): opt-in per profile and step,
exact and rounded to each currency's minor units, stated on their own lines and never
added to the invoice."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import ROUND_HALF_UP, Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dueflow.blocks.settings import ConfigError, Settings
from dueflow.tasks.adapters.memory import memory_store
from dueflow.tasks.core.calendar import BusinessCalendar
from dueflow.tasks.core.charges import Rates, StepCharges, charges, parse_compensation, parse_rates
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.profiles import ProfileError, default_profile, parse_profiles
from tests import examples
from tests.helpers.factories import client, invoice
from tests.helpers.fakes import FakeTransport
from tests.helpers.nights import run
from tests.helpers.payments import AS_OF, DELAYS, SENT, memory_pay

RATES = Rates(parse_rates("2026-07-01 2.15, 2027-01-01 2.40, 2027-03-05 1.90"), parse_compensation("EUR 40"))


def due(**columns):
    return pd.DataFrame({"profile": ["eu"], "step": ["REMINDED_1"], "amount": ["600.00"], "currency": ["EUR"],
                         "due_date": [date(2027, 2, 8)]} | {k: [v] for k, v in columns.items()})


def test_interest_counts_each_day_at_the_rate_in_force_that_day_plus_8_points():
    said = charges(due(), {("eu", "REMINDED_1"): StepCharges(interest=True)}, RATES, AS_OF, None)
    # 2027-02-09 .. 2027-03-04: 24 days at 10.40 %, 2027-03-05 .. 2027-03-10: 6 days at 9.90 %
    exact = Decimal("600") * (24 * Decimal("0.104") + 6 * Decimal("0.099")) / 365
    assert said.loc[0, "interest"] == str(exact.quantize(Decimal("0.01"), ROUND_HALF_UP)) == "5.08"
    assert said.loc[0, "interest_rate"] == "9.9" and said.loc[0, "interest_days"] == 30
    assert said.loc[0, "compensation"] == "40.00" and pd.isna(said.loc[0, "fee"])


def test_no_interest_before_the_due_date_nor_for_a_profile_or_step_that_does_not_ask():
    asked = {("eu", "REMINDED_2"): StepCharges(interest=True)}
    assert charges(due(), asked, RATES, AS_OF, None)["interest"].isna().all()
    early = charges(due(due_date=AS_OF + timedelta(days=3)),
                    {("eu", "REMINDED_1"): StepCharges(interest=True)}, RATES, AS_OF, None)
    assert early["interest"].isna().all() and early["compensation"].isna().all()


@settings(max_examples=examples(80), deadline=None)
@given(amount=st.decimals(min_value=Decimal("0.01"), max_value=Decimal("9999999.99"), places=2),
       late=st.integers(1, 800), currency=st.sampled_from(["EUR", "JPY", "KWD"]))
def test_interest_is_exact_and_rounded_half_up_to_the_currencys_minor_units(amount, late, currency):
    places = {"EUR": 2, "JPY": 0, "KWD": 3}[currency]
    amount = amount.quantize(Decimal(1).scaleb(-places), ROUND_HALF_UP) or Decimal(1)
    rates = Rates(((date(2000, 1, 1), Decimal("2.15")),), {})
    said = charges(due(amount=str(amount), currency=currency, due_date=AS_OF - timedelta(days=late)),
                   {("eu", "REMINDED_1"): StepCharges(interest=True)}, rates, AS_OF, None)
    exact = amount * Decimal("10.15") / 100 * late / 365
    assert Decimal(said.loc[0, "interest"]) == exact.quantize(Decimal(1).scaleb(-places), ROUND_HALF_UP)


def test_a_fee_is_per_currency_and_a_pay_by_date_counts_the_companys_business_days():
    rows = pd.DataFrame({"profile": ["eu", "eu", "", "eu"], "step": ["REMINDED_2"] * 4,
                         "amount": ["100.00", "500", "100.00", "100.00"],
                         "currency": ["EUR", "JPY", "EUR", "USD"],
                         "due_date": [date(2027, 3, 1)] * 4})
    steps = {("eu", "REMINDED_2"): StepCharges({"EUR": Decimal("10"), "JPY": Decimal("500")}, False, 5)}
    calendar = BusinessCalendar("1111100", closed=((date(2027, 3, 15), "inventory"),))
    said = charges(rows, steps, RATES, AS_OF, calendar)
    assert said["fee"].tolist()[:2] == ["10.00", "500"] and said["fee"].isna().tolist()[2:] == [True, True]
    # Wednesday 10 March + 5 business days, Monday 15 March closed: Thursday 18 March.
    assert said.loc[0, "pay_by"] == pd.Timestamp(2027, 3, 18) and pd.isna(said.loc[2, "pay_by"])


def test_profiles_say_fees_interest_and_pay_by_per_step_and_refuse_anything_else():
    text = ('[profiles.eu]\nfees = { REMINDED_2 = "EUR 10, GBP 8" }\ninterest = ["REMINDED_2"]\n'
            "pay_within = { REMINDED_1 = 14 }\n")
    profiles = parse_profiles(text, "profiles.toml", default_profile(DELAYS, "sent"))
    assert profiles.step_charges() == {
        ("eu", "REMINDED_1"): StepCharges({}, False, 14),
        ("eu", "REMINDED_2"): StepCharges({"EUR": Decimal("10"), "GBP": Decimal("8")}, True, None)}
    for bad in ('fees = { REMINDED_3 = "EUR 1" }', 'fees = { REMINDED_1 = "EUR" }', 'interest = "yes"',
                "pay_within = { REMINDED_1 = 0 }"):
        with pytest.raises(ProfileError, match="profile 'eu'"):
            parse_profiles(f"[profiles.eu]\n{bad}\n", "profiles.toml", default_profile(DELAYS, "sent"))
    with pytest.raises(ValueError, match="DUEFLOW_REFERENCE_RATES"):
        parse_rates("2027-01-01")


def test_a_profile_asking_for_interest_needs_the_reference_rates(tmp_path):
    path = tmp_path / "profiles.toml"
    path.write_text('[profiles.eu]\ninterest = ["REMINDED_1"]\n')
    with pytest.raises(ConfigError, match="DUEFLOW_REFERENCE_RATES is not set"):
        Settings.from_env({"DUEFLOW_MAIL_FROM": "a@corp.example", "DUEFLOW_PROFILES_FILE": str(path)}).check()


def test_a_reminder_states_its_charges_apart_and_never_adds_them_to_what_is_owed(tmp_path):
    path = tmp_path / "profiles.toml"
    path.write_text('[profiles.eu]\ndelays = [7, 7, 7]\nfees = { REMINDED_1 = "EUR 10" }\n'
                    'interest = ["REMINDED_1"]\npay_within = { REMINDED_1 = 14 }\n')
    store = memory_store(clients=[client("cl1", dunning_profile="eu")],
                         invoices=[invoice("i1", "cl1", SENT, amount="1000.00", due_date="2027-02-08")])
    memory_pay(store)("i1", "400.00", "EUR", AS_OF - timedelta(days=7))
    summary = run(store, AS_OF, FakeTransport(), dunning_delays=DELAYS, bounds=None,
                  env={"DUEFLOW_PROFILES_FILE": str(path), "DUEFLOW_REFERENCE_RATES": "2027-01-01 2.40"})
    body = store.ledger.rows["dunning/i1/REMINDED_1"]["body_text"]  # type: ignore[attr-defined]
    assert "Open amount: €600.00 (of €1,000.00, €400.00 received on 3 March 2027)" in body
    assert "  Reminder fee:          €10.00\n" in body
    assert "  Late-payment interest: €5.13 (10.4% a year for 30 days)\n" in body
    assert "  Recovery costs (flat): €40.00\n" in body
    assert "Please pay by 24 March 2027." in body
    [stated] = summary.rows.loc[summary.rows["key"] == "dunning/i1/REMINDED_1", "amount"].tolist()
    assert Decimal(str(stated)) == Decimal("600.00")  # the fee and interest are not owed on the invoice
