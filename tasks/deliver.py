"""Deliver: send reserved keys in batches, each batch over one reused connection.

A Prefect task per email costs milliseconds of orchestration; a task per batch keeps
Prefect's view of the work while the per-email overhead stays small next to SMTP.

Within a batch, emails go out in small groups, and one ledger transaction per group both
records the outcomes of the group just sent and claims the next one (`db.settle`):

- a row is claimed (`sending_at`) only just before it is handed to SMTP, and the batch
  sends exactly the message the claim returns from the ledger (G2, G7);
- whatever happens — an exception, a lost database, a locked SQLite file, SIGINT,
  SIGKILL — at most the group in flight is left `pending` and claimed (it may have left);
  every row this batch never reached stays unclaimed, which means surely never handed to
  SMTP, and a later run (or this run's second pass) sends it (G3);
- a group is sized to take about GROUP_SECONDS, so a slow server leaves fewer rows in
  doubt than a fast one would;
- a batch executed twice (Dask rerunning a lost worker's task) finds its rows claimed by
  the first execution and sends none of them again (G1).
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import TypeVar

from dueflow.blocks.endpoints import MailConfig
from dueflow.tasks import progress
from dueflow.tasks.adapters.mail import BreakerOpen, ServerBreaker, open_transport
from dueflow.tasks.core.addresses import Mailbox
from dueflow.tasks.core.defaults import SMTP_MAX_CONNECTION_FAILURES
from dueflow.tasks.core.message import OutgoingEmail
from dueflow.tasks.core.outcomes import outcome_row
from dueflow.tasks.core.ports import DeliveryLedger, MailTransport
from dueflow.tasks.core.render import Addressed
from dueflow.tasks.core.statuses import MailFault, RowStatus, SendStatus

MAX_BATCH = 200  # emails per batch where batches are spread over a cluster's workers
GROUP_MAX = 20  # emails claimed, and outcomes recorded, per ledger transaction
GROUP_SECONDS = 0.5  # a group is sized to take about this long to send
LEDGER_PAUSES = (0.2, 0.5, 1.0, 2.0)  # between tries of a ledger write that met a lost connection
LEDGER_RETRY_SECONDS = 5.0  # no new try after this long

# Set on an interrupt (the CLI's SIGINT handler): no new email is handed to SMTP after it.
STOP = threading.Event()
T = TypeVar("T")


# What opens a batch's connection to the mail server: adapters/mail.py's SMTP or file
# transport; the unit layer's nights give an in-memory one.
Transports = Callable[[MailConfig, Mailbox, ServerBreaker], MailTransport]


@dataclass(frozen=True)
class Recipient:
    """What a batch is given per email: its key, and where it goes (for the report)."""

    key: str
    recipient: str


@dataclass(frozen=True)
class Delivery:
    """What one batch did with one key."""

    key: str
    recipient: str
    status: RowStatus  # sent, failed, pending, not sent, or the ledger's status if not ours
    detail: str | None
    # Not sent because the ledger could not be reached to claim it: the one case a second
    # pass of the same night may still send (a field, not a word of the detail).
    ledger_unavailable: bool = False
    retry_after: datetime | None = None  # failed, not permanently: when a later run retries it


@dataclass(frozen=True)
class DeliverySettings:
    """Everything a batch needs besides its keys (small: a batch may be pickled to Dask)."""

    mail: MailConfig
    sender: Mailbox
    ledger: DeliveryLedger  # picklable in SQL (the database's URL), shared in memory
    as_of: date
    retry_backoff: timedelta = timedelta(hours=1)
    max_failures: int = SMTP_MAX_CONNECTION_FAILURES  # connection faults in a row that stop the night
    # The night these deliveries belong to: they share one ServerBreaker (per process).
    night: str = field(default_factory=lambda: uuid.uuid4().hex)
    transports: Transports = open_transport


_BREAKERS: dict[str, ServerBreaker] = {}
_BREAKERS_LOCK = threading.Lock()


def breaker_of(settings: DeliverySettings) -> ServerBreaker:
    """The night's circuit breaker on its mail server (issue 25, finding 5)."""
    with _BREAKERS_LOCK:
        return _BREAKERS.setdefault(settings.night, ServerBreaker(settings.max_failures))


