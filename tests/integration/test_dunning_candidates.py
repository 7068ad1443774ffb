"""A night reads only the invoices whose next dunning step may be due (sql/dunning_candidates,
sql/fragments/dunning_candidate), and only their clients and history. On random invoices,
clients and ledgers, on SQLite and PostgreSQL, the SQL must pick every invoice the pure rule
(tasks.core.decide.dunning_may_be_due) picks — with every other copy of its id — and a night
decided on what it reads must be the night decided on every open invoice: the same keys to
reserve, the same due rows, the same quarantines. On PostgreSQL the start columns' types are
drawn too: a timestamptz, timestamp or date sent_at is read by sql/dunning_candidates_typed's
range (a text one, or a due_date read through a cast, by the text comparison), with the values
that range must not miss: NULL, ±infinity, BC, years after 9999, times near midnight in
business zones far from UTC, and the days DST skips or repeats a midnight (America/Santiago)."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine, text

from dueflow.tasks.adapters import db
from dueflow.tasks.adapters.sql_store import sql_store
from dueflow.tasks.core.addresses import Mailbox
from dueflow.tasks.core.dunning_rule import due_dunning_steps, dunning_may_be_due
from dueflow.tasks.jobs import DunningJob
from tests import examples
from tests.conftest import PG_URL, require_pg
from tests.helpers.factories import with_optional_columns, without_keys

AS_OF = date(2027, 1, 20)
# Nights whose bound (the day after the last start that is due) falls on a day America/Santiago
# starts (2027-09-05: its midnight does not exist) or ends DST (2027-04-04: after a repeated hour).
NIGHTS = st.sampled_from([AS_OF, AS_OF, date(2027, 9, 11), date(2027, 4, 10)])
ids = st.sampled_from(["a", "b", "c", "d", "e", "f", None])
days = st.integers(min_value=-2, max_value=30)
offsets = st.sampled_from(["+00:00", "+14:00", "-11:00", "+05:30", "-03:00", "-04:00"])
times = st.sampled_from(["00:00:00", "00:30:00", "01:30:00", "09:30:00", "12:30:00", "23:30:00",
                         "23:59:59.999999"])
# What a typed column holds that is not a plain ISO date once written as text: the text
# comparison reads it (the rule quarantines it or it is long past), so the typed range must.
# (A start in 9999 that a zone ahead or behind makes another year crashes the rule itself, on
# every open invoice: not drawn here.)
ODD_STARTS = ["infinity", "-infinity", "0044-03-15 BC", "10000-01-02 12:00:00+00:00"]
STEP_NAMES = {1: "REMINDED_1", 2: "REMINDED_2", 3: "OVERDUE"}
# PostgreSQL types of the start columns (sent_at: the typed range or, as text, the text comparison;
# due_date: the range where it is a date, the text comparison where the projection casts it).
SENT_TYPES = st.sampled_from(["timestamptz", "timestamptz", "timestamp", "date", "text"])
DUE_TYPES = st.sampled_from(["date", "date", "timestamp", "timestamptz"])


def stamp(as_of: date, day: int, time: str, offset: str) -> str:
    return f"{(as_of - timedelta(days=day)).isoformat()}T{time}{offset}"


@st.composite
def scenarios(draw: st.DrawFn) -> dict:
    as_of = draw(NIGHTS)
    invoices = draw(st.lists(st.fixed_dictionaries({
        "id": ids,
        "client_id": st.sampled_from(["k1", "k2", "k3", None]),
        "status": st.sampled_from(["sent", "sent", "sent", "paid", "draft", "Sent", None]),
        "sent_at": st.one_of(st.builds(stamp, st.just(as_of), days, times, offsets), st.none(),
                             st.sampled_from(ODD_STARTS)),
        "due_date": st.one_of(days.map(lambda d: (as_of - timedelta(days=d - 10)).isoformat()), st.none(),
                              st.sampled_from(["infinity", "-infinity", "0044-03-15 BC", "10000-01-01"])),
        "paid_at": st.sampled_from([None, None, None, "2027-01-02T10:00:00+00:00"]),
        "amount": st.sampled_from(["10.00", "10.001", "-5", "0"]),
        # a hold: none, one that ended, one after tonight, and text only SQLite can hold
        "hold": st.sampled_from([None, None, None, "2027-01-12", "2027-01-20", "2027-01-21", "2027-03-01",
                                 "2027-02-30", " 2027-03-01", "2027-03-01T10:00:00", "later"]),
    }), max_size=7))
    clients = draw(st.lists(st.fixed_dictionaries({
        "id": st.sampled_from(["k1", "k2", "k3"]),
        "paused": st.sampled_from([False, False, True]),
        "email": st.sampled_from(["ap@client.example", "not-an-address"]),
    }), max_size=4))
    subjects = [i["id"] for i in invoices if i["id"]] or ["a"]
    ledger = draw(st.lists(st.fixed_dictionaries({
        "subject_id": st.sampled_from(subjects),
        "step_rank": st.sampled_from([1, 1, 2, 2, 3]),
        "status": st.sampled_from(["sent", "sent", "adopted", "pending", "failed"]),
        "as_of": days, "attempt_as_of": st.one_of(st.none(), days),
    }), max_size=6))
    return {"invoices": invoices, "clients": clients, "ledger": ledger, "as_of": as_of,
            "delays": draw(st.sampled_from([(7, 5, 7), (1, 1, 1), (3, 10, 2)])),
            "start": draw(st.sampled_from(["sent", "due"])),
            "timezone": draw(st.sampled_from(["UTC", "Pacific/Kiritimati", "Pacific/Pago_Pago",
                                              "America/Santiago", "Europe/Berlin"])),
            "sent_type": draw(SENT_TYPES), "due_type": draw(DUE_TYPES)}


@pytest.fixture(scope="module")
def databases(tmp_path_factory) -> Iterator[dict[str, str]]:
    """An initialised SQLite file and PostgreSQL schema whose invoices and clients, like a
    user's own, have no primary key (duplicated ids can be stored)."""
    require_pg()
    sqlite_url = f"sqlite:///{Path(tmp_path_factory.mktemp('candidates')) / 'c.db'}"
    schema = f"dueflow_c_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    pg_url = f"{PG_URL}?options=-csearch_path%3D{schema}"
    for url in (sqlite_url, pg_url):
        db.init_db(db.engine_for(url), sample_tables=True)
        without_keys(url, "invoices", "clients")
        with_optional_columns(url)
    try:
        yield {"sqlite": sqlite_url, "postgresql": pg_url}
    finally:
        for url in (sqlite_url, pg_url):
            db.engine_for(url).dispose()
        with admin.connect() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


