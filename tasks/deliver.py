"""Deliver: send the winners in batches, each batch over one reused connection.

A Prefect task per email costs milliseconds of orchestration; a task per batch
keeps Prefect's view of the work (one task run per batch, retries visible) while
the per-email overhead stays small next to SMTP itself. Outcomes are written to
their ledger rows in small groups (every FLUSH_EVERY emails or FLUSH_SECONDS, and
when the batch ends or fails): one commit per email would cost as much as the SMTP
conversation. A process killed between a send and its flush leaves those rows
`pending` — visible and never resent, exactly as G3 asks. Each batch claims its rows
(`sending_at`) before its first send, so a batch executed twice sends nothing twice.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from prefect import task, unmapped
from prefect.cache_policies import NO_CACHE

from tasks import db
from tasks.compose import OutgoingEmail
from tasks.mail import MailConfig, SendResult, open_transport

MAX_BATCH = 200
FLUSH_EVERY = 20  # outcomes written per ledger transaction
FLUSH_SECONDS = 0.5  # …or at least this often while sending slowly


@dataclass(frozen=True)
class Delivery:
    key: str
    recipient: str
    status: str
    detail: str | None


@task(name="deliver-batch", cache_policy=NO_CACHE)
def deliver_batch(
    emails: Sequence[OutgoingEmail], mail: MailConfig, mail_from: str, database_url: str,
    retry_backoff: timedelta = timedelta(hours=1),
) -> list[Delivery]:
    """Claim the batch's rows, send them over one connection, and write each outcome to
    its ledger row (in groups of FLUSH_EVERY, and at the end). A `failed` row may be
    retried by a run after `retry_backoff`, unless permanent (5xx)."""
    engine = db.engine_for(database_url)
    # Claim before sending: if this batch runs again (a Dask worker lost, a task re-run),
    # the second execution finds its rows claimed and sends none of them.
    claimed = db.claim_sending(engine, [email.key for email in emails])
    taken = [email for email in emails if email.key not in claimed]
    status = db.ledger_status(engine, [email.key for email in taken])
    deliveries = [Delivery(e.key, e.recipient, status.get(e.key, "pending"),
                           "already claimed by an earlier delivery: not sent again")
                  for e in taken]
    emails = [email for email in emails if email.key in claimed]
    unwritten: list[dict] = []
    last_flush = time.monotonic()
    try:
        with open_transport(mail, mail_from) as transport:
            for email in emails:
                try:
                    result = transport.send(email)
                except Exception as exc:  # a bug must not take the rest of the batch with it
                    result = SendResult("pending", error=f"unexpected error while sending: {exc!r}")
                unwritten.append(db.outcome_row(
                    email.key, result.status, result.smtp_response, result.error,
                    permanent=result.permanent, retry_after=datetime.now(UTC) + retry_backoff,
                ))
                deliveries.append(Delivery(email.key, email.recipient, result.status,
                                           result.error or result.smtp_response))
                if len(unwritten) >= FLUSH_EVERY or time.monotonic() - last_flush > FLUSH_SECONDS:
                    db.record_outcomes(engine, unwritten)
                    unwritten, last_flush = [], time.monotonic()
    finally:
        db.record_outcomes(engine, unwritten)
    return deliveries


def batches(emails: Sequence[OutgoingEmail], workers: int) -> list[list[OutgoingEmail]]:
    """Split into at least `workers` batches (when there is enough work), none over MAX_BATCH."""
    if not emails:
        return []
    size = max(1, min(MAX_BATCH, math.ceil(len(emails) / workers)))
    return [list(emails[i : i + size]) for i in range(0, len(emails), size)]


def deliver(
    emails: Sequence[OutgoingEmail], mail: MailConfig, mail_from: str, database_url: str,
    workers: int, retry_backoff: timedelta = timedelta(hours=1),
) -> list[Delivery]:
    """Map `deliver_batch` over the batches on the flow's bounded task runner."""
    groups = batches(emails, workers)
    futures = deliver_batch.map(groups, unmapped(mail), unmapped(mail_from), unmapped(database_url),
                                unmapped(retry_backoff))
    deliveries: list[Delivery] = []
    for batch, future in zip(groups, futures, strict=True):
        try:
            deliveries.extend(future.result())
        except Exception as exc:
            # The batch died (for instance the ledger became unreachable): its rows
            # stay `pending` in the ledger, which is exactly what we report.
            deliveries.extend(
                Delivery(e.key, e.recipient, "pending", f"batch failed: {exc!r}") for e in batch
            )
    return deliveries
