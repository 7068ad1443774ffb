"""What the client still owes (issue 43) on SQLite and a real PostgreSQL, with the payments
and credit notes in the company's own relation (no key; numeric and date on PostgreSQL,
text on SQLite): the scenario of tests/helpers/payments.py, which the twin runs in
tests/unit/test_open_amount.py, and the reservation's re-check in the database."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import text

from dueflow.blocks.settings import Settings
from dueflow.tasks.adapters import db
from dueflow.tasks.adapters.sql_store import sql_store
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.ports import Store
from dueflow.tasks.jobs import night_jobs
from tests.conftest import pg_schema, require_pg
from tests.helpers.factories import insert, sourced, with_optional_columns, without_keys
from tests.helpers.nights import ENV, parameters
from tests.helpers.payments import (
    AS_OF,
    CLIENTS,
    DELAYS,
    INVOICES,
    PAYMENTS_TABLE,
    check_nights,
    claimed_rows_keep_their_text,
    nights_with_payments,
    paid_between_reservation_and_send,
    paid_in_full_between_reservation_and_send,
    sql_pay,
)

KINDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.pg)]


@contextmanager
def company(kind: str, invoices: list[dict]) -> Iterator[tuple[Store, str]]:
    """The company's own tables, its payments relation among them, and dueflow's ledger."""
    def filled(url: str) -> tuple[Store, str]:
        db.init_db(db.engine_for(url), sample_tables=True)
        without_keys(url, "contracts", "clients", "invoices")
        with_optional_columns(url)
        engine = db.engine_for(url)
        with engine.begin() as conn:
            conn.execute(text(f"CREATE TABLE payments ({PAYMENTS_TABLE[engine.dialect.name]})"))
        insert(url, "clients", CLIENTS)
        insert(url, "invoices", invoices)
        return sql_store(sourced(url)), url

    if kind == "postgresql":
        require_pg()
        with pg_schema() as url:
            yield filled(url)
        return
    folder = Path(tempfile.mkdtemp(prefix="dueflow-payments-"))
    url = f"sqlite:///{folder / 'dueflow.db'}"
    try:
        yield filled(url)
    finally:
        db.engine_for(url).dispose()


@pytest.mark.parametrize("kind", KINDS)
def test_payments_and_credit_notes_between_nights_in_the_companys_own_relation(kind):
    with company(kind, INVOICES) as (store, url):
        engine = db.engine_for(url)

        def body(key: str) -> str:
            return str(db.read_frame(engine, "SELECT body_text FROM dueflow_ledger WHERE key = :k",
                                     {"k": key})["body_text"].iloc[0])

        def reasons() -> dict[str, str]:
            frame = db.read_frame(engine, "SELECT source_id, reason FROM dueflow_quarantine", {})
            return dict(zip(frame["source_id"], frame["reason"], strict=True))

        check_nights(nights_with_payments(store, sql_pay(url), body, reasons))


@pytest.mark.parametrize("kind", KINDS)
def test_the_reservation_reads_the_payments_again_and_refuses_an_invoice_paid_meanwhile(kind):
    with company(kind, INVOICES[:2]) as (store, url):
        _, dunning = night_jobs(Settings.from_env(ENV), parameters(dunning_delays=DELAYS), "secret")
        due = dunning.decide(dunning.extract(store, AS_OF), AS_OF).due
        assert sorted(due["amount"]) == ["1000.00", "1000.00"]
        sql_pay(url)("i1", "300.00", "EUR", AS_OF)  # in part, while the night runs
        assert store.ledger.reserve("dunning", due, AS_OF, "run") == {"dunning/i2/REMINDED_1"}
        again = dunning.decide(dunning.extract(store, AS_OF), AS_OF).due
        assert again.loc[again["subject_id"] == "i1", "amount"].tolist() == ["700.00"]
        assert store.ledger.reserve("dunning", again, AS_OF, "run") == {"dunning/i1/REMINDED_1"}


def row_of(url: str):
    def row(key: str) -> dict:
        frame = db.read_frame(db.engine_for(url), "SELECT * FROM dueflow_ledger WHERE key = :k", {"k": key})
        return {column: (None if pd.isna(value) else value) for column, value in frame.iloc[0].items()}
    return row


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("crash", [False, True], ids=["sent", "died-after-rendering-again"])
def test_a_payment_between_reservation_and_send_is_rendered_again_under_the_same_key(kind, crash):
    with company(kind, INVOICES[:1]) as (store, url):
        paid_between_reservation_and_send(store, sql_pay(url), row_of(url), crash)


@pytest.mark.parametrize("kind", KINDS)
def test_paid_in_full_between_reservation_and_send_nothing_goes(kind):
    with company(kind, INVOICES[:1]) as (store, url):
        paid_in_full_between_reservation_and_send(store, sql_pay(url), row_of(url))


@pytest.mark.parametrize("kind", KINDS)
def test_a_claimed_reminder_keeps_its_text(kind):
    with company(kind, INVOICES[:1]) as (store, url):
        claimed_rows_keep_their_text(store, sql_pay(url), row_of(url))