def _date_or_none(text: str | None) -> str | None:
    try:
        return date.fromisoformat(text).isoformat() if text else None
    except ValueError:
        return None


def load(url: str, scenario: dict) -> None:
    postgres = url.startswith("postgresql")
    as_of = scenario.get("as_of", AS_OF)
    invoices = [{"id": i["id"], "client_id": i["client_id"], "number": "F-1", "amount": i["amount"],
                 "currency": "EUR", "status": i["status"], "sent_at": i["sent_at"],
                 "due_date": i["due_date"], "paid_at": i["paid_at"],
                 "dunning_hold_until": _date_or_none(i["hold"]) if postgres else i["hold"]}
                for i in scenario["invoices"]]
    clients = [{"id": c["id"], "name": "Client", "email": c["email"], "locale": "en",
                "dunning_paused": c["paused"]} for c in scenario["clients"]]
    ledger = {}
    for r in scenario["ledger"]:
        key = f"dunning/{r['subject_id']}/{STEP_NAMES[r['step_rank']]}"
        ledger[key] = {"key": key, "job": "dunning", "subject_id": r["subject_id"], "cycle": "",
                       "step": STEP_NAMES[r["step_rank"]], "step_rank": r["step_rank"], "status": r["status"],
                       "as_of": (as_of - timedelta(days=r["as_of"])).isoformat(),
                       "attempt_as_of": None if r["attempt_as_of"] is None
                       else (as_of - timedelta(days=r["attempt_as_of"])).isoformat()}
    with db.writing(db.engine_for(url)) as conn:
        for table in ("invoices", "clients", "dueflow_ledger"):
            conn.execute(text(f"DELETE FROM {table}"))
        if postgres:  # the start columns as the scenario types them (the table is empty)
            for column, kind in (("sent_at", scenario.get("sent_type", "timestamptz")),
                                 ("due_date", scenario.get("due_type", "date"))):
                conn.execute(text(f"ALTER TABLE invoices ALTER COLUMN {column} TYPE {kind}"
                                  f" USING CAST(CAST({column} AS text) AS {kind})"))
        for table, items in (("invoices", invoices), ("clients", clients),
                             ("dueflow_ledger", list(ledger.values()))):
            for item in items:
                conn.execute(text(f"INSERT INTO {table} ({', '.join(item)}) VALUES "
                                  f"({', '.join(':' + c for c in item)})"), item)


