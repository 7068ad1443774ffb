"""The delivery state machine (tasks/deliver.py, `_Batch.run` and the second pass) against
in-memory fakes of the ledger and the mail transport (tests/helpers/fakes.py): claim, send,
settle, groups, a stop, a tripped breaker, a lost ledger and the second pass, a second
execution of a batch — in milliseconds. The same machine meets real databases, SMTP
servers, processes and Dask in tests/e2e (test_faults, test_failures, test_processes,
test_scale_out)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dueflow.blocks.endpoints import parse_mail_url
from dueflow.tasks import deliver
from dueflow.tasks.adapters.mail import BreakerOpen
from dueflow.tasks.core.addresses import Mailbox
from dueflow.tasks.core.statuses import MailFault, RowStatus, SendResult, SendStatus
from dueflow.tasks.deliver import Delivery, DeliverySettings, Recipient, _Batch, with_second_pass
from tests.helpers.fakes import FakeTransport, InMemoryLedger, email

AS_OF = date(2027, 3, 1)
KEYS = [f"renewal/c-{n}/2027-03-31/30d" for n in range(45)]


@pytest.fixture(autouse=True)
def no_stop() -> Iterator[None]:
    deliver.STOP.clear()
    yield
    deliver.STOP.clear()


def settings(max_failures: int = 3) -> DeliverySettings:
    """A night's delivery settings; nothing here is ever connected to (the fakes are)."""
    return DeliverySettings(parse_mail_url("smtp://127.0.0.1:1"), Mailbox("alerts@dueflow.test"),
                            InMemoryLedger(), AS_OF, max_failures=max_failures)


def items(keys: list[str] = KEYS) -> list[Recipient]:
    return [Recipient(key, email(key).recipient) for key in keys]


def run(ledger: InMemoryLedger, transport: FakeTransport, night: DeliverySettings | None = None,
        keys: list[str] = KEYS) -> list[Delivery]:
    return _Batch(items(keys), night or settings(), ledger).run(transport)


def statuses(deliveries: list[Delivery]) -> list[str]:
    return [str(d.status) for d in deliveries]


def test_each_email_is_claimed_just_before_it_is_sent_and_its_outcome_settled_with_the_next_claim():
    ledger, transport = InMemoryLedger.holding(map(email, KEYS)), FakeTransport()
    deliveries = run(ledger, transport)
    assert statuses(deliveries) == ["sent"] * 45 and transport.handed == KEYS
    assert {(r.status, r.attempts) for r in ledger.rows.values()} == {("sent", 1)}
    # One email first to learn the pace, then groups of GROUP_MAX; one transaction per group
    # records the outcomes of the group just sent and claims the next.
    assert ledger.claim_sizes() == [1, 20, 20, 4]
    for before, call in zip(ledger.calls, ledger.calls[1:], strict=False):
        assert [o["key"] for o in call["outcomes"]] == before["claim"]
    assert ledger.calls[-1]["claim"] == [] and len(ledger.calls[-1]["outcomes"]) == 4
    assert (transport.entered, transport.exited) == (1, 1)


def test_each_outcome_lands_on_its_own_row():
    answers = {KEYS[1]: SendResult(SendStatus.FAILED, error="451 try later"),
               KEYS[2]: SendResult(SendStatus.PENDING, error="connection lost after DATA"),
               KEYS[3]: SendResult(SendStatus.FAILED, error="550 no such user", permanent=True)}
    ledger = InMemoryLedger.holding(map(email, KEYS[:5]))
    deliveries = run(ledger, FakeTransport(answers), keys=KEYS[:5])
    assert statuses(deliveries) == ["sent", "failed", "pending", "failed permanently", "sent"]
    assert deliveries[1].retry_after is not None and deliveries[3].retry_after is None  # said to people
    assert [d.detail for d in deliveries[1:4]] == ["451 try later", "connection lost after DATA",
                                                   "550 no such user"]
    assert [ledger.rows[k].status for k in KEYS[:5]] == ["sent", "failed", "pending", "failed", "sent"]
    assert ledger.rows[KEYS[3]].outcome["retry_after"] is None  # permanent: not retried by time
    assert ledger.rows[KEYS[1]].outcome["retry_after"] is not None
    assert ledger.rows[KEYS[0]].outcome["retry_after"] is None  # sent: nothing to retry, no time shown


