"""Faults injected into real runs (G3): database sessions terminated mid-delivery, a SQLite
write lock held by another process, a run that died between reserving and storing, the
database lost at the end. Each is followed by a rerun and a check of the mail server and
the ledger: no key received twice; every key received once, or pending only if its
content may have left, or visibly failed."""

from __future__ import annotations

import subprocess
import threading
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pandas as pd
import pytest
from sqlalchemy import create_engine, text

from dueflow.flows.nightly_alerts import DELIVERY_WORKERS, nightly_alerts
from dueflow.tasks.adapters import db
from dueflow.tasks.deliver import GROUP_MAX
from tests.conftest import PG_URL
from tests.helpers.factories import client, contract, insert, invoice, sourced
from tests.helpers.runs import AS_OF, due_contracts, hold_write_lock, ledger_by_claim, start


def terminate_dueflow_sessions(url: str) -> int:
    """pg_terminate_backend on every session open on this test's database (they carry its
    schema's name: tests/conftest.py)."""
    name = parse_qs(urlsplit(url).query)["application_name"][0]
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            return len(conn.execute(text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = :name"
                " AND datname = current_database() AND pid <> pg_backend_pid()"), {"name": name}).all())
    finally:
        admin.dispose()


def assert_rerun_completes_the_night(url: str, smtp_sink, env: dict[str, str], tmp_path,
                                     expected: set[str]) -> set[str]:
    """Run again: nothing twice, everything never handed to SMTP now sent; returns the keys
    left in doubt (claimed, outcome unknown: an operator's)."""
    _, _, unsent = ledger_by_claim(url)
    rerun = start(["run", "--as-of", AS_OF.isoformat()], env, tmp_path)
    _, err = rerun.communicate(timeout=180)
    assert rerun.returncode == 0, err
    received = smtp_sink.keys()
    assert len(received) == len(set(received)), "a key was received twice"
    sent, in_doubt, still_unsent = ledger_by_claim(url)
    assert not still_unsent and unsent <= sent
    assert sent | in_doubt == expected and sent <= set(received)
    return in_doubt


@pytest.mark.pg
def test_sessions_terminated_mid_delivery_lose_and_double_nothing(mail_env, pg_url, smtp_sink,
                                                                   tmp_path):
    db.init_db(db.engine_for(pg_url), sample_tables=True)
    expected = due_contracts(pg_url, 120)
    smtp_sink.delay = 0.02
    terminated: list[int] = []

    def terminate(_key: str) -> None:
        if len(smtp_sink.data_seen) in (15, 50, 90):
            terminated.append(terminate_dueflow_sessions(pg_url))

    smtp_sink.on_data = terminate
    # A first night this big waits for a person (tests/e2e/test_night_guard.py): not this test's subject.
    env = mail_env | {"DUEFLOW_DATABASE_URL": pg_url, "DUEFLOW_GUARD": "off"}
    run = start(["run", "--as-of", AS_OF.isoformat()], env, tmp_path)
    out, err = run.communicate(timeout=300)
    smtp_sink.on_data = None
    assert run.returncode == 0, err
    assert "Traceback" not in err
    assert sum(terminated) >= 3, terminated  # the run's sessions really were cut, three times
    received = smtp_sink.keys()
    assert len(received) == len(set(received)), "a key was received twice"
    _, in_doubt, unsent = ledger_by_claim(pg_url)
    # The run went on after each cut: almost everything went out in this very run.
    assert len(in_doubt) <= 3 * DELIVERY_WORKERS * GROUP_MAX and not unsent, (in_doubt, unsent)
    assert "Warning: the run lock's database connection was lost" in out
    assert assert_rerun_completes_the_night(pg_url, smtp_sink, env, tmp_path, expected) == in_doubt


@pytest.mark.parametrize(("hold", "recovered_by"), [(4, "the same run"), (14, "the next run")])
def test_a_sqlite_write_lock_held_mid_delivery_strands_nothing(mail_env, sqlite_url, smtp_sink,
                                                               tmp_path, hold, recovered_by):
    db.init_db(db.engine_for(sqlite_url), sample_tables=True)
    expected = due_contracts(sqlite_url, 60)
    path = sqlite_url.removeprefix("sqlite:///")
    smtp_sink.delay = 0.05
    holders: list[subprocess.Popen] = []
    lock = threading.Lock()

    def take_the_lock(_key: str) -> None:
        with lock:
            if len(smtp_sink.data_seen) >= 10 and not holders:
                holders.append(hold_write_lock(path, hold))

    smtp_sink.on_data = take_the_lock
    env = mail_env | {"DUEFLOW_DATABASE_URL": sqlite_url, "DUEFLOW_DB_LOCK_TIMEOUT": "1"}
    run = start(["run", "--as-of", AS_OF.isoformat()], env, tmp_path)
    out, err = run.communicate(timeout=300)
    smtp_sink.on_data = None
    assert run.returncode == 0, err
    assert holders and "Traceback" not in err
    received = smtp_sink.keys()
    assert len(received) == len(set(received)), "a key was received twice"
    _, in_doubt, unsent = ledger_by_claim(sqlite_url)
    assert len(in_doubt) <= DELIVERY_WORKERS * GROUP_MAX
    if recovered_by == "the same run":  # its second pass got through once the lock was gone
        assert not unsent
    else:  # held past every try: left unclaimed, and said so
        assert unsent and f"{len(unsent)} not sent (a later run sends them)" in out
    holders[0].wait(60)
    assert assert_rerun_completes_the_night(sqlite_url, smtp_sink, env, tmp_path, expected) == in_doubt


