"""The settings of holds, calendar, minimums and profiles: any text in them is read, or
refused in one line that names the setting and says the fix (ConfigError: `dueflow` exits 2
before anything is written). Never another exception, never a second line."""

from __future__ import annotations

import tempfile
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dueflow.blocks.errors import ConfigError
from dueflow.blocks.settings import Settings
from dueflow.tasks.core.calendar import BusinessCalendar, parse_business_days
from dueflow.tasks.core.profiles import default_profile, parse_profiles
from tests import examples
from tests.helpers import hostile

QUICK = settings(max_examples=examples(40), deadline=None)
text = st.one_of(hostile.anything(), st.sampled_from([
    "mon-fri", "sun-thu", "mon,wed,fri", "MON - FRI", "mon-", "ES", "ES-MD", "es-md", "ES-XX", "XX",
    "EUR 5, USD 5, JPY 500", "EUR 5,", "EUR -1", "JPY 0.5", "EUR 5, EUR 6", "EUR 1e3", "eur 5",
    "es", "en_GB", "pt-BR", "es_ES.UTF-8", "C"]))
file_text = st.one_of(hostile.anything(), st.sampled_from([
    "2027-12-24 Christmas Eve\n# comment\n2027-08-09..2027-08-20 summer", "2027-02-30",
    "2027-08-20..2027-08-09",
    "[profiles.key-account]\ndelays = [14, 14, 30]\nunit = \"business\"",
    "[profiles.x]\ndelays = [0, 1, 1]", "[profiles.default]\nstart = \"due\"",
    "[profiles.a]\nlast_step = \"X\"",
    "[profiles.a]\nescalation_to = \"a@b.example\\r\\nBcc: x@y.example\"", "[other]", "not toml = = ="]))


def one_line_or_read(env: dict[str, str]) -> Settings | None:
    try:
        return Settings.from_env(env)
    except ConfigError as refused:
        message = str(refused)
        assert message and "\n" not in message and "\r" not in message
        assert any(name in message for name in env)
        return None


@QUICK
@given(name=st.sampled_from(["DUEFLOW_BUSINESS_DAYS", "DUEFLOW_HOLIDAYS", "DUEFLOW_DUNNING_MINIMUM",
                             "DUEFLOW_RENEWAL_ON_ANY_DAY", "DUEFLOW_OPERATOR_LANGUAGE"]), value=text)
def test_any_text_in_a_calendar_or_minimum_setting_is_read_or_one_line(name, value):
    value = (value or "").replace("\x00", "")  # an environment holds no NUL
    if any("\ud800" <= c <= "\udfff" for c in value):
        return  # nor a lone surrogate
    read = one_line_or_read({name: value})
    if read is not None and name == "DUEFLOW_DUNNING_MINIMUM":
        assert all(isinstance(m, Decimal) and m >= 0 for m in read.minimums().values())


@QUICK
@given(name=st.sampled_from(["DUEFLOW_CLOSED_DAYS_FILE", "DUEFLOW_PROFILES_FILE"]), content=file_text)
def test_any_file_of_closures_or_profiles_is_read_or_one_line(name, content):
    content = content or ""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "setting"
        try:
            path.write_text(content, encoding="utf-8", errors="surrogateescape")
        except UnicodeEncodeError:
            return
        one_line_or_read({name: str(path)})
    one_line_or_read({name: "/no/such/file"})


def test_the_defaults_change_nothing():
    plain = Settings.from_env({})
    assert plain.calendar() is None and plain.minimums() == {}
    assert plain.profiles().named == {}
    assert parse_business_days(None) == "1111111" and not BusinessCalendar().active


