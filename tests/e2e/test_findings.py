"""Each finding of the hardening issue (#10), reproduced as it was found; every one of these
failed before the change. Findings 2 and 3 (a dying batch, a never-stored row) are in
test_faults.py, 8 (the database lost at the end) too, and 9 (Ctrl-C) in test_processes.py."""

from __future__ import annotations

import json
import sqlite3
from datetime import timedelta
from email import message_from_bytes, policy

import pytest

from dueflow.flows.nightly_alerts import nightly_alerts
from dueflow.tasks.adapters import db
from dueflow.tasks.core.message import HEADER_NAMES
from tests.helpers.factories import client, contract, insert, invoice, sourced, without_keys
from tests.helpers.runs import AS_OF, due_contracts, hold_write_lock

RENEWAL = AS_OF + timedelta(days=30)


def key(cid: str) -> str:
    return f"renewal/{cid}/{RENEWAL}/30d"


def quarantined(url: str) -> dict[str, str]:
    rows = db.quarantine_rows(db.engine_for(url))
    return dict(zip(rows["source_id"], rows["reason"], strict=True))


def test_1_no_id_or_title_can_add_a_header_line_or_break_the_message(run_env, smtp_sink):
    url = run_env
    nul = "" if url.startswith("postgresql") else "\x00"  # PostgreSQL cannot store NUL
    insert(url, "contracts", [
        contract("c\r\nBcc: victim@example.com", RENEWAL),
        contract("c\nX-Injected: yes", RENEWAL),
        contract("ñandú-42", RENEWAL, notify_email="owner@example.com"),
        contract("x" * 1100, RENEWAL),
        contract("spoof", RENEWAL, title=f"=?utf-8?b?U3Bvb2Y=?= wire{nul}d",
                 vendor="Acme\r\nBcc: v@x.example"),
    ])
    summary = nightly_alerts(as_of=AS_OF)
    assert summary.sent == 2 and summary.quarantined == 3
    reasons = quarantined(url)
    assert reasons["c\\r\\nBcc: victim@example.com"] == "id contains control characters"
    assert reasons["c\\nX-Injected: yes"] == "id contains control characters"
    assert reasons["x" * 200 + "…"] == "id longer than 200 characters"
    for raw in smtp_sink.raw:
        head = raw.split(b"\r\n\r\n", 1)[0]
        assert head.isascii() and all(len(line) <= 998 for line in raw.split(b"\r\n"))
        message = message_from_bytes(raw, policy=policy.strict)
        assert not message.defects and list(message.keys()) == list(HEADER_NAMES)
    received = smtp_sink.by_key()
    assert set(received) == {key("ñandú-42"), key("spoof")}  # the key header decodes back
    subject = str(received[key("spoof")]["Subject"])
    assert "=?utf-8?b?U3Bvb2Y=?=" in subject and "Spoof" not in subject  # text, not decoded
    assert "\x00" not in subject and received[key("spoof")]["Bcc"] is None


@pytest.mark.parametrize(("sender", "envelope", "name"), [
    ("Équipe Finanzas, S.A. <alertas@corp.example>", "alertas@corp.example", "Équipe Finanzas, S.A."),
    ("Finance, Inc <alerts@corp.example>", "alerts@corp.example", "Finance, Inc"),
])
def test_4_a_sender_with_a_name_sends_every_email_from_its_address(run_env, smtp_sink, monkeypatch,
                                                                   sender, envelope, name):
    monkeypatch.setenv("DUEFLOW_MAIL_FROM", sender)
    insert(run_env, "contracts", [contract(f"c{n}", RENEWAL) for n in range(3)])
    summary = nightly_alerts(as_of=AS_OF)
    assert summary.sent == 3 and summary.pending == 0
    assert smtp_sink.envelope_from == [envelope] * 3
    assert {m["From"].addresses[0].display_name for m in smtp_sink.messages} == {name}


@pytest.mark.parametrize("sender", ["Finance", "Finance <alerts@corp example>",
                                    "a@corp.example, b@corp.example", "Équipe <équipe@corp.example>"])