def stopped_because(settings: DeliverySettings) -> list[str]:
    """The summary's warning when the night's breaker stopped delivery: what the server
    did, what was left for the next run, and the fix."""
    breaker = breaker_of(settings)
    where = settings.mail.describe()
    if breaker.fault is MailFault.LOGIN:
        return [f"the mail server {where} refused the login ({breaker.reason.removeprefix('not sent: ')}):"
                " no further login was tried tonight (a lockout risk) and delivery stopped; what was"
                " not handed over stays unclaimed and the next run sends it. Fix: correct the user and"
                " password of DUEFLOW_MAIL_URL (percent-encoded) or of the mail block, then run"
                " `dueflow check`"]
    if breaker.fault is MailFault.CONNECTION:
        return [f"the mail server {where} failed {breaker.limit} times in a row ({breaker.reason}):"
                " delivery stopped for tonight; what was not handed over stays unclaimed and the next"
                " run sends it. Fix: check that the server runs and the host and port of"
                " DUEFLOW_MAIL_URL (`dueflow check`); DUEFLOW_SMTP_CONNECT_TIMEOUT,"
                " DUEFLOW_SMTP_REPLY_TIMEOUT and DUEFLOW_SMTP_MAX_FAILURES set how soon it stops"]
    return []


# The latest retry time recorded: far in the future, and far from datetime's own limit.
LATEST_RETRY = datetime(9000, 1, 1, tzinfo=UTC)


def retry_time(now: datetime, backoff: timedelta) -> datetime:
    """`now + backoff`, between now and LATEST_RETRY: arithmetic that cannot overflow."""
    if backoff <= timedelta(0):
        return now
    return LATEST_RETRY if backoff >= LATEST_RETRY - now else now + backoff


class LedgerLost(Exception):
    """The ledger could not be written after several tries."""


def _with_ledger(ledger: DeliveryLedger, write: Callable[[], T]) -> T:
    """Run a ledger write, trying again for a few seconds while the failure looks transient
    (a terminated connection; SQLite's busy lock, after its own wait, is tried once more).
    Every write of a delivery is safe to repeat."""
    deadline = time.monotonic() + LEDGER_RETRY_SECONDS
    for pause in (*LEDGER_PAUSES, None):
        try:
            return write()
        except Exception as exc:
            if pause is None or not ledger.transient(exc) or time.monotonic() > deadline:
                raise LedgerLost(f"{type(exc).__name__}: {str(getattr(exc, 'orig', exc)).strip()[:200]}"
                                 ) from exc
            time.sleep(pause)
    raise AssertionError("unreachable")  # pragma: no cover


_ROW_STATUS = {SendStatus.SENT: RowStatus.SENT, SendStatus.FAILED: RowStatus.FAILED,
               SendStatus.PENDING: RowStatus.PENDING}


def _group_size(seconds_per_email: float | None) -> int:
    """One email first, to learn the pace; then as many as take about GROUP_SECONDS."""
    if seconds_per_email is None:
        return 1
    return max(1, min(GROUP_MAX, int(GROUP_SECONDS / max(seconds_per_email, 1e-6))))


