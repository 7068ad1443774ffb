"""The conditions that carry a guarantee are written once per dialect (sql/fragments/):
on the same generated data, SQLite and PostgreSQL must pick exactly the same rows."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine, text

from dueflow.sql import with_fragments
from dueflow.tasks.adapters import db
from dueflow.tasks.adapters.sources import with_sources
from tests import examples
from tests.conftest import PG_URL, require_pg
from tests.helpers.factories import sourced

AS_OF = date(2027, 1, 10)
# What each condition is asked about: the rows of `probe` (a candidate or a ledger row).
CONDITIONS = ("invoice_open", "contract_renews_on_cycle", "renewal_no_more_urgent",
              "dunning_step_is_next", "still_due")
PROBE = ("CREATE TABLE probe (key text, job text, subject_id text, cycle text, step text,"
         " step_rank integer, previous_by {date})")

days = st.sampled_from([AS_OF + timedelta(days=d) for d in (-8, -3, -1, 0, 1, 3)])
ids = st.sampled_from(["a", "b", "c"])


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, list[dict]]:
    """Source rows and ledger rows that often refer to each other: the same few ids,
    ledger cycles that are often a contract's renewal date."""
    contracts = draw(st.lists(st.fixed_dictionaries({
        "id": ids, "status": st.sampled_from(["active", "active", "cancelled", "Active", None]),
        "renewal_date": st.one_of(days, days, st.none())}), max_size=3, unique_by=lambda r: r["id"]))
    clients = draw(st.lists(st.fixed_dictionaries({
        "id": st.sampled_from(["k1", "k2"]), "dunning_paused": st.sampled_from([False, False, True, None])}),
        max_size=2, unique_by=lambda r: r["id"]))
    invoices = draw(st.lists(st.fixed_dictionaries({
        "id": ids, "client_id": st.sampled_from(["k1", "k2", "ghost"]),
        "status": st.sampled_from(["sent", "sent", "paid", "void", "Sent", None]),
        "paid_at": st.one_of(st.none(), st.none(), days.map(lambda d: f"{d}T10:00:00+00:00"))}),
        max_size=3, unique_by=lambda r: r["id"]))
    renewal_dates = [c["renewal_date"].isoformat() for c in contracts if c["renewal_date"]]
    cycles = st.sampled_from(renewal_dates) if renewal_dates else days.map(date.isoformat)
    ledger = draw(st.lists(st.fixed_dictionaries({
        "job": st.sampled_from(["renewal", "dunning"]), "subject_id": ids,
        "cycle": st.one_of(cycles, cycles, days.map(date.isoformat), st.just("")),
        "step_rank": st.sampled_from([1, 2, 3, 15, 30, 60]),
        "status": st.sampled_from(["pending", "sent", "failed", "adopted"]), "as_of": days,
        "attempt_as_of": st.one_of(st.none(), days), "previous_by": days}), max_size=6))
    return {"contracts": contracts, "clients": clients, "invoices": invoices, "ledger": ledger}


@pytest.fixture(scope="module")
def databases(tmp_path_factory) -> Iterator[dict[str, str]]:
    """An initialised SQLite file and PostgreSQL schema, reused by every example."""
    require_pg()
    sqlite_url = f"sqlite:///{Path(tmp_path_factory.mktemp('dialects')) / 'd.db'}"
    schema = f"dueflow_d_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    pg_url = f"{PG_URL}?options=-csearch_path%3D{schema}"
    for url, kind in ((sqlite_url, "text"), (pg_url, "date")):
        engine = db.engine_for(url)
        db.init_db(engine, sample_tables=True)
        with db.writing(engine) as conn:
            conn.execute(text(PROBE.format(date=kind)))
    try:
        yield {"sqlite": sqlite_url, "postgresql": pg_url}
    finally:
        for url in (sqlite_url, pg_url):
            db.engine_for(url).dispose()
        with admin.connect() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


def load(url: str, rows: dict[str, list[dict]]) -> None:
    with db.writing(db.engine_for(url)) as conn:
        for table in ("contracts", "clients", "invoices", "dueflow_ledger", "probe"):
            conn.execute(text(f"DELETE FROM {table}"))
        for table, items in rows.items():
            for item in items:
                conn.execute(text(f"INSERT INTO {table} ({', '.join(item)}) VALUES "
                                  f"({', '.join(':' + c for c in item)})"), item)


def chosen(url: str, dialect: str, condition: str) -> set[str]:
    sources = sourced(url).sources
    assert sources is not None
    sql = with_sources(with_fragments(f"SELECT x.key FROM probe x WHERE /*include {condition}*/", dialect),
                       sources)
    with db.engine_for(url).connect() as conn:
        return {row[0] for row in conn.execute(text(sql), {"as_of": AS_OF.isoformat()})}


@settings(max_examples=examples(40), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(scenario=scenarios())
@pytest.mark.pg
def test_both_dialects_pick_the_same_rows(databases, scenario):
    contracts, clients, invoices, ledger = (scenario[name] for name in
                                            ("contracts", "clients", "invoices", "ledger"))
    stored = [{"key": f"{r['job']}/{n}", "job": r["job"], "subject_id": r["subject_id"],
               "cycle": r["cycle"], "step": str(r["step_rank"]), "step_rank": r["step_rank"],
               "status": r["status"], "as_of": r["as_of"].isoformat(),
               "attempt_as_of": r["attempt_as_of"] and r["attempt_as_of"].isoformat()}
              for n, r in enumerate(ledger)]
    probe = [{"key": f"{r['job']}/{n}", "job": r["job"], "subject_id": r["subject_id"], "cycle": r["cycle"],
              "step": str(r["step_rank"]), "step_rank": r["step_rank"],
              "previous_by": r["previous_by"].isoformat()} for n, r in enumerate(ledger)]
    rows = {"contracts": [c | {"renewal_date": c["renewal_date"] and c["renewal_date"].isoformat()}
                          for c in contracts],
            "clients": clients, "invoices": invoices, "dueflow_ledger": stored, "probe": probe}
    for url in databases.values():
        load(url, rows)
    for condition in CONDITIONS:
        picked = {dialect: chosen(url, dialect, condition) for dialect, url in databases.items()}
        assert picked["sqlite"] == picked["postgresql"], condition