def test_4_a_sender_that_is_not_one_address_stops_before_any_write(cli_env, db_url, dueflow_cli, sender):
    due_contracts(db_url, 2)
    result = dueflow_cli("run", "--as-of", AS_OF.isoformat(), env=cli_env | {"DUEFLOW_MAIL_FROM": sender})
    err = result.stderr
    assert result.returncode == 2 and err.startswith("dueflow: error: DUEFLOW_MAIL_FROM=")
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert db.ledger_rows(db.engine_for(db_url)).empty


def test_5_bad_rows_in_sqlite_tables_without_a_key_never_stop_the_night(smtp_sink, prefect_server,
                                                                         tmp_path, monkeypatch):
    path = tmp_path / "own.db"
    with sqlite3.connect(path) as conn:  # the user's own tables: no primary keys
        conn.execute("CREATE TABLE contracts (id text, vendor text, title text, amount text,"
                     " currency text, renewal_date date, notify_email text, status text)")
        rows = [("good", "Acme"), (None, "Null id"), ("dup", "First"), ("dup", "Second"),
                ("bytes", b"Ven\xffdor")]
        conn.executemany("INSERT INTO contracts VALUES (?, CAST(? AS TEXT), 'Hosting', '10.00', 'EUR',"
                         " ?, 'owner@example.com', 'active')",
                         [(cid, vendor, RENEWAL.isoformat()) for cid, vendor in rows])
    url = f"sqlite:///{path}"
    db.init_db(db.engine_for(url), sample_tables=True)
    for name, value in {"DUEFLOW_DATABASE_URL": url, "DUEFLOW_MAIL_URL": f"smtp://127.0.0.1:{smtp_sink.port}",
                        "DUEFLOW_MAIL_FROM": "alerts@dueflow.test"}.items():
        monkeypatch.setenv(name, value)
    summary = nightly_alerts(as_of=AS_OF)
    assert smtp_sink.keys() == [key("good")] and summary.sent == 1
    assert quarantined(url) == {"(missing id)": "id missing",
                                "dup": "id 'dup' appears 2 times in contracts",
                                "bytes": "contracts.vendor is not valid UTF-8"}


def test_5_a_duplicated_id_is_seen_whatever_the_other_copy_says(run_env, smtp_sink):
    # Found by the hostile-night property test: the copy that cannot be due tonight (a
    # draft, a cancelled contract, a date outside the window) was never extracted, so the
    # duplicate went unseen and the other copy was sent.
    url = run_env
    without_keys(url, "contracts", "invoices")
    insert(url, "clients", [client("cl")])
    sent_at = (AS_OF - timedelta(days=10)).isoformat() + "T10:00:00+00:00"
    insert(url, "invoices", [invoice("twice", "cl", sent_at), invoice("twice", "cl", sent_at, status="draft"),
                             invoice("once", "cl", sent_at)])
    insert(url, "contracts", [contract("c-twice", RENEWAL), contract("c-twice", RENEWAL, status="cancelled"),
                              contract("c-far", RENEWAL),
                              contract("c-far", RENEWAL + timedelta(days=400))])
    summary = nightly_alerts(as_of=AS_OF)
    assert smtp_sink.keys() == ["dunning/once/REMINDED_1"] and summary.sent == 1
    assert quarantined(url) == {"twice": "id 'twice' appears 2 times in invoices",
                                "c-twice": "id 'c-twice' appears 2 times in contracts",
                                "c-far": "id 'c-far' appears 2 times in contracts"}


def test_6_no_row_falls_into_a_hole_between_decide_and_reserve(run_env, smtp_sink):
    url = run_env
    insert(url, "clients", [client("cl")])
    sent_at = (AS_OF - timedelta(days=10)).isoformat() + "T10:00:00+00:00"
    insert(url, "invoices", [invoice("fine", "cl", sent_at),
                             invoice("no-status", "cl", sent_at, status=None)])
    dry = nightly_alerts(as_of=AS_OF, dry_run=True)
    assert dry.rows.set_index("key").loc["invoices/no-status", "status"] == "quarantined"
    assert dry.won == 1
    real = nightly_alerts(as_of=AS_OF)
    assert real.sent == 1 and real.quarantined == 1 and real.no_longer_due == 0
    assert "reserved by another run" not in " ".join(real.rows["detail"].astype(str))
    assert quarantined(url) == {"no-status": "status missing"}


