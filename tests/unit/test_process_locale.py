"""What dueflow says does not depend on the process's locale (issue 45): the holidays package
names a holiday in the language it guesses from LANGUAGE, LC_ALL, LC_MESSAGES and LANG when
it is not told one, so `check` and `forecast` said "San José" on a worker under es_ES (or
under C.UTF-8 on Python 3.13) and "Saint Joseph's Day" elsewhere. The guess reads the
environment when the names are made, so this process's environment is enough to show it;
tests/e2e/test_locales.py compares the bytes of a whole night run under two locales."""

from __future__ import annotations

from datetime import date

import holidays
import pytest

from dueflow.blocks.settings import ConfigError, Settings
from dueflow.tasks.core import calendar as calendar_module
from dueflow.tasks.core.calendar import BusinessCalendar, holiday_language

LOCALE_VARIABLES = ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG")
# Locales a worker may run under: each one, left to the package, names some holiday otherwise.
WORKER_LOCALES = [{"LC_ALL": "C"}, {"LANG": "C.UTF-8"}, {"LANG": "es_ES.UTF-8"},
                  {"LC_ALL": "de_DE.UTF-8"}, {"LANGUAGE": "uk:es", "LANG": "fr_FR.UTF-8"},
                  {"LC_MESSAGES": "th_TH.UTF-8"}, {}]
# Places whose holidays the package translates, one region among them.
PLACES = [("ES", "MD"), ("DE", None), ("FR", None), ("CH", None), ("GB", None), ("US", None), ("MX", None)]
SAN_JOSE = date(2027, 3, 19)  # a holiday in Madrid


@pytest.fixture
def under(monkeypatch):
    """Sets this process's locale variables as a worker's would be, with fresh caches."""
    def set_locale(variables: dict[str, str]) -> None:
        for name in LOCALE_VARIABLES:
            monkeypatch.delenv(name, raising=False)
        for name, value in variables.items():
            monkeypatch.setenv(name, value)
        calendar_module._public_holidays.cache_clear()
        calendar_module._languages_of.cache_clear()

    yield set_locale
    calendar_module._public_holidays.cache_clear()
    calendar_module._languages_of.cache_clear()


def names_of_2027(language: str) -> dict[tuple[str, str | None], dict[date, str]]:
    return {(country, subdiv): BusinessCalendar(country=country, subdiv=subdiv, language=language)
            .closed_days(date(2027, 1, 1), date(2027, 12, 31)) for country, subdiv in PLACES}


@pytest.mark.parametrize("language", ["en", "es"])
def test_holiday_names_are_the_same_under_every_locale_a_worker_runs_under(under, language):
    named = []
    for variables in WORKER_LOCALES:
        under(variables)
        named.append(names_of_2027(language))
    assert all(names == named[0] for names in named), "a holiday's name changed with the locale"
    spain = named[0][("ES", "MD")]
    assert spain[SAN_JOSE] == {"en": "holiday: Saint Joseph's Day", "es": "holiday: San José"}[language]


def test_the_package_left_to_itself_follows_the_locale_which_is_why_dueflow_never_does(under):
    """The premise of the test above: without a language the package's names move."""
    seen = set()
    for variables in ({"LC_ALL": "C"}, {"LANGUAGE": "uk"}, {"LANG": "es_ES.UTF-8"}):
        under(variables)
        seen.add(holidays.country_holidays("ES", subdiv="MD", years=2027)[SAN_JOSE])
    assert len(seen) > 1, seen


def test_the_operator_language_names_holidays_and_a_client_s_may_be_asked_for(under):
    under({"LANGUAGE": "de", "LC_ALL": "de_DE.UTF-8"})
    env = {"DUEFLOW_HOLIDAYS": "ES-MD"}
    english = Settings.from_env(env).calendar()
    spanish = Settings.from_env(env | {"DUEFLOW_OPERATOR_LANGUAGE": "es"}).calendar()
    assert english is not None and spanish is not None
    assert english.why_closed(SAN_JOSE) == "holiday: Saint Joseph's Day"
    assert spanish.why_closed(SAN_JOSE) == "holiday: San José"
    assert english.why_closed(SAN_JOSE, language="es") == "holiday: San José"  # a client's locale
    # A language the package has no names in for Spain: English, not the locale's German.
    german = Settings.from_env(env | {"DUEFLOW_OPERATOR_LANGUAGE": "de-AT"}).calendar()
    assert german is not None and german.language == "de_AT"
    assert german.why_closed(SAN_JOSE) == "holiday: Saint Joseph's Day"


@pytest.mark.parametrize(("wanted", "supported", "native", "chosen"), [
    ("en", ("ca", "en_US", "es", "th", "uk"), "es", "en_US"),  # Spain in English
    ("es", ("ca", "en_US", "es", "th", "uk"), "es", "es"),
    ("de", ("ca", "en_US", "es", "th", "uk"), "es", "en_US"),  # no German: English
    ("en", ("en_GB", "en_US", "th", "ur_PK"), "en_GB", "en_GB"),  # Great Britain's own English
    ("en_US", ("en_GB", "en_US", "th", "ur_PK"), "en_GB", "en_US"),
    ("pt_BR", ("en_US", "pt_PT", "uk"), "pt_PT", "pt_PT"),  # Portugal for a Brazilian reader
    ("fr", ("am", "ar", "fr", "ti"), "ti", "fr"),
    ("es", ("am", "ti"), "ti", "ti"),  # neither Spanish nor English: the country's own
    ("es", (), None, None),  # the package translates nothing there: its names are fixed
])
def test_a_holiday_language_is_one_the_package_has_for_the_country(wanted, supported, native, chosen):
    assert holiday_language(wanted, supported, native) == chosen


def test_every_country_s_holidays_are_asked_for_in_a_language_it_has():
    """The package reads the locale for any language a country lacks: dueflow never asks for one."""
    for country in holidays.list_supported_countries(include_aliases=False):
        supported, native = calendar_module._languages_of(country)
        chosen = holiday_language("en", supported, native)
        assert chosen in supported or (not supported and chosen == native), country


@pytest.mark.parametrize("value", ["xx", "english", "es_ES.UTF-8", "C", "de_XX", "e"])
def test_an_operator_language_that_is_not_one_is_refused_in_one_line(value):
    with pytest.raises(ConfigError) as refused:
        Settings.from_env({"DUEFLOW_OPERATOR_LANGUAGE": value})
    message = str(refused.value)
    assert message.startswith(f"DUEFLOW_OPERATOR_LANGUAGE={value!r} is not a language")
    assert "en_GB" in message and "\n" not in message


@pytest.mark.parametrize(("value", "read"), [("es", "es"), (" DE ", "de"), ("en-gb", "en_GB"), ("", "en")])
def test_an_operator_language_is_read_as_cldr_writes_it(value, read):
    assert Settings.from_env({"DUEFLOW_OPERATOR_LANGUAGE": value}).operator_language == read
