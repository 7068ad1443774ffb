"""The dunning calendar night by night on SQLite and PostgreSQL: holds that start, end and are
deleted mid-cycle, pauses with an end, business days, holidays (ES-MD: a long weekend at
Easter), a closures file, business-day delays, minimums on the boundary and profiles switched
between nights — the rows changed in the database before each night, each night extracted
through the sources (sql/dunning_candidates), decided, and reserved by the ledger's own
statement (sql/reserve_dunning, its re-check included). Each email once, on the night the
oracle (tests/helpers/oracles.py) says."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from sqlalchemy import text

from dueflow.tasks.adapters import db
from dueflow.tasks.core.addresses import Mailbox
from dueflow.tasks.jobs import DunningJob
from tests import examples
from tests.helpers.calendar_scenarios import ESCALATION, day, scenarios
from tests.helpers.factories import with_optional_columns
from tests.helpers.oracles import expected_dunning_emails
from tests.integration.test_dunning_candidates import databases  # noqa: F401 - the fixture


def replace_rows(url: str, invoices: list[dict], clients: list[dict]) -> None:
    with db.writing(db.engine_for(url)) as conn:
        for table, items in (("invoices", invoices), ("clients", clients)):
            conn.execute(text(f"DELETE FROM {table}"))
            for item in items:
                conn.execute(text(f"INSERT INTO {table} ({', '.join(item)}) VALUES "
                                  f"({', '.join(':' + c for c in item)})"), item)


@settings(max_examples=examples(6), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(scenario=scenarios(max_invoices=3, max_nights=18))
@pytest.mark.pg
def test_each_email_once_on_the_night_the_oracle_says_on_both_databases(databases, scenario):  # noqa: F811
    expected, expected_skipped = expected_dunning_emails(
        dict(zip(scenario.ids, map(day, scenario.sent), strict=True)), [day(n) for n in scenario.nights],
        scenario.facts, scenario.open_day)
    for dialect, url in databases.items():
        with_optional_columns(url)
        with db.writing(db.engine_for(url)) as conn:
            conn.execute(text("DELETE FROM dueflow_ledger"))
        database = db.Database(url).with_sources(timezone="UTC")
        job = DunningJob((3, 2, 3), "sent", "UTC", ESCALATION, Mailbox("alerts@dueflow.test"),
                         rules=scenario.rules())
        emitted, skipped = [], []
        for night in map(day, scenario.nights):
            replace_rows(url, scenario.invoices(night), scenario.clients(night))
            decision = job.decide(job.extract(database, night), night)
            assert decision.quarantined.empty, dialect
            skipped += [(night, s) for s in decision.skipped["source_id"]]
            won = db.reserve(database, "dunning", decision.to_reserve, night, None, status="adopted")
            for row in decision.to_reserve.itertuples(index=False):
                if row.key in won:
                    emitted.append((night, row.subject_id, int(row.step_rank)))
        assert emitted == expected, dialect
        assert skipped == expected_skipped, dialect
