"""Keys that survive the company's changes (issue 36, case 2; G1 as the client sees it).

A company's views are recreated between nights with their ids in another type or spelling.
Before, a view's integer `id` recreated as `numeric(10,2)` made new keys (`dunning/1.00/…`)
and the next night sent every open invoice its first reminder again. Now a change of type
keeps every key (an id is read as the text of its value), and a change of spelling — padded
with zeros, a trailing space, a uuid in capitals — stops the night before anything is
written, with one line; `dueflow rekey --apply` moves the history to the new spelling and
the nights go on, each email once. On SQLite and on a real PostgreSQL, through the flow and
the `dueflow` command."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from sqlalchemy import text

from dueflow.blocks.errors import ConfigError
from dueflow.flows.nightly_alerts import nightly_alerts
from dueflow.tasks.adapters import db

D0 = date(2027, 5, 10)
SENT = D0 - timedelta(days=8)  # the first reminder is due on D0, the second 5 days after
RENEWS = D0 + timedelta(days=30)  # the 30-day alert on D0, the 15-day one on D0 + 15
UUIDS = ("6f1c2b0e-93a4-4c55-9b1e-0d3c7a8e5f21", "a0b1c2d3-e4f5-4a6b-8c7d-9e0f1a2b3c4d")

# How each night's views spell the ids, per database: the types a company moves between.
SAME_VALUE = {
    "postgresql": {"int": "{c}", "bigint": "CAST({c} AS bigint)", "numeric": "CAST({c} AS numeric(10,2))",
                   "text": "CAST({c} AS text)"},
    "sqlite": {"int": "{c}", "real": "CAST({c} AS REAL)", "numeric": "CAST({c} AS NUMERIC)",
               "text": "CAST({c} AS TEXT)"},
}
RESPELLED = {
    "postgresql": {"zeros": "lpad(CAST({c} AS text), 6, '0')", "space": "CAST({c} AS text) || ' '"},
    "sqlite": {"zeros": "printf('%06d', {c})", "space": "CAST({c} AS TEXT) || ' '"},
}


def company_tables(url: str, uuid_ids: bool = False) -> str:
    """The company's base tables (integer ids, or uuids) in place of the sample tables;
    returns the dialect."""
    engine = db.engine_for(url)
    dialect = engine.dialect.name
    uid = ("uuid" if dialect == "postgresql" else "text") if uuid_ids else "integer"
    with engine.begin() as conn:
        for name in ("invoices", "clients", "contracts"):
            conn.execute(text(f"DROP TABLE {name}"))
        conn.execute(text(f"CREATE TABLE t_clients (id {uid}, name text, email text, locale text, notes text,"
                          " dunning_paused boolean)"))
        conn.execute(text(f"CREATE TABLE t_invoices (id {uid}, client_id {uid}, number text, amount numeric,"
                          " currency text, status text, sent_at text, due_date date, paid_at text)"))
        conn.execute(text(f"CREATE TABLE t_contracts (id {uid}, vendor text, title text, amount numeric,"
                          " currency text, renewal_date date, notify_email text, status text)"))
        ids = UUIDS if uuid_ids else (1, 2)
        conn.execute(text("INSERT INTO t_clients VALUES (:id, 'Northwind', 'ap@northwind.example', 'en', '',"
                          " false)"), {"id": ids[0]})
        for n, invoice in enumerate(ids, start=1):
            conn.execute(text("INSERT INTO t_invoices VALUES (:id, :client, :number, 980.40, 'EUR', 'sent',"
                              " :sent, :due, NULL)"),
                         {"id": invoice, "client": ids[0], "number": f"2027-{n:04d}",
                          "sent": SENT.isoformat(), "due": SENT + timedelta(days=30)})
        conn.execute(text("INSERT INTO t_contracts VALUES (:id, 'Acme', 'Hosting', 1250.50, 'EUR', :renews,"
                          " 'owner@corp.example', 'active')"), {"id": ids[0], "renews": RENEWS})
    return dialect


def spell_ids(url: str, expression: str) -> None:
    """The company's views recreated with every id (and client_id) read through `expression`."""
    engine = db.engine_for(url)
    with engine.begin() as conn:
        for name, rest in (("clients", "name, email, locale, notes, dunning_paused"),
                           ("invoices", "{client} AS client_id, number, amount, currency, status, sent_at,"
                                        " due_date, paid_at"),
                           ("contracts", "vendor, title, amount, currency, renewal_date, notify_email,"
                                         " status")):
            conn.execute(text(f"DROP VIEW IF EXISTS {name}"))
            columns = rest.format(client=expression.format(c="client_id"))
            conn.execute(text(f"CREATE VIEW {name} AS SELECT {expression.format(c='id')} AS id, {columns}"
                              f" FROM t_{name}"))


def night(on: date) -> list[str]:
    """The keys one night sent."""
    summary = nightly_alerts(as_of=on)
    return sorted(summary.rows.loc[summary.rows["status"] == "sent", "key"])


