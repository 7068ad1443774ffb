"""The forecast (issue 15) against the nightly run itself, on SQLite and PostgreSQL.

The property: on random data and random rule parameters, the forecast made before a
series of nights says, for each night D, exactly what a dry run on night D decides after
real runs on every night before it — same keys, same recipients, same subjects — and the
real run of night D then sends exactly those. The forecast writes nothing (ledger and
quarantine unchanged, no email) and never calls the LLM (a real local OpenAI-compatible
server counts the requests).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, timedelta
from pathlib import Path
from unittest import mock

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prefect.client.orchestration import get_client

from dueflow.blocks.settings import Settings
from dueflow.flows.forecast import forecast_flow
from dueflow.flows.nightly_alerts import nightly_alerts
from dueflow.tasks.adapters import db
from dueflow.tasks.core.tone import PlanSource
from dueflow.tasks.forecast import forecast
from tests import examples
from tests.conftest import pg_schema
from tests.helpers.factories import client, contract, insert, invoice, with_optional_columns, without_keys
from tests.helpers.openai_server import openai_stub
from tests.helpers.source_rows import source_rows

START = date(2027, 3, 1)
NIGHTS = settings(max_examples=examples(4), deadline=None,
                  suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                         HealthCheck.data_too_large])
# Profiles a client may name (and "ghost", which none defines: quarantined on both sides).
PROFILES = """
[profiles.brisk]
delays = [1, 1, 1]
last_step = "REMINDED_2"

