"""Reports a real Postfix wrote (tests/data/postfix/*.eml), read by the pure core
(docs/bounces.md, "What a report is read as"): classified by each recipient's Action first,
the expiry report (`Action: failed`, `Status: 4.4.1`) among them.

The files are what Postfix 3.7 (Debian 12) returned to the bounce address in the MTA tier's
own configuration (tests/helpers/mail_relay.py; `python -m tests.helpers.mail_relay
tests/data/postfix` writes them again), byte for byte: the unit layer reads them everywhere,
the MTA tier (tests/e2e/test_postfix_bounces.py) reads the ones Postfix writes as it runs.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from dueflow.tasks.core.bounces import (
    BounceKind,
    KeptReason,
    classify,
    match_reports,
    parse_report,
    reports_frame,
)

REPORTS = Path(__file__).parents[1] / "data" / "postfix"


def read(name: str):
    return parse_report((REPORTS / f"{name}.eml").read_bytes(), name)


@pytest.mark.parametrize(("name", "recipient", "action", "kind", "status", "words"), [
    ("unknown-user", "nobody@clients.test", "failed", BounceKind.HARD, "5.1.1", 'unknown user: "nobody@'),
    ("refused-at-rcpt", "ap@refusing.test", "failed", BounceKind.HARD, "5.1.1",
     "550 5.1.1 <ap@refusing.test>: Recipient address rejected: User unknown"),
    ("mailbox-full", "full@clients.test", "failed", BounceKind.HARD, "5.2.2", "input/output error"),
    ("delayed", "ap@dead.test", "delayed", BounceKind.SOFT, "4.4.1", "Connection refused"),
    # The queue lifetime is over: Postfix gave up, with the last temporary status. Hard.
    ("expired", "ap@dead.test", "failed", BounceKind.HARD, "4.4.1",
     "connect to 127.0.0.1[127.0.0.1]:"),
])
def test_each_postfix_report_is_read_by_its_action(name, recipient, action, kind, status, words):
    (report,) = read(name)
    assert report.problem is None
    assert (report.recipient, report.action, report.kind, report.status_code) == (recipient, action, kind,
                                                                                   status)
    assert words in report.diagnostic and "\n" not in report.diagnostic
    about = "expired" if name == "delayed" else name  # the delay notice, then the expiry: one message
    assert report.message_id == f"<{about}.0f3a9c@dueflow.test>"
    assert report.key == f"dunning/inv-{about}/REMINDED_1"


def test_the_expiry_report_says_what_postfix_said():
    (report,) = read("expired")
    raw = (REPORTS / "expired.eml").read_text()
    assert "Action: failed\nStatus: 4.4.1\nDiagnostic-Code: X-Postfix; connect to" in raw  # as written
    assert report.diagnostic.endswith(": Connection refused")


def ledger(name: str, cc: str | None = None) -> pd.DataFrame:
    return pd.DataFrame({"key": [f"dunning/inv-{name}/REMINDED_1"],
                         "message_id": [f"<{name}.0f3a9c@dueflow.test>"],
                         "status": ["sent"], "sending_at": ["2027-01-07 06:00:00+00:00"],
                         "recipient": ["nobody@clients.test" if "client" in name else "ap@clients.test"],
                         "cc_recipient": [cc], "bcc_recipient": [None]})


def test_a_report_about_the_client_and_its_cc_decides_for_each():
    entries = read("client-and-copy-failed")
    assert sorted((e.recipient, e.kind) for e in entries) == [
        ("gone.manager@dueflow.test", BounceKind.HARD), ("nobody@clients.test", BounceKind.HARD)]
    assert len({e.report_id for e in entries}) == 2  # each recorded once, apart
    matched = match_reports(reports_frame(entries),
                            ledger("client-and-copy-failed", cc="Gone.Manager@dueflow.test"))
    assert matched.bounces[["key", "recipient", "status_code"]].values.tolist() == [
        ["dunning/inv-client-and-copy-failed/REMINDED_1", "nobody@clients.test", "5.1.1"]]
    assert matched.kept["reason"].tolist() == [KeptReason.COPY]
    assert "gone.manager@dueflow.test is a copy" in matched.kept["detail"].iloc[0]


def test_only_the_copy_failed_the_row_is_not_marked():
    matched = match_reports(reports_frame(read("copy-failed")),
                            ledger("copy-failed", cc="gone.manager@dueflow.test"))
    assert matched.bounces.empty and matched.kept["reason"].tolist() == [KeptReason.COPY]


def test_a_success_report_is_kept_aside_as_such_never_applied():
    (report,) = read("delivered")
    assert (report.action, report.kind, report.problem) == ("delivered", None, None)
    matched = match_reports(reports_frame([report]), ledger("delivered"))
    assert matched.bounces.empty and matched.kept["reason"].tolist() == [KeptReason.NOT_A_FAILURE]
    assert matched.kept["detail"].iloc[0] == "Action: delivered for ap@clients.test: not a failure"


@pytest.mark.parametrize(("action", "status", "kind"), [
    ("failed", "5.1.1", BounceKind.HARD),
    ("failed", "4.4.1", BounceKind.HARD),  # Postfix: the queue lifetime expired
    ("Failed", "4.4.7", BounceKind.HARD),  # Exchange: message expired
    ("failed", None, BounceKind.HARD),
    ("delayed", "4.4.1", BounceKind.SOFT),
    ("delayed", "5.0.0", BounceKind.SOFT),  # still being retried, whatever it says
    ("delivered", "2.0.0", None), ("relayed", "2.0.0", None), ("expanded", "2.0.0", None),
    ("delivered", "5.1.1", None),  # the Action says what happened
    (None, "5.1.1", BounceKind.HARD), (None, "4.2.2", BounceKind.SOFT), (None, "2.0.0", None),
    ("bogus", "5.1.1", BounceKind.HARD),  # an Action RFC 3464 does not define: the status decides
    (None, None, None),
])
def test_the_action_decides_and_the_status_class_only_without_one(action, status, kind):
    assert classify(action, status) == kind