def ledger(url: str) -> dict[str, str]:
    rows = db.ledger_rows(db.engine_for(url))
    return dict(zip(rows["key"], rows["status"], strict=True))


def test_a_new_id_type_keeps_every_key_and_a_new_spelling_stops_until_rekeyed(
        run_env, smtp_sink, dueflow_cli, mail_env):
    url = run_env
    dialect = company_tables(url)
    spell_ids(url, "{c}")
    assert night(D0) == ["dunning/1/REMINDED_1", "dunning/2/REMINDED_1", f"renewal/1/{RENEWS}/30d"]
    first = ledger(url)

    for day, (name, expression) in enumerate(SAME_VALUE[dialect].items(), start=1):
        spell_ids(url, expression)
        assert night(D0 + timedelta(days=day)) == [], name  # same value, same keys: nothing again
    assert ledger(url) == first and len(smtp_sink.keys()) == 3

    env = mail_env | {"DUEFLOW_DATABASE_URL": url}
    for name, expression in RESPELLED[dialect].items():
        spell_ids(url, expression)
        new = expression.replace("{c}", "1")
        with pytest.raises(ConfigError) as stopped:
            nightly_alerts(as_of=D0 + timedelta(days=4))
        said = str(stopped.value)
        assert said.startswith("contracts: 1 id(s) of tonight's rows are ids the ledger knows spelled another"
                               " way (1 → "), said
        assert "invoices: 2 id(s)" in said and "Nothing was reserved or sent" in said
        assert "dueflow rekey" in said
        assert ledger(url) == first and len(smtp_sink.keys()) == 3, name  # nothing written, nothing sent
        listed = dueflow_cli("rekey", env=env)
        assert listed.returncode == 0, listed.stderr
        assert "invoices: 1 → " in listed.stdout and "contracts: 1 → " in listed.stdout, (new, listed.stdout)
        assert ledger(url) == first  # listing changes nothing

    # The last spelling (a trailing space) is the one the company keeps: its history moves.
    applied = dueflow_cli("rekey", "--apply", env=env)
    assert applied.returncode == 0 and "Moved 3 ledger row(s) of 3 id(s)" in applied.stdout, applied.stdout
    assert "invoices: 1 → '1 '" in applied.stdout
    moved = ledger(url)
    assert sorted(moved) == ["dunning/1 /REMINDED_1", "dunning/2 /REMINDED_1", f"renewal/1 /{RENEWS}/30d"]
    assert night(D0 + timedelta(days=4)) == []  # the night goes on from the moved history
    assert night(D0 + timedelta(days=5)) == ["dunning/1 /REMINDED_2", "dunning/2 /REMINDED_2"]
    assert night(D0 + timedelta(days=15)) == [f"renewal/1 /{RENEWS}/15d"]
    sent = smtp_sink.keys()
    assert len(sent) == len(set(sent)) == 6  # every email once, whatever the ids were called
    with db.engine_for(url).connect() as conn:
        recorded = conn.execute(text("SELECT job, old_id, new_id, decision, rows_moved"
                                     " FROM dueflow_id_changes ORDER BY job, old_id")).all()
    assert [tuple(r) for r in recorded] == [("dunning", "1", "1 ", "same", 1),
                                            ("dunning", "2", "2 ", "same", 1),
                                            ("renewal", "1", "1 ", "same", 1)]


def test_a_uuid_in_capitals_stops_the_night_and_a_pair_kept_apart_stops_it_no_more(
        run_env, smtp_sink, dueflow_cli, mail_env):
    url = run_env
    dialect = company_tables(url, uuid_ids=True)
    spell_ids(url, "{c}")
    assert len(night(D0)) == 3
    spell_ids(url, "upper(CAST({c} AS text))" if dialect == "postgresql" else "upper({c})")
    with pytest.raises(ConfigError, match=f"invoices: 2 id\\(s\\) .* \\({UUIDS[0]} → {UUIDS[0].upper()}"):
        nightly_alerts(as_of=D0 + timedelta(days=1))
    env = mail_env | {"DUEFLOW_DATABASE_URL": url}
    kept = dueflow_cli("rekey", "--keep-apart", "--id", UUIDS[1], env=env)
    assert kept.returncode == 0 and "Recorded 1 pair(s) as different records" in kept.stdout, kept.stdout
    with pytest.raises(ConfigError) as stopped:  # the other pairs still stop it
        nightly_alerts(as_of=D0 + timedelta(days=1))
    assert "invoices: 1 id(s)" in str(stopped.value) and UUIDS[1] not in str(stopped.value)
    dueflow_cli("rekey", "--keep-apart", env=env)
    # Kept apart, the capitalised ids are new records: their first emails go, as asked.
    assert night(D0 + timedelta(days=1)) == sorted([f"dunning/{UUIDS[0].upper()}/REMINDED_1",
                                                    f"dunning/{UUIDS[1].upper()}/REMINDED_1",
                                                    f"renewal/{UUIDS[0].upper()}/{RENEWS}/30d"])