def test_business_days_holidays_and_closures_say_why_a_day_is_closed(tmp_path):
    closed = tmp_path / "closed.txt"
    closed.write_text("2027-08-09..2027-08-11 summer closure\n2027-12-24  # Christmas Eve\n")
    calendar = Settings.from_env({"DUEFLOW_BUSINESS_DAYS": "mon-fri", "DUEFLOW_HOLIDAYS": "ES-MD",
                                  "DUEFLOW_CLOSED_DAYS_FILE": str(closed)}).calendar()
    assert calendar is not None
    assert calendar.why_closed(date(2027, 3, 19)) == "holiday: Saint Joseph's Day"  # Madrid, a Friday
    assert calendar.why_closed(date(2027, 3, 20)) == "Saturday"
    assert calendar.why_closed(date(2027, 8, 10)) == "closed: summer closure"
    assert calendar.why_closed(date(2027, 12, 24)) == "company closure"
    assert calendar.why_closed(date(2027, 3, 22)) is None
    assert calendar.next_open(date(2027, 3, 25)) == date(2027, 3, 29)  # Easter: Thursday to Monday
    assert calendar.previous_open(date(2027, 3, 29)) == date(2027, 3, 24)


def test_a_profile_takes_what_it_leaves_out_from_the_run_and_refuses_default():
    base = default_profile((7, 5, 7), "due", "business", "collections@corp.example")
    profiles = parse_profiles('[profiles.gentle]\ndelays = [14, 14, 30]\nlast_step = "REMINDED_2"',
                              "f", base)
    gentle = profiles.named["gentle"]
    assert (gentle.delays, gentle.start, gentle.unit, gentle.last_rank, gentle.escalation_to) == (
        (14, 14, 30), "due", "business", 2, "collections@corp.example")
    with pytest.raises(ValueError, match="not 'default'"):
        parse_profiles("[profiles.default]\nstart = \"sent\"", "f", base)
    assert gentle.statements is None  # DUEFLOW_STATEMENTS decides for it
    assert parse_profiles('[profiles.one]\nstatements = "all"', "f", base).named["one"].statements == "all"
    with pytest.raises(ValueError, match="statements must be one of off, reminders, all"):
        parse_profiles('[profiles.one]\nstatements = "yes"', "f", base)


def test_each_company_s_email_block_names_its_own_profiles(tmp_path, monkeypatch):
    """Two deployments, one worker: each DueflowEmail block names its company's profiles (a
    file, or a DueflowProfiles block), which win over DUEFLOW_PROFILES_FILE."""
    from dueflow.blocks import settings as settings_module
    from dueflow.blocks.prefect_blocks import DueflowEmail, DueflowProfiles

    acme = tmp_path / "acme.toml"
    acme.write_text("[profiles.key-account]\ndelays = [14, 14, 30]\n")
    shared = tmp_path / "shared.toml"
    shared.write_text("[profiles.shared]\ndelays = [1, 1, 1]\n")
    blocks = {"acme": DueflowEmail(company_name="Acme", profiles_file=str(acme)),
              "globex": DueflowEmail(company_name="Globex", profiles_block="globex-profiles"),
              "globex-profiles": DueflowProfiles(profiles="[profiles.new-client]\ndelays = [7, 5, 7]\n"
                                                          "last_step = \"REMINDED_2\"\n")}
    monkeypatch.setattr(settings_module, "load_block", lambda _cls, name: blocks[name])
    base = Settings.from_env({"DUEFLOW_PROFILES_FILE": str(shared)})
    assert set(base.profiles().named) == {"shared"}
    from dataclasses import replace

    acme_profiles = replace(base, email_block="acme").with_blocks().profiles()
    globex_profiles = replace(base, email_block="globex").with_blocks().profiles()
    assert set(acme_profiles.named) == {"key-account"}
    assert acme_profiles.named["key-account"].delays == (14, 14, 30)
    assert set(globex_profiles.named) == {"new-client"}
    assert globex_profiles.named["new-client"].last_rank == 2


@pytest.mark.parametrize(("value", "words"), [
    ("ES-", "the region after '-' is missing"), ("ES- ", "the region after '-' is missing"),
    ("XX", "unknown country"), ("ES-ZZ", "ES has no region 'ZZ'"), ("-MD", "unknown country")])
def test_a_holiday_setting_that_names_no_known_place_is_refused_in_one_line(value, words):
    """issue 36: `DUEFLOW_HOLIDAYS=ES-` was read silently as all of Spain."""
    with pytest.raises(ConfigError) as refused:
        Settings.from_env({"DUEFLOW_HOLIDAYS": value}).calendar()
    assert words in str(refused.value) and "DUEFLOW_HOLIDAYS=" in str(refused.value)
    assert "\n" not in str(refused.value)
