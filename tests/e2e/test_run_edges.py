"""Issue 25, findings 1 and 3: a night is checked whole before it writes or sends anything —
its parameters, and the night itself (as_of) — on both databases with a real SMTP server.
Each of these failed before the change (findings 6 and 7: test_prefect_lost.py)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prefect.exceptions import ParameterTypeError

from dueflow.blocks.errors import ConfigError
from dueflow.flows.nightly_alerts import nightly_alerts
from dueflow.tasks.adapters import db
from dueflow.tasks.core.report import RunSummary
from tests import examples
from tests.helpers.factories import client, contract, insert, invoice
from tests.helpers.runs import AS_OF

RENEWAL = AS_OF + timedelta(days=30)


def ledger_keys(url: str) -> set[str]:
    return set(db.ledger_rows(db.engine_for(url))["key"])


def due_night(url: str, tag: str) -> None:
    """Renewal alerts and a dunning reminder due on AS_OF: a night that sends both jobs."""
    insert(url, "contracts", [contract(f"{tag}-c{n}", RENEWAL) for n in range(3)])
    insert(url, "clients", [client(f"{tag}-k")])
    insert(url, "invoices", [invoice(f"{tag}-i", f"{tag}-k", (AS_OF - timedelta(days=8)).isoformat())])


@pytest.mark.parametrize("delays", [[7], [0, 0, 0], [-1, 5, 7], [7, 5, 7, 7]])
def test_1_a_bad_dunning_delay_is_refused_before_the_first_renewal_alert(run_env, smtp_sink, delays):
    due_night(run_env, "d")
    with pytest.raises(ConfigError) as refused:
        nightly_alerts(as_of=AS_OF, dunning_delays=delays)
    assert str(refused.value).startswith(
        "parameter dunning_delays: three whole numbers of days, each 1 to 365")
    assert ledger_keys(run_env) == set() and smtp_sink.ehlos == 0 and not smtp_sink.messages


def test_1_prefect_sees_a_failed_run_with_the_line(run_env, smtp_sink):
    due_night(run_env, "p")
    state = nightly_alerts(as_of=AS_OF, retry_backoff_minutes=10**12, return_state=True)
    assert state.is_failed()
    assert "parameter retry_backoff_minutes: a whole number of minutes from 0 to 43,200" in state.message
    assert ledger_keys(run_env) == set() and smtp_sink.ehlos == 0


def test_1_the_run_form_shows_the_ranges():
    schema = nightly_alerts.parameters.model_dump()["properties"]
    assert (schema["dunning_delays"]["minItems"], schema["dunning_delays"]["maxItems"]) == (3, 3)
    assert schema["dunning_delays"]["items"] == {"type": "integer", "minimum": 1, "maximum": 365}
    backoff = schema["retry_backoff_minutes"]
    assert (backoff["minimum"], backoff["maximum"]) == (0, 43_200)
    assert schema["retry_max_attempts"]["minimum"] == 1 and schema["renewal_leads"]["minItems"] == 1


EXAMPLE = itertools.count()
LISTS = st.lists(st.integers(-3, 800) | st.sampled_from([10**6, -(10**9)]), max_size=5)


@settings(max_examples=examples(4), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.fixed_dictionaries({}, optional={
    "renewal_leads": LISTS,
    "dunning_delays": LISTS | st.sampled_from([[7, 5, 7], [1, 1, 1], [365, 365, 365]]),
    "retry_max_attempts": st.integers(-2, 120),
    "retry_backoff_minutes": st.integers(-2, 50_000) | st.just(10**12),
    "send_cap": st.none() | st.integers(-2, 5),
    "dunning_start": st.sampled_from(["sent", "due", "paid", ""]),
    "renewal_locale": st.sampled_from(["en", "es", "fr"]),
}))
def test_1_any_parameters_run_the_night_or_are_refused_before_any_write(run_env, smtp_sink, values):
    due_night(run_env, f"h{next(EXAMPLE)}")
    before, ehlos, received = ledger_keys(run_env), smtp_sink.ehlos, len(smtp_sink.messages)
    try:
        summary = nightly_alerts(as_of=AS_OF, **values)
    except (ConfigError, ParameterTypeError) as exc:
        line = str(exc)
        assert isinstance(exc, ParameterTypeError) or (line.startswith("parameter ") and "\n" not in line)
        assert ledger_keys(run_env) == before  # nothing written
        assert (smtp_sink.ehlos, len(smtp_sink.messages)) == (ehlos, received)  # no SMTP traffic
        return
    assert isinstance(summary, RunSummary) and summary.as_of == AS_OF
    assert len(smtp_sink.messages) - received == summary.sent  # the night ran whole


def today() -> datetime.date:
    return datetime.now(UTC).date()


def test_3_the_ends_of_the_calendar_are_one_line(cli_env, db_url, dueflow_cli):
    due_night(db_url, "e")
    for args in (["run", "--as-of", "9999-12-01"], ["run", "--as-of", "0001-01-01", "--dry-run"],
                 ["forecast", "--from", "9999-12-01"]):
        result = dueflow_cli(*args, env=cli_env)
        assert result.returncode == 2, result
        assert "a date from 1900-01-01 to 2199-12-31" in result.stderr or "a date from 1900-01-01 to 2198" \
            in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert ledger_keys(db_url) == set()


def test_3_a_night_far_ahead_or_before_the_first_is_refused_unless_meant(cli_env, db_url, dueflow_cli,
                                                                         smtp_sink):
    window = cli_env | {"DUEFLOW_ALLOW_ANY_AS_OF": "off"}
    now = today()
    insert(db_url, "contracts", [contract("soon", now + timedelta(days=15)),
                                 contract("typo", now + timedelta(days=375 + 15))])
    typo = (now + timedelta(days=375)).isoformat()  # a year ahead: 375 days early
    result = dueflow_cli("run", "--as-of", typo, env=window)
    assert result.returncode == 2
    assert result.stderr.strip() == (f"dueflow: error: parameter as_of: at most 31 days after today ({now}),"
                                     f" i.e. up to {now + timedelta(days=31)}; to run a later night on"
                                     f" purpose, set allow_any_as_of (`--allow-any-as-of`), got '{typo}'")
    assert ledger_keys(db_url) == set() and smtp_sink.ehlos == 0

    assert dueflow_cli("run", env=window).returncode == 0  # today: the ledger's first night
    assert ledger_keys(db_url) == {f"renewal/soon/{now + timedelta(days=15)}/15d"}
    backfill = (now - timedelta(days=400)).isoformat()
    result = dueflow_cli("run", "--as-of", backfill, env=window)
    assert result.returncode == 2 and f"not before the ledger's first night ({now})" in result.stderr
    assert dueflow_cli("run", "--as-of", backfill, "--allow-any-as-of", env=window).returncode == 0
    assert dueflow_cli("run", "--as-of", typo, "--allow-any-as-of", env=window).returncode == 0
    assert f"renewal/typo/{now + timedelta(days=390)}/15d" in ledger_keys(db_url)
