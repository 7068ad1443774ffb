"""Real `dueflow` processes for the tests: started as an operator starts them, and what
must hold after one of them is stopped mid-delivery."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import date, timedelta
from pathlib import Path

from dueflow.flows.nightly_alerts import DELIVERY_WORKERS
from dueflow.tasks.adapters import db
from dueflow.tasks.deliver import GROUP_MAX
from tests.helpers.factories import contract, insert

AS_OF = date(2027, 1, 1)
ROOT = Path(__file__).resolve().parents[2]


def start(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen:
    full = {k: v for k, v in os.environ.items()
            if not k.startswith("DUEFLOW_") or k == "DUEFLOW_ALLOW_ANY_AS_OF"} | env
    full["PYTHONPATH"] = str(ROOT)
    return subprocess.Popen([sys.executable, "-m", "dueflow.flows.cli", *args], env=full, cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def stop(processes: list[subprocess.Popen]) -> None:
    """Stop a test's Prefect workers: SIGTERM, and SIGKILL for one still shutting down after
    30 s (a worker under a loaded machine can take that long to stop; what the test checks
    happened before)."""
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(30)


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
        assert "Ledger: " in out and " pending — handed to the mail server, outcome unknown" in out
        listed = start(["ledger", "--status", "pending", "--json"], cli_env, tmp_path)
        out, _ = listed.communicate(timeout=60)
        assert {json.loads(line)["key"] for line in out.splitlines()} == in_doubt


def hold_write_lock(path: str, seconds: float) -> subprocess.Popen:
    """Another process that takes the SQLite file's write lock and keeps it."""
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sqlite3, sys, time\n"
         f"conn = sqlite3.connect({path!r}, isolation_level=None, timeout=30)\n"
         "conn.execute('BEGIN IMMEDIATE')\n"
         "print('locked', flush=True)\n"
         f"time.sleep({seconds})\n"
         "conn.execute('COMMIT')\n"],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    return holder
