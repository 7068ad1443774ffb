"""The quiet night's shortcut (sql/extract_contracts, sql/fragments/renewal_settled): rows the
ledger already settles are not decided again. On random contracts and ledgers, on SQLite and
PostgreSQL, the SQL must pick exactly the rows of the pure rule
(tests/helpers/oracles.py, renewal_settled), and a night decided through the shortcut must reserve
exactly what the full decision reserves, report as handled everything it reported as
handled, and drop only quarantines of rows the ledger settles."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine, text

from dueflow.sql import statement, with_fragments
from dueflow.tasks.adapters import db
from dueflow.tasks.core.renewal_rule import due_renewal_alerts, renewal_window, settled_apart, with_settled
from tests import examples
from tests.conftest import PG_URL, require_pg
from tests.helpers.factories import sourced, without_keys
from tests.helpers.oracles import renewal_settled

AS_OF = date(2027, 1, 10)
ids = st.sampled_from(["a", "b", "c", "d", "e", "f"])
offsets = st.sampled_from([-3, 0, 1, 7, 10, 11, 15, 16, 29, 30, 31, 60, 61])
lead_sets = st.sampled_from([[15, 30, 60], [10, 30], [0, 7], [30]])


@st.composite
def scenarios(draw: st.DrawFn) -> dict:
    """Contracts (duplicated ids allowed) and renewal ledger rows that often name their
    cycles, with every status."""
    contracts = draw(st.lists(st.fixed_dictionaries({
        "id": ids,
        "status": st.sampled_from(["active", "active", "active", "cancelled", "Active", None]),
        "renewal_date": st.one_of(offsets.map(lambda d: AS_OF + timedelta(days=d)), st.none()),
        "notify_email": st.sampled_from(["o@example.com", "o@example.com", "not-an-address"]),
    }), max_size=6))
    cycles = [c["renewal_date"] for c in contracts if c["renewal_date"]] or [AS_OF]
    pairs = [(c["id"], c["renewal_date"]) for c in contracts if c["renewal_date"]] or [("a", AS_OF)]
    # Mostly a contract's own cycle, so that rows are often settled; sometimes any.
    own = st.sampled_from(pairs)
    subject_cycle = st.one_of(own, own, own, st.tuples(ids, st.sampled_from(cycles)))
    ledger = draw(st.lists(st.fixed_dictionaries({
        "pair": subject_cycle, "step_rank": st.sampled_from([0, 7, 10, 15, 30, 60]),
        "status": st.sampled_from(["pending", "sent", "failed", "adopted", "sent"]),
    }).map(lambda r: {"subject_id": r["pair"][0], "cycle": r["pair"][1], "step_rank": r["step_rank"],
                      "status": r["status"]}), max_size=8))
    return {"contracts": contracts, "ledger": ledger, "leads": draw(lead_sets)}


@pytest.fixture(scope="module")
def databases(tmp_path_factory) -> Iterator[dict[str, str]]:
    """An initialised SQLite file and PostgreSQL schema whose contracts table, like a
    user's own, has no primary key (duplicated ids can be stored)."""
    require_pg()
    sqlite_url = f"sqlite:///{Path(tmp_path_factory.mktemp('settled')) / 's.db'}"
    schema = f"dueflow_s_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    pg_url = f"{PG_URL}?options=-csearch_path%3D{schema}"
    for url in (sqlite_url, pg_url):
        db.init_db(db.engine_for(url), sample_tables=True)
        without_keys(url, "contracts")
    try:
        yield {"sqlite": sqlite_url, "postgresql": pg_url}
    finally:
        for url in (sqlite_url, pg_url):
            db.engine_for(url).dispose()
        with admin.connect() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


