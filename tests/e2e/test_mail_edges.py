"""Issue 25 at the mail server's edge, with real aiosmtpd servers and raw sockets: what
SMTP said is what the ledger records (finding 2), and a dead or hostile server is seen
once a night, not once per email (finding 5)."""

from __future__ import annotations

import socketserver
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from dueflow.flows.nightly_alerts import nightly_alerts
from dueflow.tasks.adapters import db
from dueflow.tasks.core.defaults import DELIVERY_WORKERS
from dueflow.tasks.deliver import LATEST_RETRY, Recipient, retry_time
from dueflow.tasks.steps import deliver_batch
from tests.e2e.test_failures import AS_OF, RENEWAL, delivery_settings, key, reserved, statuses
from tests.helpers.factories import contract, insert
from tests.helpers.smtp_server import SmtpSink


def test_a_huge_backoff_never_turns_a_delivered_email_into_pending(db_url, smtp_sink):
    """Finding 2: retry_backoff of 10**12 minutes overflowed `now + backoff` after the send,
    and every delivered email stayed `pending`. The retry time is now computed before the
    hand-over, and saturates."""
    ids = ["a", "b", "c", "later"]
    insert(db_url, "contracts", [contract(c, RENEWAL) for c in ids])
    emails = reserved(db_url, ids)
    smtp_sink.faults["later@example.com"] = "rcpt_451"  # a failure: it gets a retry time
    settings = delivery_settings(db_url, smtp_sink.port)
    huge = type(settings)(settings.mail, settings.sender, settings.ledger, settings.as_of,
                          timedelta(minutes=10**12))

    done = deliver_batch.fn([Recipient(e.key, e.recipient) for e in emails], huge)

    assert [d.status for d in done] == ["sent", "sent", "sent", "failed"]
    recorded = statuses(db_url)
    assert sorted(smtp_sink.keys()) == sorted(key(c) for c in ids[:3])
    delivered = smtp_sink.keys()
    assert all(recorded[k] == "sent" for k in delivered)  # every delivered one: sent
    assert recorded[key("later")] == "failed"
    [retry_after] = db.read_frame(db.engine_for(db_url), "SELECT retry_after FROM dueflow_ledger"
                                  " WHERE key = :k", {"k": key("later")})["retry_after"]
    assert str(retry_after).startswith(str(LATEST_RETRY.year))


def test_retry_time_cannot_overflow():
    now = datetime(2027, 1, 1, tzinfo=UTC)
    assert retry_time(now, timedelta.max) == LATEST_RETRY
    assert retry_time(now, timedelta.min) == now
    assert retry_time(now, timedelta(minutes=60)) == now + timedelta(minutes=60)


def test_the_flow_refuses_a_backoff_out_of_range_before_any_write(run_env, smtp_sink):
    """Finding 2 through the flow: 10**12 minutes is refused naming the parameter, and
    nothing is written or sent (before: four emails delivered, all recorded pending)."""
    insert(run_env, "contracts", [contract(c, RENEWAL) for c in ["a", "b", "c", "d"]])
    with pytest.raises(Exception, match="retry_backoff_minutes"):
        nightly_alerts(as_of=AS_OF, retry_backoff_minutes=10**12)
    recorded = statuses(run_env)
    assert smtp_sink.data_seen == [] and recorded == {}


class StallingServer:
    """A TCP server that speaks a little SMTP, then stops answering (the connection stays
    open until the client gives up): `answers` is how many lines it answers, the greeting
    first — 0 never greets, 1 greets and ignores EHLO, 2 answers EHLO and ignores MAIL."""

    def __init__(self, answers: int) -> None:
        self.answers = answers
        self.connections = 0
        self.lock = threading.Lock()
        server = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                with server.lock:
                    server.connections += 1
                left = server.answers
                if left > 0:
                    self.wfile.write(b"220 stall.test ESMTP\r\n")
                    left -= 1
                for line in self.rfile:  # until the client hangs up
                    if left > 0:
                        self.wfile.write(b"250 stall.test\r\n" if line[:4].upper() == b"EHLO"
                                         else b"250 OK\r\n")
                        left -= 1

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def unclaimed(url: str) -> list[str]:
    frame = db.read_frame(db.engine_for(url), "SELECT key FROM dueflow_ledger WHERE status = 'pending'"
                          " AND sending_at IS NULL", {})
    return sorted(frame["key"])


