"""What the night asks of the world, as interfaces: the company's data (`Sources`), dueflow's
own record of every email (`Ledger`) and the mail server (`MailTransport`).

The night (tasks/night.py) is written against these alone. Two implementations obey each
contract: SQL on SQLite or PostgreSQL (tasks/adapters/sql_store.py: every statement is in
sql/, the guarantees in their WHERE clauses), and in memory (tasks/adapters/memory.py),
which states the same statements over Python dicts so that whole nights — racing runs,
crashes between steps, retries, holds — run in the unit layer in milliseconds. One contract
suite (tests/integration/test_store_contract.py) holds all three to the same answers.

Frames are the sources' projections as the SQL reads them: ids as the text of their value,
dates and timestamps as text or dates, flags and statuses as text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from types import TracebackType
from typing import Any, Protocol

from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.guard import Approval, Figures, Tripped
from dueflow.tasks.core.message import OutgoingEmail
from dueflow.tasks.core.statuses import SendResult

Row = Mapping[str, Any]


class Sources(Protocol):
    """The company's contracts, clients and invoices, read only."""

    def renewal_candidates(self, as_of: date, window_start: date, window_end: date,
                           leads: Sequence[int]) -> pd.DataFrame:
        """Contracts that may be due on `as_of` (renewal date in the window) and every row
        sharing an id with one; `settled_lead` set where the ledger already settles the
        row's lead (sql/extract_contracts; the in-memory twin settles none)."""
        ...

    def dunning_candidates(self, bounds: Mapping[str, str], timezone: str) -> pd.DataFrame:
        """Open invoices whose next step may be due (sql/dunning_candidates' bounds; dates
        of timestamps in the business `timezone`) and every row sharing an id with one, with
        what was paid and credited on each up to bounds["as_of"]. A superset is allowed:
        the rule decides."""
        ...

    def by_id(self, relation: str, ids: Sequence[str], as_of: date | None = None) -> pd.DataFrame:
        """The rows of `relation` (contracts, invoices, clients) with these ids; invoices with
        what was paid and credited on them up to `as_of` (None: every payment recorded)."""
        ...

    def every(self, relation: str, as_of: date | None = None) -> pd.DataFrame:
        """Every row the forecast reads: open invoices (and the rows sharing their ids) with
        their payments up to `as_of` (None: every one recorded), every client."""
        ...

    def client_payment_history(self, client_ids: Sequence[str]) -> pd.DataFrame:
        """The settled and open invoices of these clients (sql/client_payment_history_of)."""
        ...

    def ids(self) -> pd.DataFrame:
        """Every contract and invoice id (job, id)."""
        ...

    def open_invoices(self) -> int:
        """How many invoices are open: sent and not paid (sql/open_invoices_count)."""
        ...

    def refused(self, exc: BaseException, doing: str) -> str | None:
        """When `exc` means the sources refused a read (a permission, a timeout, a value a
        mapping's expression cannot read): the one line an operator is told, with the fix.
        None for anything else (a lost connection is tried again; a bug is a bug)."""
        ...


class DeliveryLedger(Protocol):
    """The part of the ledger a delivery batch uses (tasks/deliver.py)."""

    def settle(self, token: str, as_of: date, outcomes: Sequence[Row] = (),
               release: Sequence[str] = (), claim: Sequence[str] = ()) -> list[OutgoingEmail]:
        """One transaction: record the outcomes of this delivery's claims, release claims it
        will not send, claim the next group; the stored messages of the keys claimed, in
        the order asked (sql/record_outcome, release_claims, claim_sending)."""
        ...

    def statuses(self, keys: Sequence[str]) -> dict[str, str]:
        """The status of each of these keys the ledger holds."""
        ...

    def claims(self, keys: Sequence[str]) -> dict[str, str]:
        """Per key: 'unclaimed' (pending, never handed to SMTP), 'claimed' (pending, may have
        left) or its settled status."""
        ...

    def transient(self, exc: BaseException) -> bool:
        """Whether an error of this ledger may pass if the write is tried again."""
        ...


