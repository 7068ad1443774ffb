"""One contract, three stores (issue 37): the ledger and the sources in memory
(tasks/adapters/memory.py), on SQLite and on a real PostgreSQL (tasks/adapters/sql_store.py)
give the same answers — statement by statement, and over whole nights.

The nights run the real night (tasks/night.py) with its steps called directly and a mail
server in memory that refuses, defers or loses the emails of some addresses: what each
night sent, failed, left pending, retried, withdrew and quarantined must be the same on the
three. The statements' own tests pin what each guard refuses (a paid invoice, a paused
client, a step that is not the next, a claim that is not this delivery's).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dueflow.tasks.adapters import db
from dueflow.tasks.adapters.memory import MemorySources, memory_store
from dueflow.tasks.adapters.sql_store import sql_store
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.message import OutgoingEmail
from dueflow.tasks.core.outcomes import outcome_row
from dueflow.tasks.core.ports import Store
from dueflow.tasks.core.statuses import SendResult, SendStatus
from tests import examples
from tests.conftest import pg_schema, require_pg
from tests.helpers.factories import (
    client,
    contract,
    insert,
    invoice,
    mark_paid,
    sourced,
    with_optional_columns,
    without_keys,
)
from tests.helpers.fakes import FakeTransport
from tests.helpers.nights import run
from tests.helpers.source_rows import day, source_rows

KINDS = ["memory", "sqlite", pytest.param("postgresql", marks=pytest.mark.pg)]
AS_OF = date(2027, 3, 10)


@contextmanager
def store_of(kind: str, rows: dict[str, list[dict]]) -> Iterator[Store]:
    """A fresh store of one kind holding these source rows (the company's own kind of
    tables: no primary key, the optional columns there)."""
    if kind == "memory":
        yield memory_store(**rows)
        return
    if kind == "postgresql":
        require_pg()
        with pg_schema() as url:
            yield _filled(url, rows)
        return
    folder = Path(tempfile.mkdtemp(prefix="dueflow-contract-"))
    url = f"sqlite:///{folder / 'dueflow.db'}"
    try:
        yield _filled(url, rows)
    finally:
        db.engine_for(url).dispose()


def _filled(url: str, rows: dict[str, list[dict]]) -> Store:
    db.init_db(db.engine_for(url), sample_tables=True)
    without_keys(url, "contracts", "clients", "invoices")
    with_optional_columns(url)
    for table in ("contracts", "clients", "invoices"):
        insert(url, table, rows.get(table, []))
    return sql_store(sourced(url))


class ByRecipient(FakeTransport):
    """A mail server that answers by the recipient's address: `refused` 550 (permanent),
    `later` 451 (failed, retried), `lost` a broken connection after DATA (pending)."""

    def send(self, email: OutgoingEmail) -> SendResult:
        self.handed.append(email.key)
        if email.recipient.startswith("refused"):
            return SendResult(SendStatus.FAILED, error="550 no such user", permanent=True)
        if email.recipient.startswith("later"):
            return SendResult(SendStatus.FAILED, error="451 try later")
        if email.recipient.startswith("lost"):
            return SendResult(SendStatus.PENDING, error="connection lost after DATA")
        return SendResult(SendStatus.SENT, "250 accepted")


def outcome(summary) -> list[tuple[str, str]]:
    return sorted(zip(summary.rows["key"], summary.rows["status"].astype(str), strict=True))


def addressed(rows: dict[str, list[dict]], draw: st.DrawFn) -> dict[str, list[dict]]:
    """The rows with some recipients that the mail server refuses, defers or loses."""
    prefixes = st.sampled_from(["", "", "", "refused-", "later-", "lost-"])
    return rows | {
        "contracts": [c | {"notify_email": draw(prefixes) + c["notify_email"]} for c in rows["contracts"]],
        "clients": [c | {"email": draw(prefixes) + c["email"]} for c in rows["clients"]]}


@settings(max_examples=examples(6), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), nights=st.integers(3, 8))
@pytest.mark.pg
def test_whole_nights_end_the_same_on_every_store(data, nights):
    rows = addressed(data.draw(source_rows()), data.draw)
    env = {"DUEFLOW_STATEMENTS": data.draw(st.sampled_from(["off", "reminders", "all"]))}
    seen: dict[str, list] = {}
    for kind in ("memory", "sqlite", "postgresql"):
        transport = ByRecipient()
        with store_of(kind, rows) as store:
            seen[kind] = [outcome(run(store, day(n), transport, env=env, dunning_delays=[2, 1, 2],
                                      renewal_leads=[8, 3])) for n in range(-3, nights - 3)]
            seen[kind].append(sorted(store.ledger.open_keys().items()))
            seen[kind].append(sorted(transport.handed))
    assert seen["sqlite"] == seen["memory"]
    assert seen["postgresql"] == seen["memory"]


# ------------------------------------------------------------------ statement by statement

SENT_AT = (AS_OF - timedelta(days=8)).isoformat()
ROWS = {"contracts": [contract("c1", AS_OF + timedelta(days=30))],
        "clients": [client("cl1"), client("cl-paused", paused=True)],
        "invoices": [invoice("i1", "cl1", SENT_AT),
                     invoice("i2", "cl1", SENT_AT, status="paid", paid_at=SENT_AT),
                     invoice("i3", "cl-paused", SENT_AT)]}


def pay(store: Store, invoice_id: str) -> None:
    """The company marks an invoice paid, in its own table."""
    if isinstance(store.sources, MemorySources):
        store.sources.update("invoices", invoice_id, status="paid", paid_at=SENT_AT)
    else:
        mark_paid(store.ledger.database.url, invoice_id, SENT_AT)


def candidates(*rows: tuple[str, str, str, str, int, date | None]) -> pd.DataFrame:
    return pd.DataFrame([{"key": k, "subject_id": s, "cycle": c, "step": st_, "step_rank": r,
                          "recipient": "ap@client.example", "previous_by": p}
                         for k, s, c, st_, r, p in rows])


def dunning(invoice_id: str, step: str = "REMINDED_1", rank: int = 1,
            previous_by: date | None = None) -> tuple[str, str, str, str, int, date | None]:
    return (f"dunning/{invoice_id}/{step}", invoice_id, "", step, rank, previous_by)


def message(key: str, body: str = "text") -> dict:
    return OutgoingEmail(key, "ap@client.example", "Subject", body, "<p>html</p>", f"<{key}@x>").as_row()


@pytest.mark.parametrize("kind", KINDS)
def test_a_reservation_wins_once_and_rechecks_the_invoice_and_the_step(kind):
    with store_of(kind, ROWS) as store:
        ledger = store.ledger
        won = ledger.reserve("dunning", candidates(dunning("i1"), dunning("i2"), dunning("i3"),
                                                   dunning("i1", "REMINDED_2", 2, AS_OF)), AS_OF, "r1")
        assert won == {"dunning/i1/REMINDED_1"}  # i2 is paid, i3's client paused, R2 not next
        assert ledger.reserve("dunning", candidates(dunning("i1")), AS_OF, "r2") == set()  # G1
        # The second step waits for the first to be out (sent) and old enough.
        later = AS_OF + timedelta(days=5)
        too_soon = candidates(dunning("i1", "REMINDED_2", 2, later))
        assert ledger.reserve("dunning", too_soon, later, "r3") == set()
        ledger.store_messages([message("dunning/i1/REMINDED_1")])
        [claimed] = ledger.settle("t1", AS_OF, claim=["dunning/i1/REMINDED_1"])
        ledger.settle("t1", AS_OF, outcomes=[outcome_row(claimed.key, SendResult(SendStatus.SENT, "250"))])
        early = candidates(dunning("i1", "REMINDED_2", 2, AS_OF - timedelta(days=1)))
        assert ledger.reserve("dunning", early, later, "r4") == set()  # the first went out after that
        assert ledger.reserve("dunning", candidates(dunning("i1", "REMINDED_2", 2, AS_OF)), later, "r4") == {
            "dunning/i1/REMINDED_2"}
        renewal = candidates(("renewal/c1/2027-04-09/15d", "c1", "2027-04-09", "15d", 15, None),
                             ("renewal/c1/2027-04-09/30d", "c1", "2027-04-09", "30d", 30, None))
        assert ledger.reserve("renewal", renewal.iloc[:1], AS_OF, "r5") == {"renewal/c1/2027-04-09/15d"}
        assert ledger.reserve("renewal", renewal.iloc[1:], AS_OF, "r6") == set()  # never after a more urgent
        assert ledger.first_night() == AS_OF
        assert ledger.open_keys() == {"dunning/i1/REMINDED_2": "pending",
                                      "renewal/c1/2027-04-09/15d": "pending"}


@pytest.mark.parametrize("kind", KINDS)
def test_a_groups_outcomes_are_recorded_together_whatever_the_server_said(kind):
    """One settle records a whole group (PostgreSQL: one statement of arrays): each key its
    own outcome, a server's text kept as said — quotes, braces, commas, backslashes, a line
    break — and a NUL, which no text column holds, as U+FFFD rather than no outcome."""
    more = [invoice("i4", "cl1", SENT_AT), invoice("i5", "cl1", SENT_AT)]
    rows = ROWS | {"invoices": [*ROWS["invoices"], *more]}
    with store_of(kind, rows) as store:
        ledger = store.ledger
        keys = ["dunning/i1/REMINDED_1", "dunning/i4/REMINDED_1", "dunning/i5/REMINDED_1"]
        won = ledger.reserve("dunning", candidates(dunning("i1"), dunning("i4"), dunning("i5")), AS_OF, "r1")
        assert won == set(keys)
        ledger.store_messages([message(k) for k in keys])
        assert len(ledger.settle("t1", AS_OF, claim=keys)) == 3
        odd = '451 4.3.0 "try" {later, 1} C:\\spool\x00\nnext'
        retry = datetime(2027, 3, 10, 12, tzinfo=UTC)
        ledger.settle("t1", AS_OF, outcomes=[
            outcome_row(keys[0], SendResult(SendStatus.SENT, "250 ok")),
            outcome_row(keys[1], SendResult(SendStatus.FAILED, "451", odd), retry),
            outcome_row(keys[2], SendResult(SendStatus.PENDING, error="connection lost after DATA"))])
        assert ledger.statuses(keys) == {keys[0]: "sent", keys[1]: "failed", keys[2]: "pending"}
        [failed] = ledger.failed_rows().to_dict("records")
        assert failed["key"] == keys[1] and failed["error"] == odd.replace("\x00", "\ufffd")
        assert str(failed["retry_after"]).startswith("2027-03-10 12:00")
        assert ledger.claims([keys[2]]) == {keys[2]: "claimed"}  # in doubt: never sent again by itself


@pytest.mark.parametrize("kind", KINDS)
def test_a_delivery_claims_stored_messages_and_records_only_its_own(kind):
    with store_of(kind, ROWS) as store:
        ledger = store.ledger
        ledger.reserve("dunning", candidates(dunning("i1")), AS_OF, "r1")
        key = "dunning/i1/REMINDED_1"
        assert ledger.settle("t1", AS_OF, claim=[key]) == []  # no message stored yet: nothing to send
        ledger.store_messages([message(key, "first")])
        ledger.store_messages([message(key, "second")])  # the first message stored stays
        [claimed] = ledger.settle("t1", AS_OF, claim=[key])
        assert claimed.body_text == "first" and ledger.claims([key]) == {key: "claimed"}
        assert ledger.settle("t2", AS_OF, claim=[key]) == []  # another delivery's claim
        ledger.settle("t2", AS_OF, outcomes=[outcome_row(key, SendResult(SendStatus.SENT, "250"))])
        assert ledger.statuses([key]) == {key: "pending"}  # not t2's to record
        ledger.settle("t1", AS_OF, release=[key])
        assert ledger.claims([key]) == {key: "unclaimed"}
        unsent = ledger.unsent_rows()
        assert list(unsent["key"]) == [key] and unsent["stored"].tolist() == [True]
        assert ledger.unsent_rows([key, "dunning/i9/REMINDED_1"]).equals(unsent)  # by key: the same row
        assert ledger.unsent_rows(["dunning/i9/REMINDED_1"]).empty
        ledger.settle("t1", AS_OF, claim=[key])
        retry = datetime(2027, 3, 10, 12, tzinfo=UTC)
        deferred = outcome_row(key, SendResult(SendStatus.FAILED, error="451"), retry)
        ledger.settle("t1", AS_OF, outcomes=[deferred])
        assert ledger.statuses([key]) == {key: "failed"}
        assert ledger.unsettled_counts() == {"pending": 0, "failed": 1, "permanent": 0, "unsent": 0,
                                             "bounced": 0}
        assert ledger.retry_candidates(AS_OF, 3, retry - timedelta(minutes=1)).empty  # backing off
        due = ledger.retry_candidates(AS_OF, 3, retry)
        assert list(due["key"]) == [key] and due["permanent"].tolist() == [False]
        ledger.requeue_failed("r2", [message(key, "again")])
        [again] = ledger.settle("t3", AS_OF, claim=[key])
        assert again.body_text == "again"
        history = ledger.dunning_history(["i1"])
        assert list(zip(history["step"], history["status"], strict=True)) == [("REMINDED_1", "pending")]


def resolved(store: Store, key: str) -> tuple[str | None, bool]:
    """Who settled `key` by hand, and whether a time was recorded."""
    rows = getattr(store.ledger, "rows", None)
    if rows is not None:
        return rows[key]["resolved_by"], rows[key]["resolved_at"] is not None
    from sqlalchemy import text

    with store.ledger.engine.connect() as conn:  # type: ignore[attr-defined]
        by, at = conn.execute(text("SELECT resolved_by, resolved_at FROM dueflow_ledger WHERE key = :k"),
                              {"k": key}).one()
    return by, at is not None


@pytest.mark.parametrize("kind", KINDS)
def test_an_operator_sends_a_refused_email_once_more_and_one_requeue_wins_it(kind):
    """`dueflow resolve KEY --as retry` (sql/resolve_retry): a permanent refusal becomes a
    failed row due for its first attempt, to the same address; the next night's requeue
    takes it once (a second requeue finds it pending and does nothing), who and when stay."""
    with store_of(kind, ROWS) as store:
        ledger = store.ledger
        ledger.reserve("dunning", candidates(dunning("i1")), AS_OF, "r1")
        key = "dunning/i1/REMINDED_1"
        ledger.store_messages([message(key, "first")])
        ledger.settle("t1", AS_OF, claim=[key])
        refused = outcome_row(key, SendResult(SendStatus.FAILED, error="550 no such user", permanent=True),
                              datetime(2027, 3, 10, 12, tzinfo=UTC))
        ledger.settle("t1", AS_OF, outcomes=[refused])
        assert ledger.unsettled_counts()["permanent"] == 1
        [row] = ledger.failed_rows().to_dict("records")
        assert (row["key"], row["permanent"], row["attempts"], row["retry_after"]) == (key, True, 1, None)
        assert not ledger.resolve_retry("dunning/i9/REMINDED_1", "no such key", "alice")  # type: ignore[attr-defined]
        assert ledger.resolve_retry(key, "resolved by alice as retry: mailbox fixed", "alice")  # type: ignore[attr-defined]
        assert resolved(store, key) == ("alice", True)
        [row] = ledger.failed_rows().to_dict("records")
        assert (row["permanent"], row["attempts"], row["retry_after"]) == (False, 0, None)
        due = ledger.retry_candidates(AS_OF, 3, datetime(2027, 3, 11, tzinfo=UTC))
        assert list(due["key"]) == [key] and due["permanent"].tolist() == [False]
        ledger.requeue_failed("r2", [message(key, "again")])
        ledger.requeue_failed("r3", [message(key, "third")])  # another run: nothing left to requeue
        [again] = ledger.settle("t3", AS_OF, claim=[key])
        assert again.body_text == "again" and again.recipient == "ap@client.example"
        assert ledger.settle("t4", AS_OF, claim=[key]) == []  # claimed once
        assert not ledger.resolve_retry(key, "again?", "bob")  # type: ignore[attr-defined]  # pending now
        assert resolved(store, key) == ("alice", True)  # kept after the requeue cleared the error


STATEMENT_ROWS = {"clients": [client("cl1")],
                  "invoices": [invoice(i, "cl1", SENT_AT) for i in ("i1", "i2", "i3")]}


def stored_statement(ledger, invoices: tuple[str, ...], members: tuple[str, ...],
                     message_id: str = "<s@x>") -> None:
    """Reserve the first reminders of `invoices` and store one statement on the keys of
    `members` (carried by the first), an email of its own on the others."""
    keys = [f"dunning/{i}/REMINDED_1" for i in invoices]
    ledger.reserve("dunning", candidates(*(dunning(i) for i in invoices)), AS_OF, "r1")
    carrier = f"dunning/{members[0]}/REMINDED_1"
    ledger.store_messages([message(k, "statement") | {"statement_key": carrier, "message_id": message_id}
                           if k.split("/")[1] in members else message(k) for k in keys])


@pytest.mark.parametrize("kind", KINDS)
def test_a_statement_is_claimed_recorded_withdrawn_and_settled_as_one(kind):
    k1, k2, k3 = (f"dunning/{i}/REMINDED_1" for i in ("i1", "i2", "i3"))
    with store_of(kind, STATEMENT_ROWS) as store:
        ledger = store.ledger
        stored_statement(ledger, ("i1", "i2", "i3"), ("i1", "i2", "i3"))
        unsent = ledger.unsent_rows()  # the others go with their carrier, never alone
        assert list(unsent["key"]) == [k1, k2, k3] and set(unsent["statement_key"]) == {k1}
        assert ledger.settle("t0", AS_OF, claim=[k2, k3]) == []  # asked for alone: never claimed
        assert ledger.claims([k1, k2, k3]) == dict.fromkeys([k1, k2, k3], "unclaimed")
        [carrier] = ledger.settle("t0", AS_OF, claim=[k3, k1, k2])  # with its carrier: one email
        ledger.settle("t0", AS_OF, release=[k1])
        [carrier] = ledger.settle("t1", AS_OF, claim=[k1])
        assert [r.key for r in carrier.riders] == [k2, k3] and carrier.statement_key == k1
        assert ledger.claims([k1, k2, k3]) == dict.fromkeys([k1, k2, k3], "claimed")
        ledger.settle("t1", AS_OF, release=[k1])  # told to stop: all of it back, unclaimed
        assert ledger.claims([k1, k2, k3]) == dict.fromkeys([k1, k2, k3], "unclaimed")
        pay(store, "i1")  # the carrier's invoice is paid before the statement went
        assert ledger.withdraw_unsent(AS_OF) == [k1]
        unsent = ledger.unsent_rows()  # the rest lost the stored statement: rendered again
        assert list(unsent["key"]) == [k2, k3] and unsent["stored"].tolist() == [False, False]
        ledger.store_messages([message(k, "again") | {"statement_key": k2, "message_id": "<s2@x>"}
                               for k in (k2, k3)])
        [carrier] = ledger.settle("t2", AS_OF, claim=[k2])
        ledger.settle("t2", AS_OF, outcomes=[outcome_row(k2, SendResult(SendStatus.PENDING, error="lost"))])
        assert ledger.statuses([k2, k3]) == dict.fromkeys([k2, k3], "pending")  # in doubt, both
        # A person's word on one row is the word on each row of its statement.
        if isinstance(store.sources, MemorySources):
            assert ledger.resolve(k3, "sent", "the client has it")  # type: ignore[attr-defined]
        else:
            assert db.resolve_pending(ledger.engine, k3, "sent", "the client has it")  # type: ignore[attr-defined]
        assert ledger.statuses([k1, k2, k3]) == {k1: "failed", k2: "sent", k3: "sent"}


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgresql", marks=pytest.mark.pg)])
def test_a_bounce_of_a_statement_marks_each_of_its_rows(kind):
    from dueflow.tasks.core.bounces import BOUNCE_COLUMNS

    k1, k2, k3 = (f"dunning/{i}/REMINDED_1" for i in ("i1", "i2", "i3"))
    with store_of(kind, STATEMENT_ROWS) as store:
        ledger = store.ledger
        stored_statement(ledger, ("i1", "i2", "i3"), ("i1", "i2"))
        ledger.settle("t1", AS_OF, claim=[k1, k3])
        sent = SendResult(SendStatus.SENT, "250")
        ledger.settle("t1", AS_OF, outcomes=[outcome_row(k1, sent), outcome_row(k3, sent)])
        engine = ledger.engine  # type: ignore[attr-defined]
        [candidate] = db.bounce_candidates(engine, ["<s@x>"])["key"].tolist()
        assert candidate == k1  # the carrier speaks for its statement
        report = pd.DataFrame([{"report_id": "r", "key": k1, "message_id": "<s@x>", "kind": "hard",
                                "status_code": "5.1.1", "diagnostic": "unknown user",
                                "recipient": "ap@client.example", "seen_at": datetime.now(UTC),
                                "source": "test"}], columns=list(BOUNCE_COLUMNS))
        assert sorted(db.record_bounces(engine, report, pd.DataFrame())) == [k1, k2]
        assert ledger.statuses([k1, k2, k3]) == {k1: "bounced", k2: "bounced", k3: "sent"}
        assert db.resolve_bounced(engine, k2, "failed", "address fixed")
        assert ledger.statuses([k1, k2]) == dict.fromkeys([k1, k2], "failed")


@pytest.mark.parametrize("kind", KINDS)
def test_a_refused_statement_sent_once_more_goes_again_with_every_row(kind):
    k1, k2 = "dunning/i1/REMINDED_1", "dunning/i2/REMINDED_1"
    with store_of(kind, STATEMENT_ROWS) as store:
        ledger = store.ledger
        stored_statement(ledger, ("i1", "i2"), ("i1", "i2"))
        ledger.settle("t1", AS_OF, claim=[k1])
        refused = SendResult(SendStatus.FAILED, error="550 no such user", permanent=True)
        ledger.settle("t1", AS_OF, outcomes=[outcome_row(k1, refused)])
        assert ledger.resolve_retry(k2, "mailbox fixed", "alice")  # type: ignore[attr-defined]
        due = ledger.retry_candidates(AS_OF, 3, datetime(2027, 3, 11, tzinfo=UTC))
        assert list(due["key"]) == [k1, k2] and due["permanent"].tolist() == [False, False]
        assert resolved(store, k1) == ("alice", True)


@pytest.mark.parametrize("kind", KINDS)
def test_a_retried_statement_is_stored_only_when_the_run_requeued_every_row_of_it(kind):
    k1, k2 = "dunning/i1/REMINDED_1", "dunning/i2/REMINDED_1"
    with store_of(kind, STATEMENT_ROWS) as store:
        ledger = store.ledger
        stored_statement(ledger, ("i1", "i2"), ("i1", "i2"))
        ledger.settle("t1", AS_OF, claim=[k1])
        ledger.settle("t1", AS_OF, outcomes=[outcome_row(k1, SendResult(SendStatus.FAILED, error="451"))])
        assert ledger.statuses([k1, k2]) == dict.fromkeys([k1, k2], "failed")
        ledger.requeue_failed("other", [message(k2, "alone")])  # another run retried k2 first
        ledger.requeue_failed("r2", [message(k, "again") | {"statement_key": k1, "message_id": "<s2@x>"}
                                     for k in (k1, k2)])
        unsent = ledger.unsent_rows()  # k1's statement lost k2: not stored, rendered again
        assert list(unsent["key"]) == [k1, k2] and unsent["stored"].tolist() == [False, True]


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgresql", marks=pytest.mark.pg)])
def test_a_statement_whose_carrier_is_rekeyed_still_goes_as_one(kind):
    k2 = "dunning/i2/REMINDED_1"
    with store_of(kind, STATEMENT_ROWS) as store:
        ledger = store.ledger
        stored_statement(ledger, ("i1", "i2"), ("i1", "i2"))
        engine = ledger.engine  # type: ignore[attr-defined]
        pairs = pd.DataFrame({"job": ["dunning"], "old_id": ["i1"], "new_id": ["I-1"]})
        assert db.record_id_changes(engine, pairs, "same", "tester") == {("dunning", "i1"): 1}
        moved = "dunning/I-1/REMINDED_1"
        assert set(ledger.unsent_rows()["statement_key"]) == {moved}  # named by its carrier's new key
        [carrier] = ledger.settle("t1", AS_OF, claim=[moved])
        assert carrier.statement_key == moved and [r.key for r in carrier.riders] == [k2]


@pytest.mark.parametrize("kind", KINDS)
def test_rows_no_longer_due_are_withdrawn_and_unrendered_ones_fail(kind):
    with store_of(kind, ROWS) as store:
        ledger = store.ledger
        ledger.reserve("dunning", candidates(dunning("i1")), AS_OF, "r1")
        alert = ("renewal/c1/2027-04-09/30d", "c1", "2027-04-09", "30d", 30, None)
        ledger.reserve("renewal", candidates(alert), AS_OF, "r1")
        ledger.record_unrendered([("renewal/c1/2027-04-09/30d", "could not render: no template")])
        assert ledger.statuses(["renewal/c1/2027-04-09/30d"]) == {"renewal/c1/2027-04-09/30d": "failed"}
        assert ledger.withdraw_unsent(AS_OF) == []  # i1 is still open: it stays owed
        pay(store, "i1")
        assert ledger.withdraw_unsent(AS_OF) == ["dunning/i1/REMINDED_1"]
        rows = ledger.unsettled_rows()
        assert sorted(rows["key"]) == ["dunning/i1/REMINDED_1", "renewal/c1/2027-04-09/30d"]
        assert ledger.retry_candidates(AS_OF, 3, datetime.now(UTC))["key"].tolist() == [
            "renewal/c1/2027-04-09/30d"]  # the paid invoice is never retried


@pytest.mark.parametrize("kind", KINDS)
def test_a_nights_figures_are_kept_and_each_nights_runs_read_back_together_newest_first(kind):
    from decimal import Decimal

    from dueflow.tasks.core.guard import Approval, Choice, Figures

    with store_of(kind, ROWS) as store:
        ledger = store.ledger
        assert store.sources.open_invoices() == 2  # i1 and i3 (its client paused): sent, not paid
        assert ledger.recent_nights(AS_OF, 14) == []
        for days, emails in ((3, 4), (2, 5), (1, 6)):
            ledger.record_night(AS_OF - timedelta(days=days), "run-a", Figures({"dunning": emails}))
        ledger.record_night(AS_OF - timedelta(days=1), "run-b", Figures(
            {"dunning": 7}, {"dunning": {"EUR": Decimal("12.50")}}, 9),
            approval=Approval(Choice.UP_TO, "Ana", 7))
        ledger.record_night(AS_OF - timedelta(days=1), "run-b", Figures({"dunning": 8}))  # a rerun replaces
        ledger.record_night(AS_OF, "tonight", Figures({"dunning": 99}))  # not before tonight
        recent = ledger.recent_nights(AS_OF, 2)
        assert [night.emails["dunning"] for night in recent] == [6 + 8, 5]  # run-a and run-b's rerun
