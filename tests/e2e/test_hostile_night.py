"""A whole night on hostile data (G6), on SQLite and on PostgreSQL, through the real flow,
a real SMTP server and the user's own tables (no primary keys: duplicated and missing
ids are possible): the night never stops; every row ends sent once, quarantined with a
reason, or not due, exactly as the row-by-row reference says; every message on the wire
is well-formed; and the same night again sends nothing."""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from email import message_from_bytes, policy
from pathlib import Path
from unittest import mock

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine, text

from dueflow.flows.nightly_alerts import nightly_alerts
from dueflow.tasks.adapters import db
from dueflow.tasks.adapters.sql_store import sql_store
from dueflow.tasks.core.dunning_rule import due_dunning_steps
from dueflow.tasks.core.keys import dunning_key, printable_id, renewal_key
from dueflow.tasks.core.message import HEADER_NAMES
from dueflow.tasks.core.validate import business_dates
from dueflow.tasks.jobs import DunningJob
from tests import examples
from tests.conftest import PG_URL, require_pg
from tests.helpers import factories, hostile
from tests.helpers.factories import OWN_TABLES, OWN_TYPES, sourced
from tests.helpers.smtp_server import SmtpSink

CONTRACTS = ("id", "vendor", "title", "amount", "currency", "renewal_date", "notify_email", "status")
CLIENTS = ("id", "name", "email", "locale", "notes", "dunning_paused")
INVOICES = ("id", "client_id", "number", "amount", "currency", "status", "sent_at", "due_date",
            "paid_at")
NIGHT = settings(max_examples=examples(6), deadline=None, derandomize=False,
                 suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                        HealthCheck.data_too_large])


@contextmanager
def own_database(kind: str, tmp: Path) -> Iterator[str]:
    """A fresh database with the user's own tables, then dueflow's (init-db)."""
    if kind == "sqlite":
        url = f"sqlite:///{tmp / f'{uuid.uuid4().hex}.db'}"
        types = OWN_TYPES["sqlite"]
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            for table, columns in OWN_TABLES.items():
                conn.execute(f"CREATE TABLE {table} ({columns.format(**types)})")
        try:
            db.init_db(db.engine_for(url), sample_tables=True)
            yield url
        finally:
            db.engine_for(url).dispose()
        return
    require_pg()
    schema = f"dueflow_h_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    types = OWN_TYPES["postgresql"]
    with admin.connect() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
        for table, columns in OWN_TABLES.items():
            conn.execute(text(f"CREATE TABLE {schema}.{table} ({columns.format(**types)})"))
    url = f"{PG_URL}?options=-csearch_path%3D{schema}"
    try:
        db.init_db(db.engine_for(url), sample_tables=True)
        yield url
    finally:
        db.engine_for(url).dispose()
        with admin.connect() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


def load(url: str, kind: str, table: str, columns: tuple[str, ...], rows: list[dict]) -> None:
    """Insert the rows as they are; on SQLite, invalid UTF-8 arrives as raw bytes in text."""
    if not rows:
        return
    if kind == "sqlite":
        def value(v: object) -> object:
            if isinstance(v, str) and any("\udc80" <= c <= "\udcff" for c in v):
                return v.encode("utf-8", "surrogateescape")  # bytes, cast to text below
            return v
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            marks = ", ".join("CASE WHEN typeof(?1) = 'blob' THEN CAST(?1 AS TEXT) ELSE ?1 END"
                              .replace("?1", f"?{i + 1}") for i in range(len(columns)))
            conn.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})",
                             [[value(r[c]) for c in columns] for r in rows])
        return
    with db.engine_for(url).begin() as conn:
        conn.execute(text(f"INSERT INTO {table} ({', '.join(columns)}) VALUES "
                          f"({', '.join(':' + c for c in columns)})"), [dict(r) for r in rows])


def postgres_safe(rows: list[dict], numeric: tuple[str, ...]) -> list[dict]:
    """PostgreSQL's numeric column refuses what is not a number: such values become NULL."""
    out = []
    for row in rows:
        row = dict(row)
        for column in numeric:
            value = row[column]
            if value is not None and hostile.to_number(value) is None:
                row[column] = None
        out.append(row)
    return out


