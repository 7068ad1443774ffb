"""Real `dueflow run` processes: killed mid-delivery, racing each other, settled by an
operator. The SMTP server and the databases are real; so is SIGKILL."""

from __future__ import annotations

import getpass
import signal
import time
from datetime import timedelta

import pytest

from dueflow.tasks.adapters import db
from tests.helpers.concurrency import wait_for
from tests.helpers.factories import client, insert, invoice
from tests.helpers.runs import AS_OF, assert_stopped_mid_delivery_then_rerun, due_contracts, start


def test_sigkill_mid_delivery_loses_nothing_and_sends_nothing_twice(cli_env, db_url, smtp_sink,
                                                                     tmp_path):
    expected = due_contracts(db_url, 60)
    smtp_sink.delay = 0.1  # slow enough to be killed half-way
    run = start(["run", "--as-of", AS_OF.isoformat()], cli_env, tmp_path)
    wait_for(lambda: len(smtp_sink.keys()) >= 10, "10 emails received", 90, interval=0.02)
    run.send_signal(signal.SIGKILL)
    run.wait(30)
    assert_stopped_mid_delivery_then_rerun(db_url, smtp_sink, cli_env, tmp_path, expected,
                                           set(smtp_sink.keys()))


# One backend: test_prefect_lost's Ctrl-C interrupts a SQLite night the same way.
@pytest.mark.parametrize("db_url", [pytest.param("postgresql", marks=pytest.mark.pg)], indirect=True)
def test_sigint_stops_handing_emails_to_smtp_within_a_second(cli_env, db_url, smtp_sink, tmp_path):
    expected = due_contracts(db_url, 60)
    smtp_sink.delay = 0.1
    run = start(["run", "--as-of", AS_OF.isoformat()], cli_env, tmp_path)
    wait_for(lambda: len(smtp_sink.keys()) >= 10, "10 emails received", 90, interval=0.02)
    signalled = time.monotonic()
    run.send_signal(signal.SIGINT)
    out, err = run.communicate(timeout=60)
    assert run.returncode == 130, (out, err)
    assert "Traceback" not in err and "interrupted" in err
    # No email was handed to SMTP later than a second after the signal (sends already in
    # flight, 0.1 s each here, may finish).
    assert smtp_sink.data_at[-1] - signalled < 1.0, smtp_sink.data_at[-1] - signalled
    assert "not sent" in out  # the summary says what was left for the next run
    assert_stopped_mid_delivery_then_rerun(db_url, smtp_sink, cli_env, tmp_path, expected,
                                           set(smtp_sink.keys()))


def test_operator_resolves_pending_rows(cli_env, db_url, smtp_sink, dueflow_cli):
    expected = due_contracts(db_url, 2)
    smtp_sink.faults = {"c000@example.com": "drop_before_data_reply",
                        "c001@example.com": "drop_before_data_reply"}
    assert dueflow_cli("run", "--as-of", AS_OF.isoformat(), env=cli_env).returncode == 0
    delivered_key, lost_key = sorted(expected)
    assert set(db.ledger_rows(db.engine_for(db_url))["status"]) == {"pending"}
    smtp_sink.faults = {}
    for key, outcome in ((delivered_key, "sent"), (lost_key, "failed")):
        done = dueflow_cli("resolve", key, "--as", outcome, "--note", "checked the relay log", env=cli_env)
        assert done.returncode == 0, done.stderr
        assert f"pending → {outcome}" in done.stdout
    again = dueflow_cli("resolve", delivered_key, "--as", "failed", env=cli_env)
    assert again.returncode == 2
    assert "sent: only a pending, failed or bounced row can be settled" in again.stderr
    retry = dueflow_cli("run", "--as-of", AS_OF.isoformat(), env=cli_env | {"DUEFLOW_RUN_LOCK": "on"})
    out = retry.stdout
    assert retry.returncode == 0, retry.stderr
    ledger = db.ledger_rows(db.engine_for(db_url)).set_index("key")
    # The one settled as failed is retried by the next run (its attempts counted anew from
    # the operator's word); the one settled as sent is never sent again.
    assert smtp_sink.keys() == [lost_key]
    assert "1 retried" in out
    assert ledger.loc[lost_key, "status"] == "sent" and ledger.loc[lost_key, "attempts"] == 1
    assert ledger.loc[delivered_key, "status"] == "sent" and ledger.loc[delivered_key, "attempts"] == 1
    said = f"resolved by {getpass.getuser()} as sent: checked the relay log"  # who, in the ledger
    assert said in ledger.loc[delivered_key, "error"]


