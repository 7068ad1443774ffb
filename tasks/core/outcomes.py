"""What the ledger records of one email's hand-over to SMTP (sql/record_outcome): the same
row for the SQL ledger and its in-memory twin."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from dueflow.tasks.core.statuses import SendResult, SendStatus


def utc_stamp(moment: datetime) -> str:
    """One text form for timestamps dueflow compares itself (both backends, and the twin)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S+00:00")


def outcome_row(key: str, result: SendResult, retry_after: datetime | None = None) -> dict[str, Any]:
    """The outcome of one send: `sent`, `failed` (retryable after `retry_after` unless
    permanent), or still `pending` with the error."""
    return {"key": key, "status": str(result.status), "smtp_response": _storable(result.smtp_response),
            "error": _storable(result.error), "permanent": result.permanent,
            # Only a failure that a later run retries has a time for it (a sent row showed one).
            "retry_after": utc_stamp(retry_after) if retry_after and result.status is SendStatus.FAILED
            and not result.permanent else None}


def _storable(said: str | None) -> str | None:
    """What a server said, as a text column can hold it: a NUL (which no PostgreSQL text
    holds) would leave the row's outcome unrecorded, in doubt; it is shown as U+FFFD."""
    return None if said is None else said.replace("\x00", "\ufffd")