class _Batch:
    """One execution of one batch: its claim token, and what it did with each key."""

    def __init__(self, items: Sequence[Recipient], settings: DeliverySettings,
                 ledger: DeliveryLedger) -> None:
        self.settings = settings
        self.ledger = ledger
        self.token = uuid.uuid4().hex  # a second execution of the batch has its own
        self.recipients = {item.key: item.recipient for item in items}
        self.results: dict[str, Delivery] = {}
        self.unrecorded: list[dict] = []  # outcomes sent but not yet in the ledger
        self.breaker = breaker_of(settings)

    def stopped(self) -> bool:
        """No new email is handed over: an interrupt, or the night's breaker is open."""
        return STOP.is_set() or self.breaker.open

    def why_stopped(self) -> str:
        if self.breaker.open and not STOP.is_set():
            return f"not sent: delivery stopped tonight, the mail server failed ({self.breaker.reason})"
        return "not sent: interrupted before it was handed to SMTP"

    def note(self, key: str, status: RowStatus, detail: str | None, ledger_unavailable: bool = False,
             retry_after: datetime | None = None) -> None:
        self.results[key] = Delivery(key, self.recipients[key], status, detail, ledger_unavailable,
                                     retry_after)

    def settle(self, release: Sequence[str] = (), claim: Sequence[str] = ()) -> list[OutgoingEmail]:
        """Record the unrecorded outcomes, release and claim, in one transaction."""
        claimed = _with_ledger(self.ledger, lambda: self.ledger.settle(self.token, self.settings.as_of,
                                                          self.unrecorded, release, claim))
        self.unrecorded = []
        return claimed

    def in_doubt(self, lost: LedgerLost) -> None:
        """Outcomes that happened but could not be recorded: their rows stay pending."""
        for outcome in self.unrecorded:
            self.note(outcome["key"], RowStatus.PENDING, f"{outcome['status']}, but the ledger could"
                      f" not record it ({lost}): it stays pending")
        self.unrecorded = []

    def send(self, transport: MailTransport, email: OutgoingEmail) -> None:
        # Everything the outcome needs is computed before the hand-over: once SMTP has
        # answered, only building its ledger row is left, which cannot fail (issue 25).
        retry_after = retry_time(datetime.now(UTC), self.settings.retry_backoff)
        result = transport.send(email)
        self.unrecorded.append(outcome_row(email.key, result, retry_after))
        status = _ROW_STATUS[result.status]
        if status is RowStatus.FAILED and result.permanent:
            status = RowStatus.FAILED_PERMANENTLY
        self.note(email.key, status, result.error or result.smtp_response,
                  retry_after=retry_after if status is RowStatus.FAILED else None)
        with contextlib.suppress(Exception):  # a broken terminal must not stop a delivery
            progress.advance()  # the terminal's progress line, when the CLI shows one

    def run(self, transport: MailTransport) -> list[Delivery]:
        """Claim, send and settle group by group through `transport` (entered here)."""
        keys = list(self.recipients)
        position, pace = 0, None
        interrupted = None
        with transport:
            while position < len(keys) and not self.stopped():
                group = keys[position:position + _group_size(pace)]
                try:
                    claimed = self.settle(claim=group)
                except LedgerLost as lost:
                    self.in_doubt(lost)
                    for key in keys[position:]:
                        self.note(key, RowStatus.NOT_SENT, f"not sent: the ledger is unavailable ({lost});"
                                  " a later run sends it", ledger_unavailable=True)
                    return self.report(keys)
                position += len(group)
                started = time.monotonic()
                for index, email in enumerate(claimed):
                    if not self.stopped():
                        try:
                            self.send_or_settle(transport, email, claimed[index + 1:])
                            continue
                        except BreakerOpen:  # opened by another delivery: this one never left
                            pass
                    rest = [e.key for e in claimed[index:]]
                    interrupted = f"{self.why_stopped()}; a later run sends it"
                    try:
                        self.settle(release=rest)
                    except LedgerLost as lost:
                        self.in_doubt(lost)
                        interrupted = f"{self.why_stopped()}; the ledger could not release it ({lost})"
                    for key in rest:
                        self.note(key, RowStatus.NOT_SENT, interrupted)
                    break
                if claimed:
                    pace = (time.monotonic() - started) / len(claimed)
            try:
                self.settle()
            except LedgerLost as lost:
                self.in_doubt(lost)
        unreached = interrupted or f"{self.why_stopped()}; a later run sends it"
        for key in keys[position:]:
            self.results.setdefault(key, Delivery(key, self.recipients[key], RowStatus.NOT_SENT, unreached))
        return self.report(keys)

    def send_or_settle(self, transport: MailTransport, email: OutgoingEmail,
                       rest: Sequence[OutgoingEmail]) -> None:
        """Send one email; on an unexpected error, record what is known and re-raise."""
        try:
            self.send(transport, email)
        except BreakerOpen:
            raise  # nothing of it left: the caller releases it with the rest
        except Exception:
            # This email is in doubt (it stays claimed, pending); the rest were not sent.
            with contextlib.suppress(LedgerLost):
                self.settle(release=[e.key for e in rest])
            raise

    def report(self, keys: Sequence[str]) -> list[Delivery]:
        """One Delivery per key, in order. A key this batch did not claim was claimed by
        another delivery (an earlier execution of this batch, another run): it is reported
        by what the ledger says of it — in doubt if that delivery never recorded it."""
        others = [key for key in keys if key not in self.results]
        if others:
            try:
                statuses = self.ledger.statuses(others)
            except Exception:
                statuses = {}
            for key in others:
                status = statuses.get(key, "unknown")
                self.note(key, _OTHERS.get(status, RowStatus.PENDING),
                          f"claimed by another delivery (ledger status {status}): not sent again")
        return [self.results[key] for key in keys]