def test_reserved_rows_never_stored_are_rendered_and_sent_by_the_next_run(run_env, smtp_sink):
    """A run that died between reserving and storing left pending rows with no message. One
    is settled `failed` by an operator (the documented recovery), one is left alone: the
    next run renders both from the source rows and sends them once; the reminder after
    them is dated from when the first one really went out."""
    url = run_env
    engine = db.engine_for(url)
    renewal = AS_OF + timedelta(days=30)
    insert(url, "contracts", [contract("c1", renewal), contract("c2", renewal)])
    insert(url, "clients", [client("en")])
    sent_at = (AS_OF - timedelta(days=9)).isoformat() + "T10:00:00+00:00"
    insert(url, "invoices", [invoice("inv", "en", sent_at)])
    for job, keys in (("renewal", ["c1", "c2"]), ("dunning", ["inv"])):
        rows = [{"key": f"renewal/{c}/{renewal}/30d" if job == "renewal" else f"dunning/{c}/REMINDED_1",
                 "subject_id": c, "cycle": renewal.isoformat() if job == "renewal" else "",
                 "step": "30d" if job == "renewal" else "REMINDED_1",
                 "step_rank": 30 if job == "renewal" else 1, "recipient": "x@example.com",
                 "previous_by": None if job == "renewal" else (AS_OF - timedelta(days=7)).isoformat()}
                for c in keys]
        assert db.reserve(sourced(engine), job, pd.DataFrame(rows), AS_OF - timedelta(days=2), "dead-run")
    assert db.resolve_pending(engine, f"renewal/c2/{renewal}/30d", "failed", "operator: never sent")

    nightly_alerts(as_of=AS_OF - timedelta(days=1))  # R1 is held: no REMINDED_2 behind it
    assert sorted(smtp_sink.keys()) == sorted([f"renewal/c1/{renewal}/30d", f"renewal/c2/{renewal}/30d",
                                               "dunning/inv/REMINDED_1"])
    ledger = db.read_frame(engine, "SELECT key, status, attempts, body_text, attempt_as_of"
                                   " FROM dueflow_ledger", {}).set_index("key")
    assert set(ledger["status"]) == {"sent"} and ledger["body_text"].notna().all()
    reminder = smtp_sink.by_key()["dunning/inv/REMINDED_1"]
    assert "F-inv" in reminder.get_body(("plain",)).get_content()  # rendered from the invoice

    for day in range(0, 6):  # R2 is due five days after R1 went out, not after it was reserved
        nightly_alerts(as_of=AS_OF + timedelta(days=day))
        got_r2 = "dunning/inv/REMINDED_2" in set(smtp_sink.keys())
        assert got_r2 == (day >= 4), day
    second = smtp_sink.by_key()["dunning/inv/REMINDED_2"].get_body(("plain",)).get_content()
    assert "We wrote to you on 31 December 2026" in second
    assert len(smtp_sink.keys()) == len(set(smtp_sink.keys()))


@pytest.mark.pg
def test_losing_the_database_after_the_work_is_a_warning_not_a_failure(mail_env, pg_url, smtp_sink,
                                                                        monkeypatch):
    """The last email's DATA cuts every session, the run lock's included: the run still
    records every outcome (its writes reconnect), ends Completed, and says what happened."""
    db.init_db(db.engine_for(pg_url), sample_tables=True)
    expected = due_contracts(pg_url, 12)

    def cut_at_the_end(_key: str) -> None:
        if len(smtp_sink.data_seen) == len(expected):
            terminate_dueflow_sessions(pg_url)

    smtp_sink.on_data = cut_at_the_end
    for name, value in (mail_env | {"DUEFLOW_DATABASE_URL": pg_url, "DUEFLOW_RUN_LOCK": "on"}).items():
        monkeypatch.setenv(name, value)
    summary = nightly_alerts(as_of=AS_OF)
    assert summary.sent == len(expected) and summary.pending == summary.not_sent == 0
    assert any("run lock" in w for w in summary.warnings), summary.warnings
    sent, in_doubt, unsent = ledger_by_claim(pg_url)
    assert sent == expected and not in_doubt and not unsent