def test_a_stop_hands_over_nothing_more_and_releases_what_was_claimed():
    ledger = InMemoryLedger.holding(map(email, KEYS))

    def stop_at(key: str) -> None:
        if key == KEYS[5]:  # Ctrl-C while the sixth email is being handed over
            deliver.STOP.set()

    transport = FakeTransport(before_send=stop_at)
    deliveries = run(ledger, transport)
    assert transport.handed == KEYS[:6]
    assert statuses(deliveries) == ["sent"] * 6 + ["not sent"] * 39
    assert all("interrupted before it was handed to SMTP" in d.detail for d in deliveries[6:])
    # The rest of the claimed group is released, the groups after it never claimed: every
    # row not handed over is unclaimed, as if never tried — the next run sends it (G3).
    rest = [ledger.rows[k] for k in KEYS[6:]]
    assert {(r.status, r.claim, r.attempts) for r in rest} == {("pending", None, 0)}
    assert ledger.claim_sizes() == [1, 20]


@pytest.mark.parametrize("stopped", ["no", "interrupt", "breaker"])
def test_the_second_pass_takes_only_what_a_lost_ledger_left_and_only_while_the_night_goes_on(stopped):
    night = settings()
    first = [Delivery(KEYS[0], "a", RowStatus.SENT, "250"),
             Delivery(KEYS[1], "b", RowStatus.NOT_SENT, "not sent: the ledger is unavailable",
                      ledger_unavailable=True),
             Delivery(KEYS[2], "c", RowStatus.NOT_SENT, "not sent: interrupted"),
             Delivery(KEYS[3], "d", RowStatus.PENDING, "in doubt")]
    passes: list[list[str]] = []

    def send(todo: list[Recipient]) -> list[Delivery]:
        passes.append([r.key for r in todo])
        if len(passes) == 1:
            return first
        return [Delivery(r.key, r.recipient, RowStatus.SENT, "250") for r in todo]

    if stopped == "interrupt":
        deliver.STOP.set()
    elif stopped == "breaker":
        deliver.breaker_of(night).record(SendResult(SendStatus.FAILED, fault=MailFault.LOGIN))
    deliveries = with_second_pass(items(KEYS[:4]), night, send)
    if stopped == "no":
        assert passes == [KEYS[:4], [KEYS[1]]]
        assert statuses(deliveries) == ["sent", "sent", "not sent", "pending"]
    else:
        assert passes == [KEYS[:4]] and deliveries == first


def test_a_server_that_keeps_failing_stops_the_night_and_leaves_the_rest_unclaimed():
    night = settings(max_failures=2)
    breaker = deliver.breaker_of(night)
    down = SendResult(SendStatus.FAILED, error="connection refused", fault=MailFault.CONNECTION)

    def record(key: str) -> None:  # the real transports record each answer in the breaker
        breaker.record(down)

    transport = FakeTransport({k: down for k in KEYS}, before_send=record)
    ledger = InMemoryLedger.holding(map(email, KEYS))
    deliveries = run(ledger, transport, night)
    assert transport.handed == KEYS[:2] and breaker.open
    assert statuses(deliveries) == ["failed"] * 2 + ["not sent"] * 43
    assert "delivery stopped tonight, the mail server failed" in deliveries[2].detail
    assert {(r.status, r.claim) for k, r in ledger.rows.items() if k not in KEYS[:2]} == {("pending", None)}


def test_a_breaker_opened_by_another_delivery_releases_the_email_it_stopped():
    night = settings()

    def opened_elsewhere(key: str) -> None:
        if key == KEYS[3]:
            raise BreakerOpen("not sent: login refused")

    ledger = InMemoryLedger.holding(map(email, KEYS[:8]))
    deliveries = run(ledger, FakeTransport(before_send=opened_elsewhere), night, keys=KEYS[:8])
    assert statuses(deliveries) == ["sent"] * 3 + ["not sent"] * 5
    assert ledger.rows[KEYS[3]].claim is None and ledger.rows[KEYS[3]].attempts == 0


