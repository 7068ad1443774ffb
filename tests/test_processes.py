"""Real `dueflow run` processes: killed mid-delivery, racing each other, settled by an
operator. The SMTP server and the databases are real; so is SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import date, timedelta
from pathlib import Path

import pytest

from flows.nightly_alerts import DELIVERY_WORKERS
from tasks import db
from tasks.deliver import GROUP_MAX
from tests.factories import contract, insert, wait_for

AS_OF = date(2027, 1, 1)
ROOT = Path(__file__).resolve().parents[1]


def start(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen:
    full = {k: v for k, v in os.environ.items() if not k.startswith("DUEFLOW_")} | env
    full["PYTHONPATH"] = str(ROOT)
    return subprocess.Popen([sys.executable, "-m", "flows.cli", *args], env=full, cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture
def mail_env(smtp_sink, prefect_server) -> dict[str, str]:
    return {"DUEFLOW_MAIL_URL": f"smtp://127.0.0.1:{smtp_sink.port}",
            "DUEFLOW_MAIL_FROM": "alerts@dueflow.test", "PREFECT_API_URL": prefect_server}


@pytest.fixture
def cli_env(db_url, mail_env) -> dict[str, str]:
    return mail_env | {"DUEFLOW_DATABASE_URL": db_url}


def due_contracts(url: str, n: int) -> set[str]:
    rows = [contract(f"c{i:03d}", AS_OF + timedelta(days=[60, 30, 15][i % 3])) for i in range(n)]
    insert(url, "contracts", rows)
    return {f"renewal/{r['id']}/{r['renewal_date']}/{[60, 30, 15][i % 3]}d" for i, r in enumerate(rows)}


def ledger_by_claim(url: str) -> tuple[set[str], set[str], set[str]]:
    """(sent, pending and claimed — in doubt, pending and unclaimed — never handed to SMTP)."""
    rows = db.read_frame(db.engine_for(url), "SELECT key, status, sending_at FROM dueflow_ledger", {})
    pending = rows["status"] == "pending"
    return (set(rows.loc[rows["status"] == "sent", "key"]),
            set(rows.loc[pending & rows["sending_at"].notna(), "key"]),
            set(rows.loc[pending & rows["sending_at"].isna(), "key"]))


def assert_stopped_mid_delivery_then_rerun(db_url: str, smtp_sink, cli_env: dict[str, str],
                                           tmp_path: Path, expected: set[str],
                                           received_before: set[str]) -> None:
    """After a run stopped mid-delivery: nothing sent is lost or doubled, at most one group
    per delivery thread is in doubt, and a rerun sends everything never handed to SMTP."""
    assert 10 <= len(received_before) < len(expected), "the stop did not land mid-delivery"
    assert set(db.ledger_rows(db.engine_for(db_url))["key"]) == expected  # reserved first (G2)
    sent, in_doubt, unsent = ledger_by_claim(db_url)
    assert sent <= received_before  # nothing is marked sent that was not received
    assert received_before - sent <= in_doubt  # delivered but unrecorded: in doubt, not lost
    assert not (unsent & set(smtp_sink.data_seen))  # unclaimed rows never reached the server
    assert len(in_doubt) <= DELIVERY_WORKERS * GROUP_MAX, in_doubt

    smtp_sink.delay = 0
    rerun = start(["run", "--as-of", AS_OF.isoformat()], cli_env, tmp_path)
    out, err = rerun.communicate(timeout=120)
    assert rerun.returncode == 0, err
    received = smtp_sink.keys()
    assert len(received) == len(set(received)), "a key was received twice"
    assert set(received) == received_before | unsent  # every unclaimed row went out, once
    after_sent, after_doubt, after_unsent = ledger_by_claim(db_url)
    assert after_doubt == in_doubt and not after_unsent  # in doubt stays for an operator (G3)
    assert after_sent == expected - in_doubt
    if in_doubt:
        assert "Ledger needs attention" in out
        listed = start(["ledger", "--status", "pending", "--json"], cli_env, tmp_path)
        out, _ = listed.communicate(timeout=60)
        assert {json.loads(line)["key"] for line in out.splitlines()} == in_doubt


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


def test_operator_resolves_pending_rows(cli_env, db_url, smtp_sink, tmp_path):
    expected = due_contracts(db_url, 2)
    smtp_sink.faults = {"c000@example.com": "drop_before_data_reply",
                        "c001@example.com": "drop_before_data_reply"}
    run = start(["run", "--as-of", AS_OF.isoformat()], cli_env, tmp_path)
    assert run.wait(120) == 0
    delivered_key, lost_key = sorted(expected)
    assert set(db.ledger_rows(db.engine_for(db_url))["status"]) == {"pending"}
    smtp_sink.faults = {}
    for key, outcome in ((delivered_key, "sent"), (lost_key, "failed")):
        done = start(["resolve", key, "--as", outcome, "--note", "checked the relay log"],
                     cli_env, tmp_path)
        out, err = done.communicate(timeout=60)
        assert done.returncode == 0, err
        assert f"pending → {outcome}" in out
    again = start(["resolve", delivered_key, "--as", "failed"], cli_env, tmp_path)
    _, err = again.communicate(timeout=60)
    assert again.returncode == 2 and "not pending (sent): left as it is" in err
    retry = start(["run", "--as-of", AS_OF.isoformat()], cli_env | {"DUEFLOW_RUN_LOCK": "on"},
                  tmp_path)
    out, err = retry.communicate(timeout=120)
    assert retry.returncode == 0, err
    ledger = db.ledger_rows(db.engine_for(db_url)).set_index("key")
    # The one settled as failed is retried by the next run, with its stored message;
    # the one settled as sent is never sent again.
    assert smtp_sink.keys() == [lost_key]
    assert "1 retried" in out
    assert ledger.loc[lost_key, "status"] == "sent" and ledger.loc[lost_key, "attempts"] == 2
    assert ledger.loc[delivered_key, "status"] == "sent" and ledger.loc[delivered_key, "attempts"] == 1
    assert "resolved by an operator as sent: checked the relay log" in ledger.loc[delivered_key, "error"]


@pytest.mark.pg
def test_six_racing_runs_without_the_lock_deliver_each_key_once(mail_env, pg_url, smtp_sink,
                                                                tmp_path):
    db.init_db(db.engine_for(pg_url))
    expected = due_contracts(pg_url, 150)
    smtp_sink.delay = 0.01
    env = mail_env | {"DUEFLOW_DATABASE_URL": pg_url, "DUEFLOW_RUN_LOCK": "off"}
    runs = [start(["run", "--as-of", AS_OF.isoformat()], env, tmp_path) for _ in range(6)]
    results = [r.communicate(timeout=300) for r in runs]
    assert [r.returncode for r in runs] == [0] * 6, [err for _, err in results]
    received = smtp_sink.keys()
    assert len(received) == len(set(received)), "a key was delivered twice"
    assert set(received) == expected
    winners = [out for out, _ in results if "sent, 0 failed" in out and "Nothing new" not in out]
    assert winners, "no run reported sending"


@pytest.mark.pg
def test_with_the_lock_one_run_works_and_the_others_exit_cleanly(mail_env, pg_url, smtp_sink,
                                                                 tmp_path):
    db.init_db(db.engine_for(pg_url))
    expected = due_contracts(pg_url, 80)
    smtp_sink.gate.clear()  # the first run blocks in its first DATA until we open the gate
    env = mail_env | {"DUEFLOW_DATABASE_URL": pg_url, "DUEFLOW_RUN_LOCK": "on"}
    first = start(["run", "--as-of", AS_OF.isoformat()], env, tmp_path)
    wait_for(lambda: len(smtp_sink.data_seen) >= 1, "a first DATA command", 90, interval=0.02)
    others = [start(["run", "--as-of", AS_OF.isoformat()], env, tmp_path) for _ in range(5)]
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
