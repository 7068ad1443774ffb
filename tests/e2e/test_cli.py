"""The `dueflow` command as an operator uses it: the first run in a real process, real files;
bad input through the same `main` in this process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from email import message_from_bytes, policy
from pathlib import Path

import pytest

from tests.helpers.smtp_server import free_port

# `python -m dueflow.flows.cli ARGS…`, and at its exit a last line on stdout saying whether the
# cycle collector is on and how many objects the process froze (flows/collector.py).
WITH_COLLECTOR = ("import atexit, gc, runpy, sys\n"
                  "atexit.register(lambda: print('collector:', gc.isenabled(), gc.get_freeze_count()))\n"
                  "sys.argv = ['dueflow', *sys.argv[1:]]\n"
                  "runpy.run_module('dueflow.flows.cli', run_name='__main__')\n")


def dueflow(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: int = 120,
            collector: bool = False):
    full_env = {k: v for k, v in os.environ.items()
                if not k.startswith("DUEFLOW_") or k == "DUEFLOW_ALLOW_ANY_AS_OF"}
    full_env |= {"HOME": str(cwd), **(env or {})}
    command = ["-c", WITH_COLLECTOR] if collector else ["-m", "dueflow.flows.cli"]
    return subprocess.run(
        [sys.executable, *command, *args], cwd=cwd, env=full_env, text=True,
        capture_output=True, timeout=timeout,
    )


@pytest.fixture
def project_env(prefect_server) -> dict[str, str]:
    root = str(Path(__file__).resolve().parents[2])
    return {"PREFECT_API_URL": prefect_server, "PYTHONPATH": root}


def test_demo_runs_then_sends_nothing_new(tmp_path, project_env):
    project_env = project_env | {"DUEFLOW_ESCALATION_TO": "collections@example.com"}
    first = dueflow("demo", cwd=tmp_path, env=project_env)
    assert first.returncode == 0, first.stderr
    assert "Traceback" not in first.stdout + first.stderr
    assert first.stderr == ""
    assert "10 sent, 0 failed, 0 pending of 10 new" in first.stdout
    assert "unknown currency 'XYZ'" in first.stdout
    emails = sorted(p.name for p in (tmp_path / "outbox").glob("*.eml"))
    assert len(emails) == 10
    # The story: one of each kind, every reminder about an invoice already past its due date.
    sent = {m["X-Dueflow-Key"]: m for m in (message_from_bytes(p.read_bytes(), policy=policy.default)
                                            for p in (tmp_path / "outbox").glob("*.eml"))}
    assert sum(k.startswith("renewal/") for k in sent) == 7
    text = {k: m.get_body(("plain",)).get_content() for k, m in sent.items()}
    assert "was due on" in text["dunning/inv-101/REMINDED_1"]
    assert "(6 days ago)" in text["dunning/inv-101/REMINDED_1"]
    assert "lleva 21 días de retraso" in text["dunning/inv-102/REMINDED_2"]
    assert "is now 35 days overdue" in text["dunning/inv-108/OVERDUE"]
    assert sent["dunning/inv-108/OVERDUE"]["To"] == "collections@example.com"  # the environment's wins
    assert "billed to Contoso Retail" in text["dunning/inv-108/OVERDUE"]
    # Written as a company writes: a sender and a Reply-To a client can answer, how to pay.
    reminder = sent["dunning/inv-101/REMINDED_1"]
    assert reminder["From"] == "Harbour Supplies <billing@harbour-supplies.example>"
    assert reminder["Reply-To"] == "accounts@harbour-supplies.example"
    assert "IBAN" in text["dunning/inv-101/REMINDED_1"]
    assert "Accounts receivable, Harbour Supplies Ltd" in text["dunning/inv-101/REMINDED_1"]
    assert "replies to accounts@harbour-supplies.example" in first.stdout

    second = dueflow("demo", cwd=tmp_path, env=project_env, collector=True)
    assert second.returncode == 0, second.stderr
    assert "Nothing new to send" in second.stdout
    # The night's process froze what it loaded and collected with the collector back on.
    on, frozen = second.stdout.splitlines()[-1].removeprefix("collector: ").split()
    assert on == "True" and int(frozen) > 100_000
    assert "7 due email(s) were already handled" in second.stdout  # renewals; dunning moved on
    # Said once, in plain words: no internal counts line; what the listing leaves out is said.
    assert "won:" not in first.stdout + second.stdout and "due: " not in second.stdout
    assert "Not listed: 7 due email(s) already handled by earlier runs" in second.stdout
    assert "already handled  renewal/" not in second.stdout
    assert sorted(p.name for p in (tmp_path / "outbox").glob("*.eml")) == emails

    ledger = dueflow("ledger", "--json", cwd=tmp_path, env=project_env)
    records = [json.loads(line) for line in ledger.stdout.splitlines()]
    assert len(records) == 13  # and the 3 reminders finance sent by hand before dueflow (adopted)
    assert all({"key", "status", "as_of", "attempts"} <= r.keys() for r in records)
    assert sorted((r["status"], r["attempts"]) for r in records) == [("adopted", 0)] * 3 + [("sent", 1)] * 10
    # What an operator matches in the mail server's log: the Message-ID and the SMTP reply.
    import csv
    exported = list(csv.DictReader(dueflow("ledger", "--format", "csv", cwd=tmp_path,
                                           env=project_env).stdout.splitlines()))
    sent_rows = [r for r in exported if r["status"] == "sent"]
    assert len(sent_rows) == 10 and all(r["message_id"].startswith("<") for r in sent_rows)
    assert all(r["smtp_response"] for r in sent_rows)  # outbox: the file it was written to
    assert all(r["message_id"] for r in records if r["status"] == "sent")
    pending = dueflow("ledger", "--status", "pending", cwd=tmp_path, env=project_env)
    assert pending.stdout.strip() == "No ledger rows with status pending."


def test_init_db_is_idempotent(tmp_path, project_env):
    for made in ("Ledger created in sqlite:///dueflow.db", "Ledger up to date in sqlite:///dueflow.db"):
        result = dueflow("init-db", "--with-sample-tables", cwd=tmp_path, env=project_env)
        assert result.returncode == 0, result.stderr
        assert made in result.stdout and "Ready: the ledger and the sources can be read" in result.stdout


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["run", "--as-of", "2027-02-30"], {}, "invalid date '2027-02-30'"),
        (["run"], {"DUEFLOW_DATABASE_URL": "postgresql://nobody@127.0.0.1:{port}/x"},
         "cannot reach the database postgresql://nobody@127.0.0.1:{port}/x"),
        (["run"], {"DUEFLOW_DATABASE_URL": "postgresql://u:s3cret@127.0.0.1:{port}/x"},
         "cannot reach the database postgresql://u:***@127.0.0.1:{port}/x"),
        (["run"], {}, "the database file dueflow.db does not exist: run `dueflow init-db` first"),
        (["run"], {"DUEFLOW_MAIL_URL": "smtpx://mail"}, "DUEFLOW_MAIL_URL must look like"),
        (["run"], {"DUEFLOW_TIMEZONE": "Mars/Olympus"}, "is not a known time zone"),
        (["run"], {"DUEFLOW_DATABASE_URL": "nonsense"}, "is not a usable database URL"),
        (["run"], {"DUEFLOW_RUN_LOCK": "maybe"},  # an unknown switch value, once read as on
         "DUEFLOW_RUN_LOCK='maybe' is not on or off: write one of on, true, yes, 1, off, false, no, 0"),
    ],
)
def test_bad_input_gets_one_clear_line(tmp_path, dueflow_cli, args, env, message):
    port = str(free_port())
    env = {k: v.replace("{port}", port) for k, v in env.items()}
    result = dueflow_cli(*args, env=env)
    assert result.returncode == 2
    assert message.replace("{port}", port) in result.stderr
    assert "Traceback" not in result.stderr and "s3cret" not in result.stderr
    assert len(result.stderr.strip().splitlines()) <= 2  # argparse adds its usage line
    assert not (tmp_path / "outbox").exists()


def test_own_table_missing_a_column_is_named(tmp_path, dueflow_cli):
    import sqlite3

    with sqlite3.connect(tmp_path / "own.db") as conn:
        conn.execute("CREATE TABLE contracts (id text primary key, vendor text, renewal_date date)")
    env = {"DUEFLOW_DATABASE_URL": f"sqlite:///{tmp_path / 'own.db'}"}
    init = dueflow_cli("init-db", env=env)  # makes the ledger (exit 0), then names what the sources lack
    assert init.returncode == 0 and "Ledger created" in init.stdout and "Ready" not in init.stdout
    assert "  contracts: contracts has no column(s) title, amount, currency, notify_email, status\n" \
        in init.stdout
    assert init.stdout.splitlines()[-1].startswith("Next: `dueflow sources init --output sources.toml`")
    result = dueflow_cli("run", env=env)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "contracts has no column(s) title, amount, currency, notify_email, status — fix: map each" \
        in result.stderr


def test_a_home_prefect_cannot_make_is_one_line_and_nothing_is_sent(tmp_path):
    """Without PREFECT_API_URL a run starts Prefect's temporary server, which keeps its
    database in Prefect's home: one that cannot be made printed ~300 lines of uvicorn
    tracebacks and 'did not start in time'. Now one line with the fix, before the night."""
    root = str(Path(__file__).resolve().parents[2])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "DUEFLOW_"))}
    env |= {"PYTHONPATH": root, "HOME": "/proc/no-such-home", "DUEFLOW_ALLOW_ANY_AS_OF": "on",
            "DUEFLOW_MAIL_URL": f"file://{tmp_path / 'outbox'}"}
    subprocess.run([sys.executable, "-m", "dueflow.flows.cli", "init-db", "--with-sample-tables"],
                   cwd=tmp_path, env=env, check=True, capture_output=True, timeout=120)
    run = subprocess.run([sys.executable, "-m", "dueflow.flows.cli", "run"], cwd=tmp_path, env=env, text=True,
                         capture_output=True, timeout=120)
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr[-2000:]
    [line] = [x for x in run.stderr.splitlines() if x.startswith("dueflow: error:")]
    assert "/proc/no-such-home/.prefect cannot be created" in line and "set PREFECT_HOME" in line
    assert not (tmp_path / "outbox").exists()