def test_7_money_is_exact_and_in_the_currency_s_own_units(run_env, smtp_sink):
    url = run_env
    insert(url, "clients", [client("cl")])
    sent_at = (AS_OF - timedelta(days=10)).isoformat() + "T10:00:00+00:00"
    insert(url, "invoices", [
        invoice("big", "cl", sent_at, amount="123456789012345678.99", currency="EUR"),
        invoice("yen", "cl", sent_at, amount="1450", currency="JPY"),
        invoice("dinar", "cl", sent_at, amount="12.345", currency="KWD"),
        invoice("yen-cents", "cl", sent_at, amount="980.40", currency="JPY"),
        invoice("credit", "cl", sent_at, amount="-200"),
        invoice("zero", "cl", sent_at, amount="0"),
    ])
    nightly_alerts(as_of=AS_OF)
    bodies = {k: m.get_body(("plain",)).get_content() for k, m in smtp_sink.by_key().items()}
    assert "€123,456,789,012,345,678.99" in bodies["dunning/big/REMINDED_1"]
    assert "¥1,450" in bodies["dunning/yen/REMINDED_1"] and "1,450.00" not in bodies["dunning/yen/REMINDED_1"]
    assert "KWD12.345" in bodies["dunning/dinar/REMINDED_1"]
    assert quarantined(url) == {
        "yen-cents": "amount 980.40 has more decimals than JPY uses (0)",
        "credit": "amount is negative (a credit note): nothing to collect",
        "zero": "amount is zero: nothing to collect"}


def test_10_failed_rows_are_reported_as_failed_with_the_command_that_lists_them(cli_env, db_url,
                                                                                smtp_sink, dueflow_cli):
    due_contracts(db_url, 2)
    smtp_sink.faults["c000@example.com"] = "rcpt_550"  # refused for good: failed, permanent
    assert dueflow_cli("run", "--as-of", AS_OF.isoformat(), env=cli_env).returncode == 0
    again = dueflow_cli("run", "--as-of", AS_OF.isoformat(), env=cli_env)
    out, err = again.stdout, again.stderr
    assert again.returncode == 0, err
    assert "1 due email(s) were already handled by earlier runs, 1 failed earlier" in out
    assert "Ledger: 1 failed permanently — " in out and "dueflow ledger --status failed" in out
    assert "failed permanently in an earlier run" in out  # the next night says why it is not retried
    assert "--status pending" not in out and "retried by later runs" not in out
    # The mailbox is fixed behind the same address: one word sends it once more, once.
    [key] = [k for k in db.ledger_rows(db.engine_for(db_url))["key"] if "/c000/" in k]
    smtp_sink.faults.clear()
    resolved = dueflow_cli("resolve", key, "--as", "retry", "--by", "alice", env=cli_env)
    assert resolved.returncode == 0, resolved.stderr
    assert f"{key}: failed → retry (by alice); the next run sends it again, once" in resolved.stdout
    for _ in range(2):
        assert dueflow_cli("run", "--as-of", AS_OF.isoformat(), env=cli_env).returncode == 0
    assert [m["To"] for m in smtp_sink.messages].count("c000@example.com") == 1
    row = db.ledger_rows(db.engine_for(db_url)).set_index("key").loc[key]
    assert (row["status"], row["recipient"]) == ("sent", "c000@example.com")
    listed = dueflow_cli("ledger", "--format", "json", env=cli_env).stdout
    assert '"resolved_by": "alice"' in listed


def test_10_quarantined_rows_are_listed_by_the_cli(cli_env, db_url, smtp_sink, dueflow_cli):
    insert(db_url, "contracts", [contract("bad", RENEWAL, currency="XYZ"), contract("ok", RENEWAL)])
    assert dueflow_cli("run", "--as-of", AS_OF.isoformat(), env=cli_env).returncode == 0
    listed = dueflow_cli("quarantine", "--json", env=cli_env)
    out, err = listed.stdout, listed.stderr
    assert listed.returncode == 0, err
    [row] = [json.loads(line) for line in out.splitlines()]
    assert (row["job"], row["source_id"], row["reason"]) == ("renewal", "bad", "unknown currency 'XYZ'")
    assert row["first_as_of"] == AS_OF.isoformat() and row["times_seen"] == 1