def load(url: str, scenario: dict) -> None:
    contracts = [{"id": c["id"], "vendor": "Vendor", "title": "Service", "amount": "10.00",
                  "currency": "EUR", "renewal_date": c["renewal_date"] and c["renewal_date"].isoformat(),
                  "notify_email": c["notify_email"], "status": c["status"]} for c in scenario["contracts"]]
    ledger = {}
    for r in scenario["ledger"]:
        key = f"renewal/{r['subject_id']}/{r['cycle'].isoformat()}/{r['step_rank']}d"
        ledger[key] = {"key": key, "job": "renewal", "subject_id": r["subject_id"],
                       "cycle": r["cycle"].isoformat(), "step": f"{r['step_rank']}d",
                       "step_rank": r["step_rank"], "status": r["status"], "as_of": "2026-12-01"}
    with db.writing(db.engine_for(url)) as conn:
        for table in ("contracts", "dueflow_ledger"):
            conn.execute(text(f"DELETE FROM {table}"))
        for table, items in (("contracts", contracts), ("dueflow_ledger", list(ledger.values()))):
            for item in items:
                conn.execute(text(f"INSERT INTO {table} ({', '.join(item)}) VALUES "
                                  f"({', '.join(':' + c for c in item)})"), item)


def full_extract(url: str, dialect: str, params: dict) -> pd.DataFrame:
    """The extraction before the shortcut: every row that may be due, and its id's copies."""
    sql = with_fragments(
        "SELECT id, vendor, title, amount, currency, renewal_date, notify_email, status FROM contracts"
        " WHERE /*include contract_may_be_due*/"
        " OR id IN (SELECT id FROM contracts WHERE /*include contract_may_be_due*/)", dialect)
    frame = db.extract_frame(db.engine_for(url), sql, params)
    if dialect == "sqlite":  # as the SQLite extract reads it
        frame["renewal_date"] = frame["renewal_date"].map(lambda v: v if v is None else str(v)[:10])
    return frame


@settings(max_examples=examples(30), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(scenario=scenarios())
@pytest.mark.pg
def test_the_sql_shortcut_is_the_pure_rule_and_changes_no_decision(databases, scenario):
    leads = scenario["leads"]
    start, end = renewal_window(AS_OF, leads)
    params = {"window_start": start.isoformat(), "window_end": end.isoformat(),
              "as_of": AS_OF.isoformat(), "leads": json.dumps(sorted(leads))}
    for dialect, url in databases.items():
        load(url, scenario)
        engine = db.engine_for(url)
        extracted = db.extract_frame(engine, sourced(url).source_statement("extract_contracts"), params)
        full = full_extract(url, dialect, params)
        history = db.read_frame(engine, statement("renewal_history"), {"as_of": AS_OF.isoformat()})

        # The SQL settles exactly the rows the pure rule settles, with tonight's lead.
        pure = renewal_settled(full, history, db.open_keys(engine), AS_OF, leads)
        expected = sorted(zip(full.loc[pure.to_numpy(), "id"].astype(str),
                              full.loc[pure.to_numpy(), "renewal_date"].astype(str).str[:10], strict=True))
        settled_rows = extracted[extracted["settled_lead"].notna()]
        assert sorted(zip(settled_rows["id"].astype(str), settled_rows["renewal_date"].astype(str).str[:10],
                          strict=True)) == expected, dialect
        assert len(extracted) == len(full), dialect  # settled rows still come, as keys only
        event(f"{dialect}: {min(len(settled_rows), 2)}+ settled row(s)")

        # Decided through the shortcut (as tasks.steps does) or in full: the same night.
        before = due_renewal_alerts(full, history, AS_OF, leads)
        unsettled, settled = settled_apart(extracted)
        history_now = db.renewal_history_of(engine, extracted, AS_OF, "UTC")
        after = with_settled(due_renewal_alerts(unsettled, history_now, AS_OF, leads), settled, AS_OF)
        assert sorted(after.to_reserve["key"]) == sorted(before.to_reserve["key"]), dialect
        handled_before = set(before.due.loc[before.due["handled"], "key"])
        handled_after = set(after.due.loc[after.due["handled"], "key"])
        assert handled_before <= handled_after, dialect
        dropped = set(before.quarantined["source_id"]) - set(after.quarantined["source_id"])
        assert set(after.quarantined["source_id"]) <= set(before.quarantined["source_id"]), dialect
        assert dropped <= set(settled_rows["id"].astype(str)), dialect
        # What a settled row is reported as: its key, handled (never failed or pending earlier).
        assert handled_after - handled_before <= {
            f"renewal/{i}/{str(d)[:10]}/{int(lead)}d" for i, d, lead in zip(
                settled_rows["id"], settled_rows["renewal_date"], settled_rows["settled_lead"], strict=True)}