def test_a_ledger_lost_at_the_claim_sends_nothing_then_the_second_pass_sends_it_once():
    ledger = InMemoryLedger.holding(map(email, KEYS), down=lambda call: call == 0)
    transport = FakeTransport()
    night = settings()
    first = run(ledger, transport, night)
    assert transport.handed == [] and statuses(first) == ["not sent"] * 45
    assert all(d.ledger_unavailable for d in first)  # the field the second pass reads
    deliveries = with_second_pass(items(), night, lambda todo: run(ledger, transport, night,
                                                                   [r.key for r in todo]))
    assert statuses(deliveries) == ["sent"] * 45 and transport.handed == KEYS


def test_outcomes_the_ledger_could_not_record_stay_in_doubt_and_are_never_sent_again():
    # Calls: 0 claims 1; 1 records it and claims 20; 2 (down) would record those 20.
    ledger = InMemoryLedger.holding(map(email, KEYS), down=lambda call: call == 2)
    transport = FakeTransport()
    night = settings()
    deliveries = with_second_pass(items(), night, lambda todo: run(ledger, transport, night,
                                                                   [r.key for r in todo]))
    assert statuses(deliveries) == ["sent"] + ["pending"] * 20 + ["sent"] * 24
    assert all("but the ledger could not record it" in d.detail for d in deliveries[1:21])
    assert sorted(transport.handed) == sorted(KEYS)  # each handed over once, none twice
    assert {ledger.rows[k].status for k in KEYS[1:21]} == {"pending"}  # claimed: in doubt (G3)
    assert all(ledger.rows[k].claim for k in KEYS[1:21])


def test_an_error_while_sending_leaves_that_email_in_doubt_and_releases_the_rest_of_its_group():
    def broken(key: str) -> None:
        if key == KEYS[4]:
            raise OSError("the socket broke in an unexpected way")

    ledger = InMemoryLedger.holding(map(email, KEYS))
    with pytest.raises(OSError):
        run(ledger, FakeTransport(before_send=broken))
    assert [ledger.rows[k].status for k in KEYS[:4]] == ["sent"] * 4
    assert ledger.rows[KEYS[4]].claim is not None and ledger.rows[KEYS[4]].status == "pending"
    assert {(ledger.rows[k].claim, ledger.rows[k].attempts) for k in KEYS[5:]} == {(None, 0)}


def test_a_batch_executed_twice_sends_nothing_twice():
    """Dask reruns a lost worker's task: the second execution finds the rows settled or
    claimed by the first and sends none of them again (G1)."""
    ledger = InMemoryLedger.holding(map(email, KEYS[:6]))
    transport = FakeTransport()
    night = settings()
    first = run(ledger, transport, night, KEYS[:6])
    ledger.rows[KEYS[5]].status, ledger.rows[KEYS[5]].claim = "pending", "the first execution"
    second = run(ledger, transport, night, KEYS[:6])
    assert transport.handed == KEYS[:6]
    assert statuses(first) == ["sent"] * 6
    assert [(str(d.status), d.detail) for d in second] == [
        ("already handled", "claimed by another delivery (ledger status sent): not sent again")] * 5 + [
        ("pending", "claimed by another delivery (ledger status pending): not sent again")]


def test_a_row_whose_message_was_never_stored_is_not_claimed():
    ledger = InMemoryLedger.holding(map(email, KEYS[:3]))
    ledger.rows[KEYS[1]].message = None
    deliveries = run(ledger, FakeTransport(), keys=KEYS[:3])
    assert [(d.key, str(d.status)) for d in deliveries] == [
        (KEYS[0], "sent"), (KEYS[1], "pending"), (KEYS[2], "sent")]
    assert ledger.rows[KEYS[1]].attempts == 0 and deliveries[1].status == RowStatus.PENDING


@given(st.integers(0, 3_000), st.integers(1, 8), st.one_of(st.none(), st.integers(1, 300)))
def test_batches_cover_every_email_once_one_per_worker_or_none_over_the_most(count, workers, most):
    """A batch is a task run: the flow's thread pool takes at most one per worker, each of
    about the same size (`most` None); a cluster, none over `most` emails (deliver.batches)."""
    recipients = [Recipient(f"k{n}", f"r{n}@client.example") for n in range(count)]
    cut = deliver.batches(recipients, workers, most)
    assert [r for batch in cut for r in batch] == recipients  # each once, in order
    assert all(cut)
    share = -(-count // workers)  # a worker's share, rounded up
    assert all(len(batch) <= min(share, most or share) for batch in cut)
    if most is None:
        assert len(cut) <= workers