[profiles.gentle]
delays = [2, 3, 2]
unit = "business"
escalation_to = "kam@corp.example"
"""
# What a dry run adds to a reminder's subject: who planned its paragraph (the forecast asks no one).
PARAGRAPH = re.compile(rf" \[({'|'.join(PlanSource)}) paragraph\]$")


@contextmanager
def fresh_database(kind: str) -> Iterator[str]:
    """An initialised, empty database of its own for one example, with the user's own kind
    of source tables (no primary key: duplicated ids are possible, and quarantined)."""
    if kind == "postgresql":
        with pg_schema() as url:
            db.init_db(db.engine_for(url), sample_tables=True)
            without_keys(url, "contracts", "clients", "invoices")
            with_optional_columns(url)
            yield url
        return
    folder = Path(tempfile.mkdtemp(prefix="dueflow-forecast-"))
    url = f"sqlite:///{folder / 'dueflow.db'}"
    db.init_db(db.engine_for(url), sample_tables=True)
    without_keys(url, "contracts", "clients", "invoices")
    with_optional_columns(url)
    try:
        yield url
    finally:
        db.engine_for(url).dispose()


def day(offset: int) -> date:
    return START + timedelta(days=offset)


def would_send(summary) -> dict[str, tuple[str, str]]:
    rows = summary.rows[summary.rows["status"] == "would send"]
    return {k: (r, PARAGRAPH.sub("", d)) for k, r, d in zip(rows["key"], rows["recipient"], rows["detail"],
                                                              strict=True)}


def sent_keys(summary) -> set[str]:
    return set(summary.rows.loc[summary.rows["status"] == "sent", "key"])


def ledger_snapshot(url: str) -> tuple[list, list]:
    engine = db.engine_for(url)
    ledger = db.read_frame(engine, "SELECT * FROM dueflow_ledger ORDER BY key", {})
    quarantine = db.read_frame(engine, "SELECT * FROM dueflow_quarantine ORDER BY job, source_id, reason", {})
    return ledger.astype(str).values.tolist(), quarantine.astype(str).values.tolist()


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgresql", marks=pytest.mark.pg)])
@NIGHTS
@given(rows=source_rows(),
       leads=st.lists(st.integers(0, 9), min_size=1, max_size=3, unique=True),
       delays=st.lists(st.integers(1, 3), min_size=3, max_size=3),
       start=st.sampled_from(["sent", "due"]),
       escalation=st.booleans(),
       earlier_nights=st.integers(0, 2),
       nights=st.integers(2, 5),
       rules=st.fixed_dictionaries({
           "DUEFLOW_BUSINESS_DAYS": st.sampled_from(["", "mon-fri"]),
           "DUEFLOW_HOLIDAYS": st.sampled_from(["", "ES-MD"]),
           "closures": st.lists(st.integers(-2, 5), max_size=2),
           "DUEFLOW_DUNNING_MINIMUM": st.sampled_from(["", "EUR 5"]),
           "DUEFLOW_STATEMENTS": st.sampled_from(["", "reminders", "all"]),  # as the nights will send them
           "profiles": st.booleans(), "unit": st.sampled_from(["calendar", "business"]),
           "any_day": st.booleans()}))
def test_forecast_of_night_d_is_what_a_dry_run_on_d_decides_after_real_runs_before_it(
        kind, rows, leads, delays, start, escalation, earlier_nights, nights, rules, prefect_server,
        tmp_path):
    params = {"renewal_leads": leads, "dunning_delays": delays, "dunning_start": start,
              "dunning_delay_unit": rules["unit"], "renewal_on_any_day": rules["any_day"]}
    outbox = tmp_path / uuid.uuid4().hex
    closures = tmp_path / f"{uuid.uuid4().hex}.closed"
    closures.write_text("".join(f"{day(d)} closure\n" for d in rules["closures"]))
    profiles = tmp_path / f"{uuid.uuid4().hex}.toml"
    profiles.write_text(PROFILES)
    calendar_env = {name: value for name, value in rules.items() if name.startswith("DUEFLOW_") and value}
    calendar_env |= ({"DUEFLOW_CLOSED_DAYS_FILE": str(closures)} if rules["closures"] else {})
    calendar_env |= {"DUEFLOW_PROFILES_FILE": str(profiles)} if rules["profiles"] else {}
    with fresh_database(kind) as url, mock.patch.dict(os.environ, {**calendar_env,
            "DUEFLOW_DATABASE_URL": url, "DUEFLOW_MAIL_URL": f"file://{outbox}",
            "DUEFLOW_MAIL_FROM": "alerts@corp.example", "DUEFLOW_TIMEZONE": "Europe/Madrid",
            "DUEFLOW_RUN_LOCK": "off",
            **({"DUEFLOW_ESCALATION_TO": "collections@corp.example"} if escalation else {})}):
        os.environ.pop("OPENAI_API_KEY", None)
        if not escalation:
            os.environ.pop("DUEFLOW_ESCALATION_TO", None)
        for table in ("contracts", "clients", "invoices"):
            insert(url, table, rows[table])
        for offset in range(-earlier_nights, 0):  # a ledger with a history before the forecast
            nightly_alerts(as_of=day(offset), **params)
        before = ledger_snapshot(url)
        mailed = sorted(outbox.glob("*.eml")) if outbox.exists() else []

        predicted = forecast(START, nights, renewal_leads=leads, dunning_delays=delays, dunning_start=start,
                             dunning_delay_unit=rules["unit"], renewal_on_any_day=rules["any_day"])

        assert ledger_snapshot(url) == before  # the forecast wrote nothing…
        assert (sorted(outbox.glob("*.eml")) if outbox.exists() else []) == mailed  # …and sent nothing
        assert set(predicted["night"]) <= {day(n) for n in range(nights)}
        assert not predicted["key"].duplicated().any()
        for n in range(nights):
            night = predicted[predicted["night"] == day(n)]
            expected = {k: (r, s) for k, r, s in zip(night["key"], night["recipient"], night["subject"],
                                                     strict=True)}
            dry = nightly_alerts(as_of=day(n), dry_run=True, **params)
            assert would_send(dry) == expected, f"night {day(n)}"
            real = nightly_alerts(as_of=day(n), **params)
            assert sent_keys(real) == set(expected), f"night {day(n)}"


def seed(url: str) -> None:
    insert(url, "contracts", [contract("c-30", START + timedelta(days=31)),  # 30d due on START+1
                              contract("c-bad", START + timedelta(days=10), notify_email="nope")])
    insert(url, "clients", [client("cl-es", locale="es")])
    insert(url, "invoices", [invoice("inv-1", "cl-es",
                                     (START - timedelta(days=6)).isoformat() + "T10:00:00+00:00")])


def test_forecast_command_prints_each_night_and_changes_nothing(db_url, dueflow_cli, tmp_path):
    seed(db_url)
    env = {"DUEFLOW_DATABASE_URL": db_url, "DUEFLOW_MAIL_URL": f"file://{tmp_path / 'outbox'}"}
    before = ledger_snapshot(db_url)

    table = dueflow_cli("forecast", "--from", START.isoformat(), "--days", "14", env=env | {"COLUMNS": "110"})
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["night", "job", "step", "recipient", "name", "amount", "subject", "why"]
    assert any(line.startswith("2027-03-02  renewal  30d") for line in lines)
    assert "€980.40" in table.stdout  # money as the emails write it
    assert "4 email(s) in the 14 night(s) from 2027-03-01 (renewal: 2, dunning: 2)." in table.stdout
    assert "nothing was written or sent" in table.stdout

    out = dueflow_cli("forecast", "--from", START.isoformat(), "--days", "14", "--format", "json", env=env)
    records = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(r["night"], r["key"]) for r in records] == [
        ("2027-03-01", "renewal/c-30/2027-04-01/60d"),    # 31 days left: the 60-day lead
        ("2027-03-02", "renewal/c-30/2027-04-01/30d"),
        ("2027-03-02", "dunning/inv-1/REMINDED_1"),       # sent 6 days before START: 7 days on START+1
        ("2027-03-07", "dunning/inv-1/REMINDED_2"),       # 5 days after REMINDED_1
    ]  # OVERDUE on 03-14 is quarantined (no DUEFLOW_ESCALATION_TO); the 15d lead is on 03-17
    reminder = next(r for r in records if r["key"] == "dunning/inv-1/REMINDED_1")
    assert reminder["recipient"] == "cl-es@clients.example" and reminder["name"] == "Client cl-es"
    assert reminder["amount"] == "980.40" and reminder["currency"] == "EUR" and reminder["subject"]
    # The table wraps long subjects at whole words within the terminal's width, never cuts one.
    rows = lines[:lines.index("")]  # the table, before the blank line and the notes
    assert all(len(line) <= 110 for line in rows), rows
    shown = set(" ".join(rows).split())
    for record in records:
        assert set(record["subject"].split()) <= shown, record["subject"]

    csv = dueflow_cli("forecast", "--from", START.isoformat(), "--days", "2", "--format", "csv", env=env)
    assert csv.stdout.splitlines()[0] == "night,job,key,step,recipient,name,amount,currency,subject,why"
    assert len(csv.stdout.splitlines()) == 4  # the header, 60d on 03-01, 30d and REMINDED_1 on 03-02

    assert ledger_snapshot(db_url) == before
    assert not (tmp_path / "outbox").exists()
    bad = dueflow_cli("forecast", "--days", "0", env=env)
    assert bad.returncode == 2 and "invalid number of nights '0'" in bad.stderr


def test_forecast_never_asks_the_llm(db_url, monkeypatch):
    seed(db_url)
    with openai_stub() as stub:
        env = {"DUEFLOW_DATABASE_URL": db_url, "OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": stub.base_url}
        rows = forecast(START, 10, settings=Settings.from_env(env))
        assert "dunning/inv-1/REMINDED_1" in set(rows["key"])
        assert stub.requests == []


def test_forecast_flow_publishes_a_table_artifact(db_url, prefect_server, monkeypatch):
    seed(db_url)
    monkeypatch.setenv("DUEFLOW_DATABASE_URL", db_url)
    rows = forecast_flow(start=START, days=3)
    assert list(rows["key"]) == ["renewal/c-30/2027-04-01/60d", "renewal/c-30/2027-04-01/30d",
                                 "dunning/inv-1/REMINDED_1"]
    with get_client(sync_client=True) as prefect:
        from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

        artifacts = prefect.read_artifacts(artifact_filter=ArtifactFilter(
            key=ArtifactFilterKey(any_=["dueflow-forecast"])))
    latest = max(artifacts, key=lambda a: a.created)
    table = latest.data if isinstance(latest.data, list) else json.loads(latest.data)
    assert {row["key"] for row in table} >= set(rows["key"])
    assert "3 email(s) would go out" in (latest.description or "")
    assert db.read_frame(db.engine_for(db_url), "SELECT count(*) AS n FROM dueflow_ledger", {})["n"][0] == 0


def test_forecast_matches_the_decision_frame_types(db_url):
    seed(db_url)
    rows = forecast(START, 2, settings=Settings.from_env({"DUEFLOW_DATABASE_URL": db_url}))
    assert list(rows.columns) == ["night", "job", "key", "step", "recipient", "name", "amount", "currency",
                                  "subject", "why"]
    assert isinstance(rows["night"].iloc[0], date)
    empty = forecast(START - timedelta(days=400), 1,
                     settings=Settings.from_env({"DUEFLOW_DATABASE_URL": db_url}))
    assert empty.empty and list(empty.columns) == list(rows.columns)
    assert pd.api.types.is_object_dtype(empty["night"])


def test_the_forecast_shows_a_clients_statement_as_the_night_sends_it(db_url):
    """DUEFLOW_STATEMENTS in the forecast: each invoice's row carries the statement's subject
    (found by the property above when the forecast built its job without the setting)."""
    sent = (START - timedelta(days=8)).isoformat()
    insert(db_url, "clients", [client("cl-1")])
    insert(db_url, "invoices", [invoice("inv-1", "cl-1", sent), invoice("inv-2", "cl-1", sent)])
    env = {"DUEFLOW_DATABASE_URL": db_url, "DUEFLOW_STATEMENTS": "reminders"}
    rows = forecast(START, 1, settings=Settings.from_env(env))
    dunning = rows[rows["job"] == "dunning"]
    assert sorted(dunning["key"]) == ["dunning/inv-1/REMINDED_1", "dunning/inv-2/REMINDED_1"]
    assert set(dunning["subject"]) == {"Payment reminder: 2 invoices (€1,960.80), overdue"}
    alone = forecast(START, 1, settings=Settings.from_env({"DUEFLOW_DATABASE_URL": db_url}))
    assert not alone["subject"].str.contains("2 invoices").any()


def test_a_renewal_alerted_before_the_closed_days_it_fell_on_is_not_alerted_again(run_env, tmp_path,
                                                                                  monkeypatch):
    """Found by the property above: a renewal on a closed day counts as renewing the next
    business day, but its cycle's history was read only for renewal dates from tonight on,
    so the dry run and the forecast of that day listed an alert sent days before (the real
    night's reservation refused it: G1 held, the preview lied)."""
    closed = tmp_path / "closed.txt"
    closed.write_text(f"{day(1)} closure\n{day(2)} closure\n")
    monkeypatch.setenv("DUEFLOW_CLOSED_DAYS_FILE", str(closed))
    insert(run_env, "contracts", [contract("c0", day(2))])
    first = nightly_alerts(as_of=day(-2), renewal_leads=[8])
    assert sent_keys(first) == {f"renewal/c0/{day(2)}/8d"}
    assert forecast(day(-1), 7, renewal_leads=[8]).empty
    after = nightly_alerts(as_of=day(3), dry_run=True, renewal_leads=[8])  # the day after the closures
    assert would_send(after) == {}
    handled = after.rows.loc[after.rows["status"] == "already handled", "key"]
    assert set(handled) == {f"renewal/c0/{day(2)}/8d"}