def read_back(url: str, kind: str, table: str, columns: tuple[str, ...]) -> list[dict]:
    """The rows as the database holds them, as text (what dueflow reads: every date as it is
    written, dated by dueflow itself)."""
    casts = ", ".join(f"CAST({c} AS text) AS {c}" for c in columns)
    frame = db.read_frame(db.engine_for(url), f"SELECT {casts} FROM {table}", {})
    return frame.astype(object).where(frame.notna(), None).to_dict("records")


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgresql", marks=pytest.mark.pg)])
def test_copies_of_an_id_that_take_no_part_do_not_quarantine_it(kind, tmp_path):
    # Found by the night below: the copies extracted for their id came without paid_at,
    # looked open, and quarantined an invoice whose only open copy is for a paused client.
    clients = [factories.client("cl-1"), factories.client("cl-2", paused=True)]
    invoices = [factories.invoice("inv-2", "cl-2", None, status=None, paid_at=None),
                factories.invoice("inv-2", "cl-1", None, paid_at="2026-12-07T09:30:00+00:00"),
                factories.invoice("inv-3", "cl-1", None, status="void"),
                factories.invoice("inv-3", "cl-1", "2026-12-01T09:30:00+00:00", paid_at=None)]
    with own_database(kind, tmp_path) as url:
        load(url, kind, "clients", CLIENTS, clients)
        load(url, kind, "invoices", INVOICES, invoices)
        extracted = DunningJob.extract_all(sql_store(sourced(url)))
    decision = due_dunning_steps(extracted["invoices"], extracted["clients"], extracted["history"],
                                 hostile.AS_OF, (7, 14, 21), "UTC", None, "sent")
    assert set(decision.quarantined["source_id"]) == {"inv-3"}  # its void copy is not paid
    assert decision.due.empty


def assert_well_formed(raw: bytes, ledger: pd.DataFrame) -> str:
    assert all(len(line) <= 998 for line in raw.split(b"\r\n"))
    message = message_from_bytes(raw, policy=policy.strict)
    assert not message.defects and list(message.keys()) == list(HEADER_NAMES)
    key = str(message["X-Dueflow-Key"])
    row = ledger.loc[key]
    assert str(message["Subject"]) == row["subject"]
    assert [a.addr_spec for a in message["To"].addresses] == [row["recipient"]]
    assert message["Message-ID"] == row["message_id"]
    return key


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgresql", marks=pytest.mark.pg)])
@NIGHT
@given(data=st.data())
def test_a_night_on_hostile_data_never_stops_and_accounts_for_every_row(kind, data, prefect_server,
                                                                        tmp_path):
    postgres = kind == "postgresql"
    contracts = data.draw(hostile.contracts(postgres), "contracts")
    clients = data.draw(hostile.clients(postgres), "clients")
    invoices = data.draw(hostile.invoices(postgres), "invoices")
    if postgres:
        contracts = postgres_safe(contracts, ("amount",))
        invoices = postgres_safe(invoices, ("amount",))
    sink = SmtpSink()
    sink.start()
    try:
        with own_database(kind, tmp_path) as url, mock.patch.dict(os.environ, {
                "DUEFLOW_DATABASE_URL": url, "DUEFLOW_MAIL_URL": f"smtp://127.0.0.1:{sink.port}",
                "DUEFLOW_MAIL_FROM": "Équipe Finanzas, S.A. <alertas@corp.example>",
                "DUEFLOW_TIMEZONE": "UTC", "DUEFLOW_RUN_LOCK": "off"}):
            load(url, kind, "contracts", CONTRACTS, contracts)
            load(url, kind, "clients", CLIENTS, clients)
            load(url, kind, "invoices", INVOICES, invoices)
            stored_contracts = read_back(url, kind, "contracts", CONTRACTS)
            stored_invoices = read_back(url, kind, "invoices", INVOICES)
            stored_clients = read_back(url, kind, "clients", CLIENTS)

            first = nightly_alerts(as_of=hostile.AS_OF)
            again = nightly_alerts(as_of=hostile.AS_OF)

            renewal_dates = [hostile.as_date(r["renewal_date"]) for r in stored_contracts]
            renewals = hostile.expected_renewals(stored_contracts, renewal_dates)
            sent_dates = business_dates(pd.Series([r["sent_at"] for r in stored_invoices], dtype=object),
                                        "UTC").dt.date
            reminders = hostile.expected_reminders(stored_invoices, stored_clients,
                                                   [None if pd.isna(d) else d for d in sent_dates])
            due_keys = {renewal_key(r["id"], d, hostile.renewal_lead(d))
                        for r, d, e in zip(stored_contracts, renewal_dates, renewals, strict=True)
                        if e == "due"}
            due_keys |= {dunning_key(r["id"], "REMINDED_1")
                         for r, e in zip(stored_invoices, reminders, strict=True) if e == "due"}
            engine = db.engine_for(url)
            ledger = db.read_frame(engine, "SELECT key, status, recipient, subject, message_id"
                                           " FROM dueflow_ledger", {}).set_index("key")
            quarantine = db.quarantine_rows(engine)
    finally:
        sink.stop()

    assert set(ledger.index) == due_keys and set(ledger["status"]) <= {"sent"}
    received = [assert_well_formed(raw, ledger) for raw in sink.raw]
    assert Counter(received) == Counter(due_keys)  # each due key once, nothing else
    for job, rows, outcomes in (("renewal", stored_contracts, renewals),
                                ("dunning", stored_invoices, reminders)):
        mine = quarantine[quarantine["job"] == job]
        assert set(mine["source_id"]) == {printable_id(r["id"]) for r, e in zip(rows, outcomes, strict=True)
                                          if e == "quarantined"}, job
        assert mine["reason"].str.len().gt(0).all()
    assert first.sent == len(due_keys) and first.failed == first.pending == first.not_sent == 0
    assert again.sent == again.won == 0 and again.quarantined == first.quarantined
