"""The nightly flow end to end: Prefect test server, real database, real SMTP server."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from sqlalchemy import text

from dueflow.flows.nightly_alerts import nightly_alerts
from dueflow.tasks.adapters import db
from dueflow.tasks.core.addresses import Mailbox
from dueflow.tasks.core.message import message_id_for
from tests.helpers.factories import contract, insert
from tests.helpers.oracles import expected_renewal_keys

START = date(2027, 1, 1)
LEADS = [60, 30, 15]


def insert_contracts(url: str, rows: list[dict]) -> None:
    insert(url, "contracts", rows)


def expected_keys(renewals_by_day, run_dates, leads) -> list[str]:
    """A naive, per-row reading of the rule: the oracle the flow must agree with
    (tests/helpers/oracles.py, with every day open)."""
    return expected_renewal_keys(renewals_by_day, run_dates, leads)


def test_ninety_day_calendar_delivers_each_alert_exactly_once(run_env, smtp_sink):
    url = run_env
    offsets = [-5, 0, 1, 14, 15, 16, 29, 30, 31, 44, 59, 60, 61, 75, 89, 100, 120, 150]
    rows = [contract(f"c-{i:02d}", START + timedelta(days=o)) for i, o in enumerate(offsets)]
    rows.append(contract("c-cancelled", START + timedelta(days=20), status="cancelled"))
    rows.append(contract("c-renewed", START + timedelta(days=10)))
    insert_contracts(url, rows)
    renewed_on, new_renewal = START + timedelta(days=12), START + timedelta(days=85)

    def renewals_on(day: date) -> dict[str, tuple[date, bool]]:
        current = {r["id"]: (date.fromisoformat(r["renewal_date"]), r["status"] == "active")
                   for r in rows}
        if day >= renewed_on:
            current["c-renewed"] = (new_renewal, True)
        return current

    run_dates = []
    for n in range(90):
        day = START + timedelta(days=n)
        # Every third night, none during a long outage: each run sees several nights' worth
        # of change at once, which is when "the most urgent lead crossed" matters.
        if n % 3 or n in range(40, 49):
            continue
        run_dates += [day, day] if n % 11 == 0 else [day]  # repeated runs

    for i, day in enumerate(run_dates):
        if day == renewed_on and run_dates[i - 1] != day:
            with db.engine_for(url).begin() as conn:  # the contract renewed: a new cycle
                conn.execute(text("UPDATE contracts SET renewal_date = :d WHERE id = 'c-renewed'"),
                             {"d": new_renewal.isoformat()})
        summary = nightly_alerts(as_of=day, renewal_leads=LEADS)
        assert summary.failed == summary.pending == summary.quarantined == 0
        if i and run_dates[i - 1] == day:
            assert summary.won == 0 and summary.sent == 0  # the repeat sends nothing

    received = smtp_sink.keys()
    assert len(received) == len(set(received)), "an alert was delivered twice"
    assert sorted(received) == sorted(expected_keys(renewals_on, run_dates, LEADS))
    assert any(k.startswith("renewal/c-renewed/" + new_renewal.isoformat()) for k in received)
    assert not any("c-cancelled" in k for k in received)

    ledger = db.ledger_rows(db.engine_for(url))
    assert set(ledger["status"]) == {"sent"}
    assert sorted(ledger["key"]) == sorted(received)
    secret = db.message_id_key(db.engine_for(url))  # the database's own (migration 0007)
    for key, message in smtp_sink.by_key().items():
        # Keyed: not the digest of the key alone, which anyone knowing an invoice id can make.
        assert message["Message-ID"] == message_id_for(key, Mailbox("alerts@dueflow.test"), secret)
        assert message["Message-ID"] != message_id_for(key, Mailbox("alerts@dueflow.test"))
        assert message["To"] == key.split("/")[1] + "@example.com"


def test_second_run_same_day_sends_nothing_and_dry_run_writes_nothing(run_env, smtp_sink):
    url = run_env
    insert_contracts(url, [contract("c-1", START + timedelta(days=30)),
                           contract("c-2", START + timedelta(days=15))])
    dry = nightly_alerts(as_of=START, dry_run=True)
    assert dry.won == 2 and dry.sent == 0
    assert db.ledger_rows(db.engine_for(url)).empty and smtp_sink.keys() == []

    first = nightly_alerts(as_of=START)
    second = nightly_alerts(as_of=START)
    assert (first.won, first.sent) == (2, 2)
    assert (second.due, second.won, second.already_handled, second.sent) == (2, 0, 2, 0)
    assert sorted(smtp_sink.keys()) == sorted(first.rows["key"])
    assert set(second.rows["status"]) == {"already handled"}


def test_bad_rows_are_quarantined_and_good_rows_still_sent(run_env, smtp_sink):
    url = run_env
    due = START + timedelta(days=30)
    insert_contracts(url, [
        contract("good-1", due),
        contract("no-date", None),
        contract("bad-mail", due, notify_email="finance at example"),
        contract("odd-status", due, status="suspended"),
        contract("bad-currency", due, currency="EURO"),
        contract("good-2", START + timedelta(days=15), vendor="<b>Bold</b> & Co"),
    ])
    summary = nightly_alerts(as_of=START)
    assert summary.sent == 2 and summary.quarantined == 4
    assert sorted(smtp_sink.keys()) == [f"renewal/good-1/{due}/30d",
                                        f"renewal/good-2/{START + timedelta(days=15)}/15d"]
    stored = db.read_frame(db.engine_for(url),
                           "SELECT source_id, reason, times_seen FROM dueflow_quarantine", {})
    assert dict(zip(stored["source_id"], stored["reason"], strict=True)) == {
        "no-date": "renewal_date missing or not a valid date",
        "bad-mail": "notify_email is not a valid address: 'finance at example': it is not a plain ASCII"
                    " address name@domain (one @; no spaces, quotes, brackets or accents)",
        "odd-status": "unknown status 'suspended'",
        "bad-currency": "unknown currency 'EURO'",
    }
    nightly_alerts(as_of=START)  # still bad the next time: kept once, seen twice
    again = db.read_frame(db.engine_for(url), "SELECT times_seen FROM dueflow_quarantine", {})
    assert again["times_seen"].tolist() == [2, 2, 2, 2]
    html = smtp_sink.by_key()[f"renewal/good-2/{START + timedelta(days=15)}/15d"]
    body = html.get_body(("html",)).get_content()
    assert "&lt;b&gt;Bold&lt;/b&gt; &amp; Co" in body and "<b>Bold</b>" not in body


@pytest.mark.parametrize("fault", ["rcpt_451", "data_554", "drop_before_data_reply"])
def test_smtp_faults_end_in_a_known_state(run_env, smtp_sink, fault):
    url = run_env
    insert_contracts(url, [contract("ok", START + timedelta(days=30)),
                           contract("faulty", START + timedelta(days=30))])
    smtp_sink.faults["faulty@example.com"] = fault
    summary = nightly_alerts(as_of=START)
    status = dict(zip(summary.rows["key"].str.split("/").str[1], summary.rows["status"],
                      strict=True))
    expected = "pending" if fault == "drop_before_data_reply" else "failed"
    # A 5xx is a permanent refusal, said so (the ledger's status is failed, permanent).
    said = "failed permanently" if fault == "data_554" else expected
    assert status == {"ok": "sent", "faulty": said}
    ledger = db.ledger_rows(db.engine_for(url)).set_index("key")
    assert ledger.loc[f"renewal/faulty/{START + timedelta(days=30)}/30d", "status"] == expected
    assert smtp_sink.keys() == [f"renewal/ok/{START + timedelta(days=30)}/30d"]
    again = nightly_alerts(as_of=START)  # nothing is resent automatically here
    assert again.won == 0 and len(smtp_sink.keys()) == 1
    assert (again.ledger_pending, again.ledger_failed) == (
        (1, 0) if expected == "pending" else (0, 1))


def test_messages_are_composed_and_stored_chunk_by_chunk_each_stored_before_it_is_sent(
        run_env, smtp_sink, monkeypatch):
    """A surge is rendered a chunk at a time (memory stays bounded), each chunk delivered as
    soon as it is stored while the next is rendered; every message is on its ledger row
    before it is handed to SMTP (G2), and each is sent once."""
    from dueflow.tasks import night, steps

    url = run_env
    monkeypatch.setattr(night, "COMPOSE_CHUNK", 3)
    monkeypatch.setattr(db, "ANALYZE_BEFORE_STORING", 8)  # a "surge" of 8: statistics first
    stored_chunks: list[int] = []
    compose_and_store = steps.compose_and_store

    def count_chunks(*args, **kwargs):
        prepared = compose_and_store(*args, **kwargs)
        stored_chunks.append(len(prepared.emails))
        return prepared

    monkeypatch.setattr(steps, "compose_and_store", count_chunks)
    insert_contracts(url, [contract(f"c-{n}", START + timedelta(days=30)) for n in range(8)])
    stored_at_its_send: list[bool] = []

    def is_stored(key: str) -> None:
        with db.engine_for(url).connect() as conn:
            stored = text("SELECT body_text IS NOT NULL FROM dueflow_ledger WHERE key = :key")
            stored_at_its_send.append(conn.execute(stored, {"key": key}).scalar_one())

    smtp_sink.on_data = is_stored
    summary = nightly_alerts(as_of=START, renewal_leads=LEADS)
    smtp_sink.on_data = None
    assert summary.sent == 8 and summary.failed == summary.pending == 0
    assert stored_chunks == [3, 3, 2] and stored_at_its_send == [True] * 8
    received = smtp_sink.keys()
    assert sorted(received) == sorted(f"renewal/c-{n}/{START + timedelta(days=30)}/30d" for n in range(8))
    with db.engine_for(url).connect() as conn:
        subjects = conn.execute(text("SELECT key, subject FROM dueflow_ledger")).all()
    assert len(subjects) == 8 and all(s.startswith("Contract renews in 30 days") for _, s in subjects)
    if url.startswith("postgresql"):  # the planner saw the reserved rows before the first store
        with db.engine_for(url).connect() as conn:
            assert conn.execute(text("SELECT last_analyze FROM pg_stat_user_tables"
                                     " WHERE relid = 'dueflow_ledger'::regclass")).scalar_one() is not None
