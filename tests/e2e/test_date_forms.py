"""Dates as a company writes them (issue 36, case 1; G6): in every date and timestamp column
of every relation, a date, a naive timestamp (the business zone's local time), timestamps
with an offset in every spelling, and values that are not dates — on SQLite (text,
as SQLite keeps them) and on PostgreSQL (dates as `timestamptz`, timestamps as text, as a
legacy schema or a view may give them). Each value
is read alone: a row written with an offset decides what its twin written as a plain date
decides, in a zone west of UTC where the moments cross midnight; a row whose value is not a
date is quarantined with the column named; the night, the forecast and `check --sources`
never stop. Before, one offset among them ended `dueflow run` with a TypeError and no
reminder for anyone."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from sqlalchemy import text

from dueflow.flows.nightly_alerts import nightly_alerts
from dueflow.tasks.adapters import db
from dueflow.tasks.forecast import forecast
from tests.helpers.factories import client, contract, invoice

ZONE = "America/New_York"  # behind UTC: a moment late in the evening is the next day in UTC
AS_OF = date(2027, 3, 10)
SENT = datetime(2027, 2, 20, 21, 30)  # local time: 02:30 UTC on the 21st
DUE = datetime(2027, 3, 2, 22, 0)  # local: 03:00 UTC on the 3rd
HOLD_END = datetime(2027, 3, 20, 23, 0)  # after tonight
RENEWAL = datetime(2027, 4, 9, 22, 15)  # 30 days ahead, 02:15 UTC on the 10th


def forms(moment: datetime) -> dict[str, str]:
    """`moment` (the business zone's local time) in each spelling a source may hold."""
    local = moment.replace(tzinfo=ZoneInfo(ZONE))
    utc = local.astimezone(ZoneInfo("UTC"))
    return {
        "date": local.date().isoformat(),
        "naive-space": local.replace(tzinfo=None).isoformat(sep=" "),
        "naive-t": local.replace(tzinfo=None).isoformat(),
        "z": utc.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "pg-utc": utc.strftime("%Y-%m-%d %H:%M:%S+00"),
        "offset": local.isoformat(),
        "offset-compact": local.strftime("%Y-%m-%d %H:%M:%S%z"),
        "micro": utc.isoformat(timespec="microseconds"),
    }


NOT_DATES = {"words": "not a date", "april-31": "2027-04-31", "month-13": "2027-13-01T00:00:00Z",
             "european": "31/01/2027", "hour-25": "2027-03-02T25:00:00-05:00"}
COLUMNS = {"invoices": ("sent_at", "due_date", "paid_at", "dunning_hold_until"),
           "clients": ("dunning_paused_until",), "contracts": ("renewal_date",)}


def as_company_columns(url: str) -> bool:
    """PostgreSQL's sample tables as a company may type them: its dates as `timestamptz`
    (every spelling with an offset is then the database's own), its timestamps as text.
    Returns whether a date column can hold a value that is not a date (not on PostgreSQL:
    its types refuse one at insert)."""
    engine = db.engine_for(url)
    if engine.dialect.name != "postgresql":
        return True
    with engine.begin() as conn:
        for table, columns in COLUMNS.items():
            for column in columns:
                kind = "text" if column in ("sent_at", "paid_at") else "timestamptz"
                conn.execute(text(f"ALTER TABLE {table} ALTER COLUMN {column} TYPE {kind}"
                                  f" USING {column}::{kind}"))
    return False


def seed(url: str, garbage: bool) -> None:
    """Per form, a twin of each case written in that form; 'plain' is the canonical one."""
    written = {name: (forms(SENT)[name], forms(DUE)[name], forms(HOLD_END)[name], forms(RENEWAL)[name])
               for name in forms(SENT)}
    written["plain"] = (SENT.date().isoformat(), DUE.date().isoformat(), HOLD_END.date().isoformat(),
                        RENEWAL.date().isoformat())
    clients, invoices, contracts = [], [], []
    for name, (sent, due, hold, renewal) in written.items():
        clients += [client(f"{name}-c"), client(f"{name}-p", dunning_paused_until=hold)]
        invoices += [invoice(f"{name}-open", f"{name}-c", sent, due_date=due),  # reminded tonight
                     invoice(f"{name}-held", f"{name}-c", sent, due_date=due, dunning_hold_until=hold),
                     invoice(f"{name}-paused", f"{name}-p", sent, due_date=due),
                     invoice(f"{name}-paid", f"{name}-c", sent, due_date=due, status="paid", paid_at=sent)]
        contracts.append(contract(f"{name}-k", None, renewal_date=renewal))
    for bad, value in NOT_DATES.items() if garbage else ():
        invoices += [invoice(f"{bad}-due", "plain-c", written["plain"][0], due_date=value),
                     invoice(f"{bad}-hold", "plain-c", written["plain"][0], due_date=written["plain"][1],
                             dunning_hold_until=value)]
        contracts.append(contract(f"{bad}-k", None, renewal_date=value))
    engine = db.engine_for(url)
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":  # a value without an offset is the company's local time
            conn.execute(text(f"SET LOCAL TIME ZONE '{ZONE}'"))
        for table, rows in (("clients", clients), ("invoices", invoices), ("contracts", contracts)):
            columns = list(dict.fromkeys(column for row in rows for column in row))
            conn.execute(text(f"INSERT INTO {table} ({', '.join(columns)})"
                              f" VALUES ({', '.join(':' + c for c in columns)})"),
                         [dict.fromkeys(columns) | row for row in rows])


CASE = "/{name}-(?:open|held|paused|paid|k)/"


def outcome(rows, name: str) -> dict[str, str]:
    """What the night did with one form's twins: case → status (keys without the form)."""
    mine = rows[rows["key"].str.contains(CASE.format(name=re.escape(name)), regex=True)]
    return {key.replace(f"/{name}-", "/"): status for key, status in zip(mine["key"], mine["status"],
                                                                          strict=True)}


def test_every_spelling_of_a_date_decides_like_the_plain_date_and_garbage_quarantines_its_row(
        run_env, smtp_sink, monkeypatch, dueflow_cli, mail_env):
    url = run_env
    monkeypatch.setenv("DUEFLOW_TIMEZONE", ZONE)
    monkeypatch.setenv("DUEFLOW_ESCALATION_TO", "collections@corp.example")
    garbage = as_company_columns(url)
    seed(url, garbage)

    summary = nightly_alerts(as_of=AS_OF)
    rows = summary.rows
    plain = outcome(rows, "plain")
    # The canonical twins: the open invoice and the contract get their email tonight, the
    # held, paused and paid ones nothing (so a form that read another day would differ).
    assert plain == {"dunning/open/REMINDED_1": "sent", "renewal/k/2027-04-09/30d": "sent"}, plain
    for name in forms(SENT):
        assert outcome(rows, name) == plain, name
    quarantined = rows[rows["status"] == "quarantined"]
    reasons = dict(zip(quarantined["key"], quarantined["detail"], strict=True))
    for bad, value in NOT_DATES.items() if garbage else ():
        assert reasons[f"invoices/{bad}-due"] == f"due_date is not a date: '{value}'", bad
        assert reasons[f"invoices/{bad}-hold"] == f"dunning_hold_until is not a date: '{value}'", bad
        assert reasons[f"contracts/{bad}-k"] == "renewal_date missing or not a valid date", bad
    assert len(smtp_sink.keys()) == 2 * (len(forms(SENT)) + 1)

    predicted = forecast(AS_OF + timedelta(days=1), 30)  # the nights after: what each form gets next
    by_form = {name: sorted(k.replace(f"/{name}-", "/") for k in predicted["key"]
                            if re.search(CASE.format(name=re.escape(name)), k))
               for name in [*forms(SENT), "plain"]}
    assert by_form["plain"], "the forecast sees the next steps of the canonical twins"
    assert {n: s for n, s in by_form.items() if s != by_form["plain"]} == {}, by_form["plain"]

    checked = dueflow_cli("check", "--sources", env=mail_env | {
        "DUEFLOW_DATABASE_URL": url, "DUEFLOW_TIMEZONE": ZONE,
        "DUEFLOW_ESCALATION_TO": "collections@corp.example"})
    assert "Traceback" not in checked.stderr, checked.stderr
    assert "  dunning: " in checked.stdout, checked.stdout