class Ledger(DeliveryLedger, Protocol):
    """dueflow's own tables: one row per email, its key the only guard against a duplicate
    (G1), written before anything is sent (G2), never left unsaid (G3)."""

    # What a night decides from.
    def renewal_history(self, contracts: pd.DataFrame, since: date, timezone: str) -> pd.DataFrame:
        """subject_id, cycle, handled_rank: the most urgent lead reserved per (contract,
        cycle) of the contracts not settled, for cycles from `since`."""
        ...

    def dunning_history(self, invoice_ids: Sequence[str]) -> pd.DataFrame:
        """Every dunning step of these invoices: subject_id, step, step_rank, as_of,
        attempt_as_of, status, bounce (a bounced step's reason)."""
        ...

    def first_night(self) -> date | None:
        ...

    def open_keys(self) -> dict[str, str]:
        """Every pending or failed key, with its status."""
        ...

    def failed_rows(self) -> pd.DataFrame:
        """Every failed row: key, permanent, attempts, retry_after, error (sql/failed_rows)."""
        ...

    def ids_of_forms(self, job: str, forms: Sequence[str]) -> pd.DataFrame:
        """The subjects of `job` (subject_id, subject_form) with one of these forms."""
        ...

    def kept_apart(self) -> pd.DataFrame:
        """Pairs of ids an operator said are different records: job, old_id, new_id."""
        ...

    def recent_nights(self, before: date, nights: int) -> list[Figures]:
        """The figures of the last `nights` nights before `before` (all the runs of a night
        together), newest first: what a night compares itself with (tasks/core/guard.py)."""
        ...

    def record_night(self, as_of: date, flow_run_id: str | None, figures: Figures,
                     tripped: Sequence[Tripped] = (), approval: Approval | None = None) -> None:
        """One night's figures, and who approved it when it looked wrong."""
        ...

    # What a night writes.
    def quarantine(self, job: str, rows: pd.DataFrame, as_of: date, flow_run_id: str | None) -> None:
        """Record each bad source row (source_id, reason) once per reason."""
        ...

    def reserve(self, job: str, candidates: pd.DataFrame, as_of: date, flow_run_id: str | None,
                status: str = "pending") -> set[str]:
        """Insert the candidates' rows in one statement, each only if its key is new and it
        still holds against the live source rows and the ledger (the invoice still open,
        the step the next one, no more urgent lead); the keys this call won."""
        ...

    def prepare_to_store(self, rows: int) -> None:
        """About to store this many messages on rows just reserved (statistics)."""
        ...

    def store_messages(self, messages: Sequence[Row]) -> None:
        """Each message on its pending, unclaimed, not yet stored row (G2)."""
        ...

    def restate_messages(self, messages: Sequence[Row]) -> None:
        """Messages rendered again because what the client owes changed: each replaces the
        stored one under the same key, only on a pending row no delivery has claimed
        (sql/restate_message)."""
        ...

    def record_unrendered(self, failures: Sequence[tuple[str, str]]) -> None:
        """Reserved rows whose message could not be rendered: failed, known not sent."""
        ...

    def retry_candidates(self, as_of: date, max_attempts: int, now: datetime) -> pd.DataFrame:
        """Failed rows due for another attempt and still meant to go out."""
        ...

    def requeue_failed(self, flow_run_id: str | None, messages: Sequence[Row]) -> None:
        """Failed rows back to pending, their messages stored anew (G4)."""
        ...

    def record_unrendered_retries(self, failures: Sequence[tuple[str, str]], retry_after: datetime) -> None:
        """Retries that could not be rendered: the attempt counted, the next one later."""
        ...

    def withdraw_unsent(self, as_of: date) -> list[str]:
        """Pending rows never handed to SMTP and no longer meant to go out: failed; their keys."""
        ...

    def unsent_rows(self, keys: Sequence[str] | None = None) -> pd.DataFrame:
        """Pending rows never handed to SMTP (these keys' only, when given), with whether
        their message is stored and what the amount it states was read from (owed_state)."""
        ...

    def prune_bodies(self, before: date) -> int:
        """Retention: bodies and addresses of settled rows whose step got out before `before`."""
        ...

    # What a night reports.
    def unsettled_counts(self) -> dict[str, int]:
        ...

    def unsettled_rows(self, limit: int = 50) -> pd.DataFrame:
        ...

    def bounced_rows(self, limit: int = 200) -> pd.DataFrame:
        ...


class MailTransport(Protocol):
    """What a delivery sends through: adapters/mail.py's SMTP and file transports; an
    in-memory fake in the unit tests."""

    def send(self, email: OutgoingEmail) -> SendResult: ...

    def __enter__(self) -> MailTransport: ...

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None: ...


@dataclass(frozen=True)
class Store:
    """Where a night reads and writes: dueflow's ledger and the company's sources, of one
    database (tasks/adapters/sql_store.py) or in memory (tasks/adapters/memory.py)."""

    ledger: Ledger
    sources: Sources