@pytest.mark.pg
def test_six_racing_runs_without_the_lock_deliver_each_key_once(mail_env, pg_url, smtp_sink,
                                                                tmp_path):
    db.init_db(db.engine_for(pg_url), sample_tables=True)
    expected = due_contracts(pg_url, 150)
    smtp_sink.delay = 0.01
    # Both fences off, and the night guard (a first night this big would wait for a person).
    env = mail_env | {"DUEFLOW_DATABASE_URL": pg_url, "DUEFLOW_RUN_LOCK": "off", "DUEFLOW_GUARD": "off"}
    runs = [start(["run", "--as-of", AS_OF.isoformat()], env, tmp_path) for _ in range(6)]
    results = [r.communicate(timeout=300) for r in runs]
    assert [r.returncode for r in runs] == [0] * 6, [err for _, err in results]
    received = smtp_sink.keys()
    assert len(received) == len(set(received)), "a key was delivered twice"
    assert set(received) == expected
    winners = [out for out, _ in results if "sent, 0 failed" in out and "Nothing new" not in out]
    assert winners, "no run reported sending"


@pytest.mark.pg
def test_racing_runs_with_statements_put_each_invoice_in_exactly_one_email(mail_env, pg_url, smtp_sink,
                                                                          tmp_path):
    """DUEFLOW_STATEMENTS=reminders, four real processes racing, no lock: every invoice step
    is in exactly one email — whichever run won it, in a statement or alone (docs/design.md,
    "Statements")."""
    db.init_db(db.engine_for(pg_url), sample_tables=True)
    sent = (AS_OF - timedelta(days=8)).isoformat()
    insert(pg_url, "clients", [client(f"cl{c}") for c in range(6)])
    insert(pg_url, "invoices", [invoice(f"i{c}-{n}", f"cl{c}", sent) for c in range(6) for n in range(7)])
    smtp_sink.delay = 0.01
    env = mail_env | {"DUEFLOW_DATABASE_URL": pg_url, "DUEFLOW_RUN_LOCK": "off", "DUEFLOW_GUARD": "off",
                      "DUEFLOW_STATEMENTS": "reminders"}
    runs = [start(["run", "--as-of", AS_OF.isoformat()], env, tmp_path) for _ in range(4)]
    results = [r.communicate(timeout=300) for r in runs]
    assert [r.returncode for r in runs] == [0] * 4, [err for _, err in results]
    ledger = db.read_frame(db.engine_for(pg_url), "SELECT key, status, statement_key FROM dueflow_ledger", {})
    assert len(ledger) == 42 and set(ledger["status"]) == {"sent"}
    carriers = ledger["statement_key"].fillna(ledger["key"])
    received = smtp_sink.keys()
    assert sorted(received) == sorted(set(carriers))  # each email once, under its carrier's key
    assert len(received) < 42  # and the clients' reminders did go as statements


@pytest.mark.pg
def test_with_the_lock_one_run_works_and_the_others_exit_cleanly(mail_env, pg_url, smtp_sink,
                                                                 tmp_path):
    db.init_db(db.engine_for(pg_url), sample_tables=True)
    expected = due_contracts(pg_url, 80)
    smtp_sink.gate.clear()  # the first run blocks in its first DATA until we open the gate
    env = mail_env | {"DUEFLOW_DATABASE_URL": pg_url, "DUEFLOW_RUN_LOCK": "on"}
    first = start(["run", "--as-of", AS_OF.isoformat()], env, tmp_path)
    wait_for(lambda: len(smtp_sink.data_seen) >= 1, "a first DATA command", 90, interval=0.02)
    others = [start(["run", "--as-of", AS_OF.isoformat()], env, tmp_path) for _ in range(3)]
    for other in others:
        out, err = other.communicate(timeout=120)
        assert other.returncode == 0, err
        assert "another dueflow run is active on this database" in out
        assert "Traceback" not in err
    assert first.poll() is None, "the first run finished before the others were turned away"
    smtp_sink.gate.set()
    out, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    assert "80 sent, 0 failed, 0 pending of 80 new" in out
    assert sorted(smtp_sink.keys()) == sorted(expected)
