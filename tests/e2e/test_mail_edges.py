"""Issue 25 at the mail server's edge, with real aiosmtpd servers and raw sockets: what
SMTP said is what the ledger records (finding 2), and a dead or hostile server is seen
once a night, not once per email (finding 5)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from dueflow.flows.nightly_alerts import nightly_alerts
from dueflow.tasks.adapters import db
from dueflow.tasks.deliver import LATEST_RETRY, Recipient, deliver_batch, retry_time
from tests.e2e.test_failures import AS_OF, RENEWAL, delivery_settings, key, reserved, statuses
from tests.factories import contract, insert


def test_a_huge_backoff_never_turns_a_delivered_email_into_pending(db_url, smtp_sink):
    """Finding 2: retry_backoff of 10**12 minutes overflowed `now + backoff` after the send,
    and every delivered email stayed `pending`. The retry time is now computed before the
    hand-over, and saturates."""
    ids = ["a", "b", "c", "later"]
    insert(db_url, "contracts", [contract(c, RENEWAL) for c in ids])
    emails = reserved(db_url, ids)
    smtp_sink.faults["later@example.com"] = "rcpt_451"  # a failure: it gets a retry time
    settings = delivery_settings(db_url, smtp_sink.port)
    huge = type(settings)(settings.mail, settings.sender, settings.database, settings.as_of,
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
