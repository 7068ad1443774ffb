"""In-memory fakes for the unit layer, behind the interfaces the real adapters implement
(tasks/core/ports.py): a ledger for delivery that can be down — the in-memory twin
(tasks/adapters/memory.py) behind a recorder of each call — and a mail transport that
answers as told. The guarantees are proven against real databases and real SMTP servers
in tests/integration and tests/e2e, and the twin against both databases by the store
contract (tests/integration/test_store_contract.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from types import TracebackType
from typing import Any

from dueflow.tasks.adapters.memory import MemoryLedger, ledger_row, memory_store
from dueflow.tasks.core.message import OutgoingEmail
from dueflow.tasks.core.statuses import SendResult, SendStatus


class LedgerDown(Exception):
    """The fake ledger cannot be reached (not transient: a delivery gives up at once)."""


class Row:
    """One ledger row of the twin as the delivery tests read and set it."""

    def __init__(self, row: dict[str, Any]) -> None:
        self._row = row

    status = property(lambda self: self._row["status"], lambda self, v: self._row.update(status=v))
    attempts = property(lambda self: self._row["attempts"])
    outcome = property(lambda self: {"retry_after": self._row["retry_after"]})

    @property
    def claim(self) -> str | None:  # the claiming delivery's token (sending_at set)
        return self._row["claim_token"]

    @claim.setter
    def claim(self, token: str | None) -> None:
        self._row.update(claim_token=token, sending_at=token and "2027-01-01 00:00:00+00:00")

    @property
    def message(self) -> str | None:
        return self._row["body_text"]

    @message.setter
    def message(self, unstored: None) -> None:  # the run died before storing it
        self._row.update(body_text=unstored, subject=unstored, body_html=unstored)


@dataclass
class InMemoryLedger:
    """The twin's ledger as a delivery uses it, each `settle` call recorded and, when `down`
    says so for that call (0, 1, …), refused whole: the ledger cannot be reached."""

    twin: MemoryLedger = field(default_factory=lambda: memory_store().ledger)  # type: ignore[return-value]
    down: Callable[[int], bool] = lambda call: False
    calls: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def holding(cls, emails: Iterable[OutgoingEmail], **kwargs: Any) -> InMemoryLedger:
        """Pending rows whose messages are stored, none claimed: what a night hands delivery."""
        ledger, emails = cls(**kwargs), list(emails)
        for message in emails:
            ledger.twin.rows[message.key] = ledger_row(
                {"key": message.key, "subject_id": message.key, "subject_form": message.key, "cycle": "",
                 "step": "REMINDED_1", "step_rank": 1, "recipient": message.recipient},
                "dunning", date(2027, 1, 1), None, "pending", "2027-01-01 00:00:00+00:00")
        ledger.twin.store_messages([message.as_row() for message in emails])
        return ledger

    @property
    def rows(self) -> dict[str, Row]:
        return {key: Row(row) for key, row in self.twin.rows.items()}

    def settle(self, token: str, as_of: date, outcomes: Sequence[Mapping[str, Any]] = (),
               release: Sequence[str] = (), claim: Sequence[str] = ()) -> list[OutgoingEmail]:
        call = len(self.calls)
        self.calls.append({"outcomes": [dict(o) for o in outcomes], "release": list(release),
                           "claim": list(claim)})
        if self.down(call):
            raise LedgerDown(f"the ledger is down (call {call})")
        return self.twin.settle(token, as_of, outcomes, release, claim)

    def statuses(self, keys: Sequence[str]) -> dict[str, str]:
        return self.twin.statuses(keys)

    def transient(self, exc: BaseException) -> bool:
        return False  # LedgerDown is not: a delivery gives up at once

    def claims(self, keys: Sequence[str]) -> dict[str, str]:
        return self.twin.claims(keys)

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