@pytest.mark.parametrize("answers", [0, 1, 2], ids=["never-greets", "stalls-after-greeting",
                                                    "stalls-at-MAIL"])
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # a matter of SMTP, not the dialect
def test_a_server_that_stops_answering_is_seen_once_a_night(run_env, smtp_sink, monkeypatch, answers):
    """Finding 5: a server that never answers cost 30 s per email, one after another. With
    1-second timeouts the night stops after DUEFLOW_SMTP_MAX_FAILURES (3) connection faults
    in a row: a few connections in all, the rest left unclaimed for the next run, the
    summary says so with the fix."""
    ids = [f"c{n:02d}" for n in range(20)]
    insert(run_env, "contracts", [contract(c, RENEWAL) for c in ids])
    server = StallingServer(answers)
    monkeypatch.setenv("DUEFLOW_MAIL_URL", f"smtp://127.0.0.1:{server.port}")
    monkeypatch.setenv("DUEFLOW_SMTP_CONNECT_TIMEOUT", "1")
    monkeypatch.setenv("DUEFLOW_SMTP_REPLY_TIMEOUT", "1")
    try:
        started = time.monotonic()
        night = nightly_alerts(as_of=AS_OF, retry_backoff_minutes=0)
        elapsed = time.monotonic() - started
    finally:
        server.close()
    print(f"{server.connections} connection(s), {elapsed:.1f} s for {len(ids)} emails")  # with -s
    # One connection per delivery in flight when the breaker opened, at most.
    assert 3 <= server.connections <= 3 + DELIVERY_WORKERS - 1, server.connections
    assert elapsed < 30, elapsed  # before: 20 emails x 30 s over 4 connections, 150 s
    assert night.sent == 0 and night.failed == server.connections
    assert night.not_sent == len(ids) - server.connections
    assert len(unclaimed(run_env)) == night.not_sent  # never handed over: the next run sends them
    [warning] = night.warnings
    assert "failed 3 times in a row" in warning and "DUEFLOW_MAIL_URL" in warning
    assert "DUEFLOW_SMTP_CONNECT_TIMEOUT" in warning

    monkeypatch.setenv("DUEFLOW_MAIL_URL", f"smtp://127.0.0.1:{smtp_sink.port}")  # it is back
    healed = nightly_alerts(as_of=AS_OF, retry_backoff_minutes=0)
    assert healed.warnings == [] and sorted(smtp_sink.keys()) == sorted(key(c) for c in ids)
    assert set(statuses(run_env).values()) == {"sent"}


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # SMTP and the pure rule, not the dialect
def test_a_refused_login_is_tried_once_a_night(run_env, monkeypatch):
    """Finding 5: a server that refuses AUTH got a new connection and a failed login per
    email (an account-lockout risk). One refused login now stops the night: one attempt,
    whatever the number of emails and parallel deliveries."""
    sink = SmtpSink(login=("alerts", "right"), plain_auth=True)
    sink.start()
    ids = [f"c{n}" for n in range(6)]
    insert(run_env, "contracts", [contract(c, RENEWAL) for c in ids])
    monkeypatch.setenv("DUEFLOW_MAIL_URL", f"smtp://alerts:wrong@127.0.0.1:{sink.port}")
    try:
        night = nightly_alerts(as_of=AS_OF, retry_backoff_minutes=0)
        assert sink.logins == 1
        assert night.failed == 1 and night.not_sent == 5 and len(unclaimed(run_env)) == 5
        [warning] = night.warnings
        assert "refused the login" in warning and "535" in warning and "no further login" in warning
        assert "wrong" not in warning

        monkeypatch.setenv("DUEFLOW_MAIL_URL", f"smtp://alerts:right@127.0.0.1:{sink.port}")
        fixed = nightly_alerts(as_of=AS_OF, retry_backoff_minutes=0)
        assert fixed.warnings == [] and sorted(sink.keys()) == sorted(key(c) for c in ids)
    finally:
        sink.stop()


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # SMTP and the pure rule, not the dialect
def test_addresses_rfc_5322_refuses_are_quarantined_not_sent(run_env, smtp_sink):
    """Finding 9: `.dot@`, `a..b@`, a 70-character local part and an encoded word as the
    local part were sent (a client shows `=?utf-8?b?QUJD?=@x.example` as ABC@x.example).
    They are quarantined with the reason; the plain address is sent."""
    bad = {"dot": ".dot@x.example", "dots": "a..b@x.example", "long": "x" * 70 + "@x.example",
           "encoded": "=?utf-8?b?QUJD?=@x.example"}
    insert(run_env, "contracts", [contract(c, RENEWAL, notify_email=e) for c, e in bad.items()]
           + [contract("fine", RENEWAL)])
    night = nightly_alerts(as_of=AS_OF)
    assert smtp_sink.keys() == [key("fine")] and night.quarantined == len(bad)
    stored = db.read_frame(db.engine_for(run_env), "SELECT source_id, reason FROM dueflow_quarantine", {})
    reasons = dict(zip(stored["source_id"], stored["reason"], strict=True))
    assert "two dots in a row" in reasons["dots"] and "with a dot" in reasons["dot"]
    assert "longer than 64" in reasons["long"] and "encoded word" in reasons["encoded"]