@pytest.mark.parametrize(("hold", "timeout", "code"), [(2, 20, 0), (30, 2, 2)])
def test_10_a_locked_sqlite_file_is_waited_for_out_loud(cli_env, sqlite_url, smtp_sink, dueflow_cli,
                                                        hold, timeout, code):
    db.init_db(db.engine_for(sqlite_url), sample_tables=True)
    due_contracts(sqlite_url, 2)
    env = cli_env | {"DUEFLOW_DATABASE_URL": sqlite_url, "DUEFLOW_DB_LOCK_TIMEOUT": str(timeout)}
    holder = hold_write_lock(sqlite_url.removeprefix("sqlite:///"), hold)
    try:
        run = dueflow_cli("run", "--as-of", AS_OF.isoformat(), env=env)
        out, err = run.stdout, run.stderr
    finally:
        holder.kill()
    assert run.returncode == code, err
    assert "waiting for the database file" in err and "another process holds its write lock" in err
    if code:
        assert "is locked by another process (waited 2 s" in err and "Traceback" not in err
        assert db.ledger_rows(db.engine_for(sqlite_url)).empty
    else:
        assert "2 sent" in out


def test_10_many_pending_rows_are_settled_at_once(cli_env, db_url, smtp_sink, dueflow_cli, tmp_path):
    keys = sorted(due_contracts(db_url, 4))
    smtp_sink.faults = {f"c00{n}@example.com": "drop_before_data_reply" for n in range(3)}
    # Three drops in a row would open the night's breaker (a server that drops every
    # conversation is down) and leave the fourth unsent, depending on the order of sends.
    env = cli_env | {"DUEFLOW_SMTP_MAX_FAILURES": "10"}
    assert dueflow_cli("run", "--as-of", AS_OF.isoformat(), env=env).returncode == 0
    in_doubt = [k for k in keys if any(f"c00{n}" in k for n in range(3))]
    listed = tmp_path / "keys.txt"
    listed.write_text(f"# checked in the relay's log\n{in_doubt[1]}\n{in_doubt[2]}\n")
    done = dueflow_cli("resolve", in_doubt[0], "--from-file", str(listed), "--as", "sent", env=cli_env)
    out, err = done.stdout, done.stderr
    assert done.returncode == 0, err
    assert out.count("pending → sent") == 3
    statuses = db.ledger_rows(db.engine_for(db_url)).set_index("key")["status"]
    assert set(statuses) == {"sent"}
    again = dueflow_cli("resolve", *in_doubt[:2], "--as", "failed", env=cli_env)
    assert again.returncode == 2 and again.stderr.count(
        "sent: only a pending, failed or bounced row can be settled: left as it is") == 2


def test_10_rows_a_run_never_handed_to_smtp_can_be_settled_by_run(cli_env, db_url, smtp_sink, dueflow_cli):
    import pandas as pd

    engine = db.engine_for(db_url)
    ids = ["a", "b"]
    insert(db_url, "contracts", [contract(c, RENEWAL) for c in ids])
    db.reserve(sourced(engine), "renewal", pd.DataFrame({
        "key": [key(c) for c in ids], "subject_id": ids, "cycle": RENEWAL.isoformat(), "step": "30d",
        "step_rank": 30, "recipient": "x@example.com", "previous_by": None}), AS_OF, "run-42")
    refused = dueflow_cli("resolve", "--never-handed-by", "run-42", "--as", "sent", env=cli_env)
    assert refused.returncode == 2
    assert refused.stderr.count("never handed to SMTP, so it cannot have been sent") == 2
    done = dueflow_cli("resolve", "--never-handed-by", "run-42", "--as", "failed", env=cli_env)
    out, err = done.stdout, done.stderr
    assert done.returncode == 0, err
    assert sorted(line.split(":")[0] for line in out.splitlines()) == sorted(key(c) for c in ids)
    assert set(db.ledger_rows(engine)["status"]) == {"failed"}
    assert dueflow_cli("run", "--as-of", AS_OF.isoformat(), env=cli_env).returncode == 0
    assert sorted(smtp_sink.keys()) == sorted(key(c) for c in ids)  # settled failed: sent again
