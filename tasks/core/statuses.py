"""Statuses: of a ledger row, of one send, of what a run did with one row, and the source
statuses of the public contract (docs/design.md). Every status change has one meaning here."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class LedgerStatus(StrEnum):
    """A ledger row's status (G3). `pending` with no claim (`sending_at` NULL) was surely
    never handed to SMTP and is sent by a later run; claimed, it may have left."""

    PENDING = "pending"
    SENT = "sent"
    FAILED = "failed"  # known not sent; retried under the bounded policy unless permanent
    ADOPTED = "adopted"  # recorded as handled when dueflow took over existing data; never sent
    # Accepted by the relay, then reported undeliverable (a hard bounce matched to the row by
    # its Message-ID and key): not delivered. Only bounce intake sets it (sql/bounce_rows).
    BOUNCED = "bounced"


# A dunning step in one of these lets the next step become due (the hold rule).
STEP_DONE = (LedgerStatus.SENT, LedgerStatus.ADOPTED)
# Rows a delivery status notification may be about: handed to SMTP and accepted (or maybe
# accepted: pending with a claim), or already bounced by another report.
BOUNCEABLE = (LedgerStatus.SENT, LedgerStatus.PENDING, LedgerStatus.BOUNCED)


class SendStatus(StrEnum):
    """The outcome of one attempt to hand an email to the mail server (G4)."""

    SENT = "sent"  # accepted: 250 after the content, or the file was written
    FAILED = "failed"  # refused or broken before the server could have the content
    PENDING = "pending"  # the content may have left: outcome unknown, never resent


class MailFault(StrEnum):
    """Why an attempt failed, when the cause is the mail server rather than the email: what
    the night's circuit breaker counts (tasks/adapters/mail.py, ServerBreaker)."""

    CONNECTION = "connection"  # no connection, no answer in time, or it broke
    LOGIN = "login"  # the server refused the user and password


@dataclass(frozen=True)
class SendResult:
    status: SendStatus
    smtp_response: str | None = None
    error: str | None = None
    permanent: bool = False  # a 5xx refusal: retrying will not help
    fault: MailFault | None = None  # the server's fault, not this email's


class RowStatus(StrEnum):
    """What one run did with one key or one source row (the summary's `rows`)."""

    SENT = "sent"
    FAILED = "failed"  # refused before it left: a later run retries it (retry_after)
    FAILED_PERMANENTLY = "failed permanently"  # refused for good (5xx): not retried to the same address
    PENDING = "pending"  # handed to SMTP, outcome unknown: an operator settles it
    NOT_SENT = "not sent"  # surely never handed to SMTP (stopped, database lost): sent later
    QUARANTINED = "quarantined"
    ALREADY_HANDLED = "already handled"  # sent or adopted by an earlier run
    FAILED_EARLIER = "failed earlier"  # due, failed in an earlier run, not retried tonight
    PENDING_EARLIER = "pending earlier"  # due, outcome of an earlier attempt still unknown
    NO_LONGER_DUE = "no longer due"  # the source row changed between extraction and reserve
    WOULD_SEND = "would send"  # dry run
    DEFERRED = "deferred"  # held back by the send cap; a later run sends it
    SKIPPED = "skipped"  # due, not chased by a setting (below DUEFLOW_DUNNING_MINIMUM)
    ADOPTED = "adopted"
    BOUNCED = "bounced"  # accepted earlier, then reported undeliverable: not delivered


# What an operator must look at first, in order.
ATTENTION_ORDER = (RowStatus.PENDING, RowStatus.BOUNCED, RowStatus.FAILED_PERMANENTLY, RowStatus.FAILED,
                   RowStatus.NOT_SENT,
                   RowStatus.QUARANTINED,
                   RowStatus.PENDING_EARLIER, RowStatus.FAILED_EARLIER, RowStatus.NO_LONGER_DUE,
                   RowStatus.DEFERRED, RowStatus.SKIPPED, RowStatus.SENT, RowStatus.WOULD_SEND,
                   RowStatus.ADOPTED,
                   RowStatus.ALREADY_HANDLED)
NEEDS_ATTENTION = (RowStatus.PENDING, RowStatus.BOUNCED, RowStatus.FAILED_PERMANENTLY, RowStatus.FAILED,
                   RowStatus.NOT_SENT, RowStatus.QUARANTINED)
FAILED_ROWS = (RowStatus.FAILED, RowStatus.FAILED_PERMANENTLY)  # both count as failed

# Source statuses (public contract).
CONTRACT_ACTIVE = "active"
CONTRACT_CANCELLED = "cancelled"
CONTRACT_STATUSES = (CONTRACT_ACTIVE, CONTRACT_CANCELLED)
INVOICE_DUNNED = "sent"  # the only invoice status that takes part in dunning
INVOICE_ENDED = ("draft", "paid", "void")  # statuses that end (or precede) dunning
INVOICE_STATUSES = ("draft", INVOICE_DUNNED, "paid", "void")
