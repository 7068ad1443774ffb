"""A first-run surge without mailing everything at once: adopt what is due now, or
send under a cap and let later runs pick up the rest, the rules intact."""

from __future__ import annotations

from datetime import date, timedelta

from dueflow.flows.nightly_alerts import nightly_alerts
from dueflow.tasks.adapters import db
from tests.helpers.factories import contract, insert

AS_OF = date(2027, 1, 1)


def test_adopt_records_what_is_due_as_handled_and_sends_nothing(run_env, smtp_sink):
    url = run_env
    insert(url, "contracts", [contract(f"c{d}", AS_OF + timedelta(days=d)) for d in (31, 20, 10)])
    adopted = nightly_alerts(as_of=AS_OF, adopt=True)
    assert adopted.adopted == 3 and adopted.sent == 0 and smtp_sink.keys() == []
    assert set(db.ledger_rows(db.engine_for(url))["status"]) == {"adopted"}
    assert nightly_alerts(as_of=AS_OF).won == 0  # adopted keys count as handled
    # The next lead still goes out when it is crossed: c31 reaches 30 days tomorrow.
    tomorrow = nightly_alerts(as_of=AS_OF + timedelta(days=1))
    assert smtp_sink.keys() == [f"renewal/c31/{AS_OF + timedelta(days=31)}/30d"]
    assert tomorrow.ledger_pending == 0


def test_send_cap_sends_the_most_urgent_first_and_the_rest_later(run_env, smtp_sink):
    url = run_env
    offsets = [58, 40, 29, 25, 14, 3, 16]
    insert(url, "contracts", [contract(f"c{d}", AS_OF + timedelta(days=d)) for d in offsets])
    first = nightly_alerts(as_of=AS_OF, send_cap=3)
    assert (first.sent, first.deferred) == (3, 4)
    # The two 15-day alerts, then the 30-day one closest to its renewal.
    assert sorted(k.split("/")[1] for k in smtp_sink.keys()) == ["c14", "c16", "c3"]  # noqa: SIM118
    second = nightly_alerts(as_of=AS_OF, send_cap=3)
    third = nightly_alerts(as_of=AS_OF, send_cap=3)
    assert (second.sent, third.sent, third.deferred) == (3, 1, 0)
    keys = smtp_sink.keys()
    assert len(keys) == len(set(keys)) == len(offsets)


def test_a_cap_of_zero_says_what_it_held_back_and_a_boolean_is_never_a_number(run_env, smtp_sink):
    """issue 36, case 6: `send_cap=False` was read as 0 by Prefect's parameter coercion (a
    green run that sent nothing, its headline "0 due email(s) were already handled"), and
    `dunning_delays=[true, 5, 7]` as a one-day wait. A boolean is refused with one line
    before anything is written; a cap of 0 says how many it deferred."""
    import pytest

    from dueflow.blocks.errors import ConfigError

    url = run_env
    insert(url, "contracts", [contract(f"c{d}", AS_OF + timedelta(days=d)) for d in (29, 14, 3)])
    refused_values = [{"send_cap": False}, {"send_cap": True}, {"dunning_delays": [True, 5, 7]},
                      {"renewal_leads": [60, False]}, {"dry_run": "yes"}, {"allow_any_as_of": 1},
                      {"retry_max_attempts": 2.0}]
    for bad in refused_values:
        [(name, _)] = bad.items()
        with pytest.raises(ConfigError) as refused:
            nightly_alerts(as_of=AS_OF, **bad)
        line = str(refused.value)
        assert line.startswith(f"parameter {name}: ") and "\n" not in line, (bad, line)
    assert db.ledger_rows(db.engine_for(url)).empty and smtp_sink.keys() == []

    capped = nightly_alerts(as_of=AS_OF, send_cap=0)
    assert (capped.sent, capped.deferred) == (0, 3) and smtp_sink.keys() == []
    assert capped.headline().startswith(
        f"Nothing sent for {AS_OF}: 3 deferred by the send cap (a later run sends them), "), capped.headline()
    dry = nightly_alerts(as_of=AS_OF, send_cap=1, dry_run=True)
    assert "1 email(s) would be sent, 2 deferred by the send cap" in dry.headline(), dry.headline()