_OTHERS = {"sent": RowStatus.ALREADY_HANDLED, "adopted": RowStatus.ALREADY_HANDLED,
           "failed": RowStatus.FAILED, "pending": RowStatus.PENDING}


def deliver_one_batch(items: Sequence[Recipient], settings: DeliverySettings) -> list[Delivery]:
    """Claim, send and record one batch's keys group by group (see the module's doc): the
    body of the deliver-batch step (tasks/steps.py)."""
    batch = _Batch(items, settings, settings.ledger)
    return batch.run(settings.transports(settings.mail, settings.sender, batch.breaker))


def batches(items: Sequence[Recipient], workers: int, most: int | None = None) -> list[list[Recipient]]:
    """Split into `workers` batches (when there is enough work), or more where a batch would
    be over `most` emails. Each batch is a task run, about 20 ms of the Prefect server's CPU
    (as much as 40 emails cost a local mail server, docs/performance.md): the flow's own
    thread pool takes one batch per worker; a cluster (`most`), more and smaller ones."""
    if not items:
        return []
    size = max(1, math.ceil(len(items) / workers))
    size = min(size, most) if most else size
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def with_second_pass(items: Sequence[Recipient], settings: DeliverySettings,
                     send: Callable[[Sequence[Recipient]], list[Delivery]]) -> list[Delivery]:
    """`send` the items; then once more the ones a batch could not reach because the
    ledger was unavailable (unless the night was stopped or its breaker opened). The caller
    told the progress line how many to expect."""
    deliveries = send(items)
    retry = [Recipient(d.key, d.recipient) for d in deliveries
             if d.status == RowStatus.NOT_SENT and d.ledger_unavailable]
    if retry and not STOP.is_set() and not breaker_of(settings).open:
        again = {d.key: d for d in send(retry)}
        deliveries = [again.get(d.key, d) for d in deliveries]
    return deliveries


def after_a_crash(batch: Sequence[Recipient], settings: DeliverySettings,
                  exc: Exception) -> list[Delivery]:
    """A batch died: what the ledger says of each of its keys. A row it never claimed was
    surely not sent (a later run sends it); a claimed one stays pending, in doubt."""
    try:
        claimed = settings.ledger.claims([item.key for item in batch])
    except Exception:
        claimed = None
    out = []
    for item in batch:
        state = None if claimed is None else claimed.get(item.key)
        if state == "unclaimed":
            out.append(Delivery(item.key, item.recipient, RowStatus.NOT_SENT,
                                f"not sent: its batch failed ({exc!r}); a later run sends it"))
        elif state in (None, "claimed"):
            out.append(Delivery(item.key, item.recipient, RowStatus.PENDING,
                                f"its batch failed ({exc!r}): outcome unknown"))
        else:
            out.append(Delivery(item.key, item.recipient, RowStatus(state), f"its batch failed ({exc!r})"))
    return out


def in_statements(deliveries: Sequence[Delivery], emails: Sequence[Addressed]) -> list[Delivery]:
    """The deliveries of the emails sent, and one for each other row of a statement: its
    carrier's outcome, which the ledger recorded on each of its rows (sql/record_outcome)."""
    carried = {d.key: d for d in deliveries}
    riders = [Delivery(e.key, e.recipient, d.status, f"in the statement of {d.key}: {d.detail or d.status}")
              for e in emails if e.statement_key not in (None, e.key)
              and (d := carried.get(str(e.statement_key))) is not None]
    return [*deliveries, *riders]