def night(decision) -> tuple:
    due = decision.due
    return (sorted(decision.to_reserve["key"]), sorted(zip(due["key"], due["handled"], strict=True)),
            Counter(zip(decision.quarantined["source_id"], decision.quarantined["reason"], strict=True)))


@settings(max_examples=examples(40), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(scenario=scenarios())
@pytest.mark.pg
def test_the_sql_candidates_are_the_pure_rule_and_change_no_decision(databases, scenario):
    delays, start, timezone = scenario["delays"], scenario["start"], scenario["timezone"]
    as_of = scenario["as_of"]
    for dialect, url in databases.items():
        load(url, scenario)
        database = db.Database(url).with_sources(timezone=timezone)
        assert database.sources is not None
        typed = database.sources.typed_start(start)
        assert typed == (dialect == "postgresql" and scenario["sent_type"] != "text"
                         and (start == "sent" or scenario["due_type"] == "date")), dialect
        event(f"{dialect}: {'typed range' if typed else 'text comparison'}")
        full = DunningJob.extract_all(sql_store(database))
        job = DunningJob(delays, start, timezone, None, Mailbox("alerts@dueflow.test"))
        tonight = job.extract(sql_store(database), as_of)

        # Every invoice the pure rule picks is read tonight, with every copy of its id.
        picked = dunning_may_be_due(full["invoices"], full["history"], as_of, delays, timezone, start)
        wanted = full["invoices"].reset_index(drop=True)[picked.to_numpy()]
        read = Counter(tonight["invoices"]["id"].fillna("(none)"))
        assert not Counter(wanted["id"].fillna("(none)")) - read, dialect
        for invoice_id in set(wanted["id"].dropna()):
            assert read[invoice_id] == (full["invoices"]["id"] == invoice_id).sum(), dialect
        left_out = len(full["invoices"]) - len(wanted)
        event(f"{dialect}: {min(len(wanted), 2)}+ candidate(s), {min(left_out, 2)}+ left out")

        # Decided on what the night reads, or on every open invoice: the same night.
        args = (as_of, delays, timezone, "escalations@example.com", start)
        everything = due_dunning_steps(full["invoices"], full["clients"], full["history"], *args)
        candidates = due_dunning_steps(tonight["invoices"], tonight["clients"], tonight["history"], *args)
        assert night(candidates) == night(everything), dialect


@pytest.mark.pg
def test_under_a_datestyle_that_is_not_iso_the_typed_read_takes_every_open_invoice_without_a_step(
        databases):
    """The text comparison matched no start when DateStyle does not write ISO dates, so it read
    every step-less open invoice; the typed statement reads them all too then (its third
    branch). psycopg2 sets ISO on each connection it opens: a session that changes it later."""
    sent = {"a": "2027-01-19T12:00:00+00:00", "b": "2027-01-01T12:00:00+00:00"}
    scenario = {"invoices": [{"id": i, "client_id": "k1", "status": "sent", "sent_at": at, "due_date": None,
                              "paid_at": None, "amount": "10.00", "hold": None} for i, at in sent.items()],
                "clients": [], "ledger": []}
    url = databases["postgresql"]
    load(url, scenario)
    database = db.Database(url).with_sources(timezone="UTC")
    assert database.sources is not None and database.sources.typed_start("sent")
    bounds = {"start": "sent", "start_by": "2027-01-14", "start_by_text": "2027-01-16",
              "after_first_by": "2027-01-15", "after_second_by": "2027-01-13", "hold_as_of": "2027-01-20",
              "as_of": "2027-01-20"}
    for name in ("dunning_candidates", "dunning_candidates_typed"):
        for datestyle, read in (("ISO, MDY", ["b"]), ("SQL, DMY", ["a", "b"])):
            with database.engine.connect() as conn:
                conn.execute(text("SELECT set_config('DateStyle', :style, true)"), {"style": datestyle})
                ids = conn.execute(text(f"SELECT id FROM ({database.sources.statement(name)}) c"),
                                   bounds).scalars().all()  # psycopg2 reads no date of that style
                conn.rollback()
            assert sorted(ids) == read, (name, datestyle)
