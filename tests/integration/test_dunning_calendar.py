"""The dunning calendar night by night on SQLite and PostgreSQL: holds that start, end and are
deleted mid-cycle, pauses with an end, business days, holidays (ES-MD: a long weekend at
Easter), a closures file, business-day delays, minimums on the boundary, profiles switched
between nights, and instalments and credit notes arriving between nights in the company's
own payments relation — the rows changed in the database before each night, each night extracted
through the sources (sql/dunning_candidates), decided, and reserved by the ledger's own
statement (sql/reserve_dunning, its re-check included). Each email once, on the night the
oracle (tests/helpers/oracles.py) says."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from sqlalchemy import text

from dueflow.tasks.adapters import db
from dueflow.tasks.adapters.sql_store import sql_store
from dueflow.tasks.core.addresses import Mailbox
from dueflow.tasks.core.dunning_rule import DunningRules
from dueflow.tasks.core.profiles import default_profile, parse_profiles
from dueflow.tasks.core.sources import parse_mapping
from dueflow.tasks.jobs import DunningJob
from tests import examples
from tests.helpers.calendar_scenarios import ESCALATION, day, scenarios
from tests.helpers.factories import with_optional_columns
from tests.helpers.oracles import expected_dunning_emails
from tests.helpers.payments import PAYMENTS_TABLE
from tests.integration.test_dunning_candidates import databases  # noqa: F401 - the fixture


def replace_rows(url: str, invoices: list[dict], clients: list[dict],
                 payments: list[dict] | None = None) -> None:
    engine = db.engine_for(url)
    with db.writing(engine) as conn:
        if payments is not None:  # the company's own payments relation (issue 43)
            conn.execute(text(f"CREATE TABLE IF NOT EXISTS payments ({PAYMENTS_TABLE[engine.dialect.name]})"))
        for table, items in (("invoices", invoices), ("clients", clients),
                             *((("payments", payments),) if payments is not None else ())):
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
            replace_rows(url, scenario.invoices(night), scenario.clients(night), scenario.paid(night))
            if night == day(scenario.nights[0]):  # the payments relation is there now: read it
                database = db.Database(url).with_sources(timezone="UTC")
            decision = job.decide(job.extract(sql_store(database), night), night)
            assert decision.quarantined.empty, dialect
            skipped += [(night, s) for s in decision.skipped["source_id"]]
            won = db.reserve(database, "dunning", decision.to_reserve, night, None, status="adopted")
            for row in decision.to_reserve.itertuples(index=False):
                assert Decimal(row.amount) == scenario.open_amount(night, int(row.subject_id[4:])), dialect
                if row.key in won:
                    emitted.append((night, row.subject_id, int(row.step_rank)))
        with db.writing(db.engine_for(url)) as conn:  # the other tests' databases have none
            conn.execute(text("DROP TABLE payments"))
        assert emitted == expected, dialect
        assert skipped == expected_skipped, dialect


MAPPING = """
[invoices]
relation = "invoices"
[invoices.columns]
dunning_hold_until = "disputed_until"
[clients]
relation = "clients"
[clients.columns]
dunning_paused_until = "pause_end"
dunning_profile = "segment"
"""


@pytest.mark.pg
def test_holds_pauses_and_profiles_under_the_company_s_own_names_through_the_mapping(databases):  # noqa: F811
    """A user's own tables name the optional columns their way; the mapping file maps them
    (no DDL), and the night reads them through the sources: a hold, a pause with an end and
    a profile honoured, on both databases."""
    night = day(10)
    for dialect, url in databases.items():
        engine = db.engine_for(url)
        present = {(t, c) for t in ("invoices", "clients")
                   for c in db.read_frame(engine, f"SELECT * FROM {t} LIMIT 0", {}).columns}
        with engine.begin() as conn:
            for table, column, kind in (("invoices", "disputed_until", "date"),
                                        ("clients", "pause_end", "date"), ("clients", "segment", "text")):
                if (table, column) not in present:
                    conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {column} {kind}"))
            conn.execute(text("DELETE FROM dueflow_ledger"))
        sent = f"{day(0)}T09:00:00+00:00"
        invoices = [{"id": f"i{n}", "client_id": f"k{n}", "number": f"F-{n}", "amount": "50.00",
                     "currency": "EUR", "status": "sent", "sent_at": sent, "due_date": str(day(30)),
                     "paid_at": None, "disputed_until": str(day(12)) if n == 1 else None} for n in range(4)]
        clients = [{"id": f"k{n}", "name": "C", "email": f"k{n}@client.example", "locale": "en",
                    "notes": None, "dunning_paused": False, "pause_end": str(day(11)) if n == 2 else None,
                    "segment": {3: "gentle"}.get(n)} for n in range(4)]
        replace_rows(url, invoices, clients)
        mapping = parse_mapping(MAPPING, "mapping")
        database = db.Database(url).with_sources(mapping, timezone="UTC")
        profiles = parse_profiles('[profiles.gentle]\ndelays = [14, 5, 7]\n', "profiles",
                                  default_profile((7, 5, 7), "sent"))
        job = DunningJob((7, 5, 7), "sent", "UTC", ESCALATION, Mailbox("alerts@dueflow.test"),
                         rules=DunningRules(profiles=profiles))
        decision = job.decide(job.extract(sql_store(database), night), night)
        # i0: due (sent 10 days ago); i1: held until day 12; i2: its client paused until day 11;
        # i3: its client's profile waits 14 days.
        assert sorted(decision.to_reserve["subject_id"]) == ["i0"], dialect
        assert decision.quarantined.empty, dialect
        later = job.decide(job.extract(sql_store(database), day(18)), day(18))
        # i2: 7 days after its pause ended on day 11; i3: 14 days after it was sent
        assert sorted(later.to_reserve["subject_id"]) == ["i0", "i2", "i3"], dialect
        store = sql_store(database)
        assert sorted(job.decide(job.extract(store, day(19)), day(19)).to_reserve["subject_id"]) == [
            "i0", "i1", "i2", "i3"], dialect
