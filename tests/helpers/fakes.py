"""In-memory fakes of the ledger and the mail transport, behind the interfaces the real
adapters implement (tasks/core/ports.py: DeliveryLedger — SqlLedger; MailTransport —
adapters/mail.py's transports). For the fast unit layer only: the guarantees are proven
against real databases and real SMTP servers in tests/integration and tests/e2e.

`InMemoryLedger.settle` states sql/record_outcome, sql/release_claims.* and
sql/claim_sending.* over a dict, one "transaction" per call: all of it or, when the
ledger is down, nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from types import TracebackType
from typing import Any

from dueflow.tasks.core.message import OutgoingEmail
from dueflow.tasks.core.statuses import SendResult, SendStatus


class LedgerDown(Exception):
    """The fake ledger cannot be reached (not transient: a delivery gives up at once)."""


@dataclass
class Row:
    message: OutgoingEmail | None  # None: reserved, its message never stored
    status: str = "pending"
    claim: str | None = None  # the claiming delivery's token (sending_at set)
    attempts: int = 0
    outcome: Mapping[str, Any] | None = None


@dataclass
class InMemoryLedger:
    """The ledger's delivery statements over a dict of rows, by key."""

    rows: dict[str, Row] = field(default_factory=dict)
    down: Callable[[int], bool] = lambda call: False  # per settle call (0, 1, …): is it down?
    calls: list[dict[str, Any]] = field(default_factory=list)  # every settle call's arguments

    @classmethod
    def holding(cls, emails: Iterable[OutgoingEmail], **kwargs: Any) -> InMemoryLedger:
        """Pending rows whose messages are stored, none claimed: what a night hands delivery."""
        return cls({email.key: Row(email) for email in emails}, **kwargs)

    def settle(self, token: str, as_of: date, outcomes: Sequence[Mapping[str, Any]] = (),
               release: Sequence[str] = (), claim: Sequence[str] = ()) -> list[OutgoingEmail]:
        call = len(self.calls)
        self.calls.append({"outcomes": [dict(o) for o in outcomes], "release": list(release),
                           "claim": list(claim)})
        if self.down(call):
            raise LedgerDown(f"the ledger is down (call {call})")
        for outcome in outcomes:  # sql/record_outcome: only this delivery's claim, only once
            row = self.rows.get(outcome["key"])
            if row is not None and row.status == "pending" and row.claim == token:
                row.status, row.outcome = outcome["status"], outcome
        for key in release:  # sql/release_claims
            row = self.rows.get(key)
            if row is not None and row.status == "pending" and row.claim == token:
                row.claim, row.attempts = None, row.attempts - 1
        claimed = []
        for key in claim:  # sql/claim_sending: pending, stored, unclaimed or already ours
            row = self.rows.get(key)
            if (row is not None and row.status == "pending" and row.message is not None
                    and row.claim in (None, token)):
                row.attempts += 0 if row.claim == token else 1
                row.claim = token
                claimed.append(row.message)
        return claimed

    def statuses(self, keys: Sequence[str]) -> dict[str, str]:
        return {key: self.rows[key].status for key in keys if key in self.rows}

    def transient(self, exc: BaseException) -> bool:
        return False  # LedgerDown is not: a delivery gives up at once

    def claims(self, keys: Sequence[str]) -> dict[str, str]:
        return {key: (row.status if row.status != "pending" else "claimed" if row.claim else "unclaimed")
                for key in keys if (row := self.rows.get(key)) is not None}

    def claim_sizes(self) -> list[int]:
        return [len(call["claim"]) for call in self.calls if call["claim"]]


@dataclass
class FakeTransport:
    """A mail server that answers each key as told (default: accepted), and records what
    was handed to it. `before_send` runs first, with the key (to stop a night, to raise)."""

    answers: Mapping[str, SendResult] = field(default_factory=dict)
    before_send: Callable[[str], None] = lambda key: None
    handed: list[str] = field(default_factory=list)
    entered: int = 0
    exited: int = 0

    def send(self, email: OutgoingEmail) -> SendResult:
        self.before_send(email.key)
        self.handed.append(email.key)
        return self.answers.get(email.key, SendResult(SendStatus.SENT, "250 accepted"))

    def __enter__(self) -> FakeTransport:
        self.entered += 1
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.exited += 1


def email(key: str) -> OutgoingEmail:
    """A stored message for `key`, addressed to a recipient named after it."""
    return OutgoingEmail(key, f"{key.replace('/', '.')}@client.example", f"Subject of {key}", "text",
                         "<p>html</p>", f"<{key.replace('/', '.')}@dueflow.test>")
