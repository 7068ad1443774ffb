"""The ledger and the sources in memory: tasks/core/ports.py's contracts stated over Python
dicts, statement by statement, so that whole nights run without a database.

Each method says in Python what its SQL statement says (the file named beside it), with
the same guards — a reservation re-checks the live source rows and the ledger as it was
before the statement; a claim, an outcome, a release touch only what their SQL would —
and each runs under one lock, as one transaction. The source relations are kept as their
projections read them (ids and flags as text, dates as their text), and dates the way
SQLite's date() reads them. tests/integration/test_store_contract.py holds this twin and
both SQL ledgers to the same answers; the unit layer runs whole nights on it
(tests/unit/test_nights.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any, TypeVar

from dueflow.tasks.core.bounces import copy_digests
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.guard import Approval, Figures, Tripped, each_night, night_row
from dueflow.tasks.core.keys import Job, id_forms
from dueflow.tasks.core.message import OutgoingEmail, whole_statements, with_riders
from dueflow.tasks.core.outcomes import utc_stamp
from dueflow.tasks.core.ports import Store
from dueflow.tasks.core.validate import business_dates

T = TypeVar("T")
Row = dict[str, Any]
COLUMNS = {  # each relation's projection (sql/*_by_id), in order
    "contracts": ("id", "vendor", "title", "amount", "amount_minor", "currency", "renewal_date",
                  "notify_email", "status"),
    "clients": ("id", "name", "email", "locale", "notes", "dunning_paused", "dunning_paused_until",
                "cc_email", "dunning_profile"),
    "invoices": ("id", "client_id", "number", "amount", "amount_minor", "currency", "status", "sent_at",
                 "due_date", "paid_at", "dunning_hold_until", "pdf_path", "amount_open", "amount_paid"),
    "payments": ("invoice_id", "amount", "currency", "received_at"),
}
TEXT = {  # the columns each projection reads as text
    "contracts": ("id", "vendor", "title", "currency", "notify_email", "status"),
    "clients": ("id", "name", "email", "locale", "notes", "dunning_paused", "cc_email", "dunning_profile"),
    "invoices": ("id", "client_id", "number", "currency", "status", "pdf_path"),
    "payments": ("invoice_id", "currency"),
}
# What sql/dunning_candidates, invoices_by_id and extract_invoices add to an invoice
# (sql/fragments/payments_of, payment_state).
PAID_COLUMNS = ("paid_e4", "credited_e4", "paid_last", "paid_currency_low", "paid_currency_high",
                "payments_unreadable", "payment_state")
OFF = ("0", "false", "f", "no", "n", "off", "")  # sql/fragments/invoice_open: a client not paused
MESSAGE_FIELDS = ("recipient", "subject", "body_text", "body_html", "message_id", "draft_source",
                  "draft_note", "paragraph", "tone_plan", "refused_answer", "cc_recipient", "bcc_recipient",
                  "attachment_path", "attachment_name", "attachment_sha256", "attachment_size",
                  "attachment_note", "owed_state", "statement_key")
PRUNED_FIELDS = ("recipient", "previous_recipient", "cc_recipient", "bcc_recipient", "subject", "body_text",
                 "body_html", "paragraph", "draft_note", "refused_answer", "smtp_response", "error",
                 "attachment_path", "attachment_name", "attachment_note")
NOT_DUE = ("not sent: no longer due when a run went to send it (contract changed, invoice paid or paused,"
           " or a later step exists)")
RETRY_COLUMNS = ("key", "job", "subject_id", "cycle", "step", "step_rank", "as_of", "recipient", "permanent",
                 "paragraph", "draft_source", "draft_note", "tone_plan", "attachment_sha256")
UNSENT_COLUMNS = ("key", "job", "subject_id", "cycle", "step", "step_rank", "as_of", "recipient", "paragraph",
                  "draft_source", "draft_note", "tone_plan", "owed_state", "statement_key", "stored")
RESTATED_FIELDS = ("subject", "body_text", "body_html", "message_id", "attachment_path", "attachment_name",
                   "attachment_sha256", "attachment_size", "attachment_note", "owed_state", "statement_key")


def sql_date(value: object) -> date | None:
    """A value as SQLite's date() reads it: ISO 8601, an offset converted to UTC; None
    for anything else."""
    if _missing(value):
        return None
    if isinstance(value, datetime):
        return (value.astimezone(UTC) if value.tzinfo else value).date()
    if isinstance(value, date):
        return value
    try:
        moment = datetime.fromisoformat(str(value).strip().replace(" ", "T", 1))
    except ValueError:
        return None
    return (moment.astimezone(UTC) if moment.tzinfo else moment).date()


def plain_date(value: object) -> bool:
    """A YYYY-MM-DD that date() gives back as written (`date(x) = substr(x, 1, 10)`)."""
    read = sql_date(value)
    return read is not None and read.isoformat() == str(value)[:10]


def _missing(value: object) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and value != value)


def _text(value: object) -> str | None:
    if _missing(value):
        return None
    if isinstance(value, bool):
        return "1" if value else "0"  # SQLite keeps a boolean as an integer
    return str(value)


def _iso(value: object) -> str | None:
    return value.isoformat() if isinstance(value, date) else _text(value)


def _frame(rows: Iterable[Mapping[str, Any]], columns: Sequence[str], dtype: Any = object) -> pd.DataFrame:
    return pd.DataFrame([[row.get(c) for c in columns] for row in rows], columns=list(columns), dtype=dtype)


def _units(value: object) -> int | None:
    """An amount as sql/fragments/payments_of.sqlite reads it: integer units of 10^-4."""
    if isinstance(value, bool) or _missing(value):
        return None
    try:
        exact = Decimal(str(value).strip()) if not isinstance(value, float) else Decimal(repr(value))
    except InvalidOperation:
        return None
    if not exact.is_finite() or "e" in str(value).lower():
        return None
    return int((exact * 10000).to_integral_value(ROUND_HALF_UP))


def _received(value: object) -> str | None:
    """A payment's date as payments_of.sqlite reads it: its first ten characters, when a date."""
    text = _iso(value)
    return text[:10] if text is not None and plain_date(text[:10]) else None


def paid_columns(invoices: Sequence[Row], payments: Sequence[Row], as_of: str) -> list[Row]:
    """sql/fragments/payments_of and payment_state: the invoices with what was paid and
    credited on each up to `as_of`."""
    by_invoice: dict[str, list[tuple[int | None, str | None, str | None]]] = {}
    for p in payments:
        received = _received(p["received_at"])
        if received is None or received <= as_of:
            by_invoice.setdefault(p["invoice_id"], []).append((_units(p["amount"]), received, p["currency"]))
    rows = []
    for invoice in invoices:
        found = by_invoice.get(invoice["id"]) if invoice["id"] is not None else None
        own = f"|{_text(invoice.get('amount_open')) or ''}|{_text(invoice.get('amount_paid')) or ''}"
        if not found:
            rows.append({**invoice, **dict.fromkeys(PAID_COLUMNS), "payment_state": own})
            continue
        units = [u for u, _, _ in found if u is not None]
        currencies = [c for _, _, c in found if c is not None]
        paid = [u for u in units if u > 0]
        credited = [-u for u in units if u < 0]
        low, high = (min(currencies), max(currencies)) if currencies else (None, None)
        rows.append({**invoice, "paid_e4": sum(paid) if paid else None,
                     "credited_e4": sum(credited) if credited else None,
                     "paid_last": max((d for u, d, _ in found if u and u > 0 and d), default=None),
                     "paid_currency_low": low, "paid_currency_high": high,
                     "payments_unreadable": sum(u is None or d is None or c is None for u, d, c in found),
                     "payment_state": f"{len(found)}:{sum(units)}:{low or ''}:{high or ''}{own}"})
    return rows


def _open(invoice: Mapping[str, Any]) -> bool:
    """sql/fragments/invoice_may_be_dunned."""
    return invoice["paid_at"] is None and invoice["status"] not in ("draft", "paid", "void")


@dataclass
class MemorySources:
    """The company's contracts, clients and invoices, as their projections read them; one
    lock for the whole store, the ledger's too: each method is one transaction."""

    tables: dict[str, list[Row]]
    ledger: MemoryLedger | None = None
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    @classmethod
    def of(cls, contracts: Iterable[Mapping[str, Any]] = (), clients: Iterable[Mapping[str, Any]] = (),
           invoices: Iterable[Mapping[str, Any]] = ()) -> MemorySources:
        sources = cls({"contracts": [], "clients": [], "invoices": [], "payments": []})
        sources.add(contracts=contracts, clients=clients, invoices=invoices)
        return sources

    def add(self, **tables: Iterable[Mapping[str, Any]]) -> None:
        """Add rows (the factories' dicts) as the projections would read them."""
        with self.lock:
            for name, rows in tables.items():
                for row in rows:
                    self.tables[name].append(self._projected(name, row))

    def pay(self, invoice_id: str, amount: Any, currency: str, received_at: Any) -> None:
        """A payment (a negative amount: a credit note) recorded in the company's payments."""
        self.add(payments=[{"invoice_id": invoice_id, "amount": amount, "currency": currency,
                            "received_at": received_at}])

    def update(self, relation: str, row_id: str, **values: Any) -> None:
        """Change the rows of one id, as the company's application would."""
        with self.lock:
            for row in self.tables[relation]:
                if row["id"] == row_id:
                    row.update(self._projected(relation, {**row, **values}))

    @staticmethod
    def _projected(relation: str, row: Mapping[str, Any]) -> Row:
        projected = {column: row.get(column) for column in COLUMNS[relation]}
        return projected | {column: _text(projected[column]) for column in TEXT[relation]}

    def _rows(self, relation: str) -> list[Row]:
        return [dict(row) for row in self.tables[relation]]

    def _ledger_rows(self) -> list[Row]:
        return list(self.ledger.rows.values()) if self.ledger else []

    # -------------------------------------------------------------- the interface

    def renewal_candidates(self, as_of: date, window_start: date, window_end: date,
                           leads: Sequence[int]) -> pd.DataFrame:
        """sql/extract_contracts (SQLite): the rows that may be due and every row sharing an
        id with one; the twin settles no row (settled_lead empty): the rule decides."""
        def may_be_due(row: Row) -> bool:
            read = sql_date(row["renewal_date"])
            return row["status"] != "cancelled" and (
                read is None or not plain_date(row["renewal_date"])
                or window_start.toordinal() - 1 <= read.toordinal() <= window_end.toordinal() + 1)

        with self.lock:
            contracts = self._rows("contracts")
        ids = {row["id"] for row in contracts if row["id"] is not None and may_be_due(row)}
        picked = [row for row in contracts if row["id"] in ids] + [
            row for row in contracts if row["id"] is None and may_be_due(row)]
        return _frame(({**row, "settled_lead": None} for row in picked),
                      [*COLUMNS["contracts"], "settled_lead"])

    def dunning_candidates(self, bounds: Mapping[str, str], timezone: str) -> pd.DataFrame:
        """sql/dunning_candidates (SQLite): open invoices whose next step may be due, and every
        row sharing an id with one."""
        with self.lock:
            steps: dict[str, Row] = {}
            for row in self._ledger_rows():
                if row["job"] == Job.DUNNING and row["step_rank"] > steps.get(row["subject_id"], {}).get(
                        "step_rank", 0):
                    steps[row["subject_id"]] = row
            invoices = self._rows("invoices")
        waits = {1: bounds["after_first_by"], 2: bounds["after_second_by"]}
        dated = {subject for subject, row in steps.items() if row["step_rank"] in waits
                 and (row["attempt_as_of"] or row["as_of"]) <= waits[row["step_rank"]]}

        def picked(row: Row) -> bool:
            hold = row["dunning_hold_until"]
            if not _open(row) or (plain_date(hold) and str(_iso(hold)) > bounds["hold_as_of"]):
                return False
            if row["id"] in dated or row["id"] in steps:
                return row["id"] in dated
            start = _iso({"sent": row["sent_at"], "due": row["due_date"]}.get(bounds["start"]))
            return start is None or not plain_date(start) or start < bounds["start_by_text"]

        chosen = [row for row in invoices if picked(row)]
        ids = {row["id"] for row in chosen if row["id"] is not None}
        rows = [row for row in invoices if row["id"] in ids] + [row for row in chosen if row["id"] is None]
        with self.lock:
            payments = self._rows("payments")
        paid = paid_columns(rows[:len(rows) - sum(row["id"] is None for row in chosen)], payments,
                            bounds["as_of"])
        nameless = [{**row, **dict.fromkeys(PAID_COLUMNS)} for row in chosen if row["id"] is None]
        return _frame(paid + nameless, (*COLUMNS["invoices"], *PAID_COLUMNS))

    def by_id(self, relation: str, ids: Sequence[str], as_of: date | None = None) -> pd.DataFrame:
        wanted = set(ids)
        with self.lock:
            rows = [row for row in self._rows(relation) if row["id"] in wanted]
            payments = self._rows("payments")
        if relation == "contracts":  # sql/contracts_by_id: date(renewal_date)
            rows = [{**row, "renewal_date": _iso(sql_date(row["renewal_date"]))} for row in rows]
        if relation == "invoices":  # sql/invoices_by_id
            return _frame(paid_columns(rows, payments, (as_of or date.max).isoformat()),
                          (*COLUMNS["invoices"], *PAID_COLUMNS))
        return _frame(rows, COLUMNS[relation])

    def every(self, relation: str, as_of: date | None = None) -> pd.DataFrame:
        """sql/extract_invoices and sql/extract_clients."""
        with self.lock:
            invoices, clients = self._rows("invoices"), self._rows("clients")
            payments = self._rows("payments")
        open_ids = {row["id"] for row in invoices if _open(row) and row["id"] is not None}
        if relation == "invoices":
            rows = paid_columns([row for row in invoices if row["id"] in open_ids], payments,
                                (as_of or date.max).isoformat()) + [
                {**row, **dict.fromkeys(PAID_COLUMNS), "payment_state": None}
                for row in invoices if row["id"] is None and _open(row)]
            return _frame(rows, (*COLUMNS["invoices"], *PAID_COLUMNS))
        else:
            paying = {row["client_id"] for row in invoices if _open(row)}
            rows = [row for row in clients if row["id"] in paying]
        return _frame(rows, COLUMNS[relation])

    def client_payment_history(self, client_ids: Sequence[str]) -> pd.DataFrame:
        """sql/client_payment_history_of."""
        wanted, sent = set(client_ids), dict[str, int]()
        with self.lock:
            for row in self._ledger_rows():
                if row["job"] == Job.DUNNING and row["step"] in ("REMINDED_1", "REMINDED_2") \
                        and row["status"] == "sent":
                    sent[row["subject_id"]] = sent.get(row["subject_id"], 0) + 1
            invoices = self._rows("invoices")
        rows = [{"client_id": row["client_id"], "invoice_id": row["id"], "number": row["number"],
                 "due_date": row["due_date"], "paid_at": row["paid_at"], "reminders": sent.get(row["id"], 0)}
                for row in invoices if row["client_id"] in wanted and row["status"] not in ("draft", "void")]
        return _frame(rows, ("client_id", "invoice_id", "number", "due_date", "paid_at", "reminders"))

    def ids(self) -> pd.DataFrame:
        with self.lock:
            rows = [{"job": job, "id": row["id"]}
                    for job, relation in ((Job.RENEWAL, "contracts"), (Job.DUNNING, "invoices"))
                    for row in self.tables[relation] if row["id"] is not None]
        return _frame(rows, ("job", "id"))

    def open_invoices(self) -> int:
        """sql/open_invoices_count."""
        with self.lock:
            return sum(row["status"] == "sent" and row["paid_at"] is None for row in self.tables["invoices"])

    def refused(self, exc: BaseException, doing: str) -> str | None:
        return None  # nothing in memory refuses a read


@dataclass
class MemoryLedger:
    """dueflow_ledger, dueflow_quarantine and dueflow_id_changes as dicts; `bounces` the keys
    a bounce report names (dueflow_bounces)."""

    sources: MemorySources
    rows: dict[str, Row] = field(default_factory=dict)
    quarantined: dict[tuple[str, str, str], Row] = field(default_factory=dict)
    id_changes: list[Row] = field(default_factory=list)
    nights: list[Row] = field(default_factory=list)  # dueflow_nights, in the order recorded
    bounces: set[str] = field(default_factory=set)
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC), repr=False)

    def _tx(self, work: Callable[[], T]) -> T:
        with self.sources.lock:
            return work()

    def _now(self) -> str:
        return utc_stamp(self.clock())

    def transient(self, exc: BaseException) -> bool:
        return False

    # -------------------------------------------------------------- the re-checks

    def _invoice_open(self, subject_id: str) -> bool:
        """sql/fragments/invoice_open: sent, not paid, its client not paused."""
        clients = {row["id"]: row for row in self.sources.tables["clients"]}
        return any(row["id"] == subject_id and row["status"] == "sent" and row["paid_at"] is None
                   and row["client_id"] in clients
                   and (clients[row["client_id"]]["dunning_paused"] or "").strip().lower() in OFF
                   for row in self.sources.tables["invoices"])

    def _payments_unchanged(self, x: Mapping[str, Any], as_of: date) -> bool:
        """sql/reserve_dunning: what the open amount is read from is what the extract read."""
        given = x.get("payment_state")
        if _missing(given):
            return True
        invoices = [row for row in self.sources.tables["invoices"] if row["id"] == x["subject_id"]][:1]
        live = paid_columns(invoices, self.sources.tables["payments"], as_of.isoformat())
        return bool(live) and live[0]["payment_state"] == given

    def _steps(self, subject_id: str) -> list[Row]:
        return [row for row in self.rows.values()
                if row["job"] == Job.DUNNING and row["subject_id"] == subject_id]

    def _step_is_next(self, x: Mapping[str, Any]) -> bool:
        """sql/fragments/dunning_step_is_next."""
        steps, rank, by = self._steps(x["subject_id"]), int(x["step_rank"]), _iso(x.get("previous_by"))
        last = max((row["step_rank"] for row in steps), default=0)

        def out_by(row: Row) -> bool:
            return by is not None and (row["attempt_as_of"] or row["as_of"]) <= by

        if last == rank - 1 and (rank == 1 or any(
                row["step_rank"] == rank - 1 and row["status"] in ("sent", "adopted") and out_by(row)
                for row in steps)):
            return True
        return x["step"] == "OVERDUE" and any(
            row["status"] == "bounced" and row["step_rank"] < rank and row["step_rank"] == last
            and out_by(row)
            for row in steps)

    def _no_more_urgent(self, x: Mapping[str, Any]) -> bool:
        """sql/fragments/renewal_no_more_urgent."""
        return not any(row["job"] == Job.RENEWAL and row["subject_id"] == x["subject_id"]
                       and row["cycle"] == x["cycle"] and row["step_rank"] < int(x["step_rank"])
                       for row in self.rows.values())

    def _still_due(self, x: Mapping[str, Any], as_of: str) -> bool:
        """sql/fragments/still_due."""
        if x["job"] == Job.RENEWAL:
            renews = any(row["id"] == x["subject_id"] and row["status"] == "active"
                         and _iso(sql_date(row["renewal_date"])) == x["cycle"] and x["cycle"] >= as_of
                         for row in self.sources.tables["contracts"])
            return renews and self._no_more_urgent(x)
        return self._invoice_open(x["subject_id"]) and not any(
            row["step_rank"] > x["step_rank"]
            and not (row["step"] == "OVERDUE" and x["step"] in ("REMINDED_1", "REMINDED_2")
                     and x["key"] in self.bounces)
            for row in self._steps(x["subject_id"]))

    # -------------------------------------------------------------- delivery

    def settle(self, token: str, as_of: date, outcomes: Sequence[Mapping[str, Any]] = (),
               release: Sequence[str] = (), claim: Sequence[str] = ()) -> list[OutgoingEmail]:
        def work() -> list[OutgoingEmail]:
            now = self._now()
            for outcome in outcomes:  # sql/record_outcome: a statement's, on each of its rows
                for row in self._with_riders([outcome["key"]]):
                    if row["status"] == "pending" and row["claim_token"] == token:
                        row.update(status=outcome["status"], smtp_response=outcome["smtp_response"],
                                   error=outcome["error"], permanent=bool(outcome["permanent"]),
                                   retry_after=outcome["retry_after"], updated_at=now,
                                   sent_at=now if outcome["status"] == "sent" else row["sent_at"])
            for row in self._with_riders(release):  # sql/release_claims
                if row["status"] == "pending" and row["claim_token"] == token:
                    row.update(sending_at=None, claim_token=None, attempts=row["attempts"] - 1,
                               updated_at=now)
            claimed = {}
            for row in self._with_riders(claim):  # sql/claim_sending: a rider only with its carrier
                if row["statement_key"] not in (None, row["key"]) and row["statement_key"] not in claim:
                    continue
                if row["status"] == "pending" and row["body_text"] is not None \
                        and (row["sending_at"] is None or row["claim_token"] == token):
                    row.update(attempts=row["attempts"] + (0 if row["claim_token"] == token else 1),
                               sending_at=now, attempt_as_of=as_of.isoformat(), claim_token=token,
                               updated_at=now)
                    claimed[row["key"]] = _email(row)
            return with_riders(claim, claimed)
        return self._tx(work)

    def _with_riders(self, keys: Sequence[str]) -> list[Row]:
        """The rows of these keys and the rows of the statements they carry."""
        wanted = set(keys)
        return [row for row in self.rows.values()
                if row["key"] in wanted or (row["statement_key"] or "") in wanted]

    def _statement_of(self, key: str) -> list[Row]:
        """The row of `key` and, when it is in a statement, every other row of it."""
        row = self.rows.get(key)
        if row is None:
            return []
        statement = row["statement_key"]
        if statement is None:
            return [row]
        return [r for r in self.rows.values() if r["statement_key"] == statement]

    def statuses(self, keys: Sequence[str]) -> dict[str, str]:
        return self._tx(lambda: {key: self.rows[key]["status"] for key in keys if key in self.rows})

    def claims(self, keys: Sequence[str]) -> dict[str, str]:
        def state(row: Row) -> str:
            if row["status"] != "pending":
                return str(row["status"])
            return "claimed" if row["sending_at"] else "unclaimed"
        return self._tx(lambda: {key: state(self.rows[key]) for key in keys if key in self.rows})

    # -------------------------------------------------------------- reading

    def renewal_history(self, contracts: pd.DataFrame, since: date, timezone: str) -> pd.DataFrame:
        """sql/renewal_history_of."""
        rows = contracts[contracts["settled_lead"].isna()] if "settled_lead" in contracts else contracts
        cycles = business_dates(rows["renewal_date"], timezone).dt.strftime("%Y-%m-%d")
        pairs = {(str(i), str(c)) for i, c in zip(rows["id"], cycles, strict=True)
                 if not _missing(i) and not _missing(c)}

        def work() -> pd.DataFrame:
            handled: dict[tuple[str, str], int] = {}
            for row in self.rows.values():
                pair = (row["subject_id"], row["cycle"])
                if row["job"] == Job.RENEWAL and pair in pairs and row["cycle"] >= since.isoformat():
                    handled[pair] = min(handled.get(pair, row["step_rank"]), row["step_rank"])
            return _frame(({"subject_id": s, "cycle": c, "handled_rank": r} for (s, c), r in handled.items()),
                          ("subject_id", "cycle", "handled_rank"))
        return self._tx(work)

    def dunning_history(self, invoice_ids: Sequence[str]) -> pd.DataFrame:
        """sql/dunning_history_of."""
        wanted = set(invoice_ids)
        return self._tx(lambda: _frame(
            ({**row, "bounce": row["error"] if row["status"] == "bounced" else None}
             for row in self.rows.values() if row["job"] == Job.DUNNING and row["subject_id"] in wanted),
            ("subject_id", "step", "step_rank", "as_of", "attempt_as_of", "status", "bounce")))

    def first_night(self) -> date | None:
        first = self._tx(lambda: min((row["as_of"] for row in self.rows.values()), default=None))
        return date.fromisoformat(first) if first else None

    def open_keys(self) -> dict[str, str]:
        return self._tx(lambda: {key: row["status"] for key, row in self.rows.items()
                                 if row["status"] in ("pending", "failed")})

    def failed_rows(self) -> pd.DataFrame:
        """sql/failed_rows."""
        columns = ["key", "permanent", "attempts", "retry_after", "error"]
        rows = self._tx(lambda: [[r[c] for c in columns] for k, r in sorted(self.rows.items())
                                 if r["status"] == "failed"])
        frame = pd.DataFrame(rows, columns=columns, dtype=object)
        return frame.assign(permanent=frame["permanent"].astype(bool), attempts=frame["attempts"].astype(int))

    def ids_of_forms(self, job: str, forms: Sequence[str]) -> pd.DataFrame:
        wanted = set(forms)
        return self._tx(lambda: _frame(
            {(r["subject_id"], r["subject_form"]): r for r in self.rows.values()
             if r["job"] == job and r["subject_form"] in wanted}.values(),
            ("subject_id", "subject_form"), dtype="string"))

    def kept_apart(self) -> pd.DataFrame:
        return self._tx(lambda: _frame((c for c in self.id_changes if c["decision"] == "apart"),
                                       ("job", "old_id", "new_id"), dtype="string"))

    def recent_nights(self, before: date, nights: int) -> list[Figures]:
        """sql/nights_before (each night's latest run)."""
        rows = self._tx(lambda: sorted((n for n in reversed(self.nights) if n["as_of"] < before.isoformat()),
                                       key=lambda n: n["as_of"], reverse=True))
        return each_night(_frame(rows, ("as_of", "figures")), nights)

    def record_night(self, as_of: date, flow_run_id: str | None, figures: Figures,
                     tripped: Sequence[Tripped] = (), approval: Approval | None = None) -> None:
        """sql/night_record: a rerun of the same run replaces its own row."""
        row = night_row(as_of, flow_run_id, figures, tripped, approval, self._now())

        def work() -> None:
            self.nights[:] = [n for n in self.nights
                              if (n["as_of"], n["flow_run_id"]) != (row["as_of"], row["flow_run_id"])] + [row]
        self._tx(work)

    # -------------------------------------------------------------- writing

    def quarantine(self, job: str, rows: pd.DataFrame, as_of: date, flow_run_id: str | None) -> None:
        """sql/quarantine: one row per (job, source id, reason), counted each night."""
        seen_now = rows.loc[:, ["source_id", "reason"]].drop_duplicates().itertuples(index=False)

        def work() -> None:
            for source_id, reason in seen_now:
                seen = self.quarantined.setdefault((job, source_id, reason), {
                    "first_as_of": as_of.isoformat(), "times_seen": 0})
                seen.update(last_as_of=as_of.isoformat(), flow_run_id=flow_run_id,
                            times_seen=seen["times_seen"] + 1)
        self._tx(work)

    def reserve(self, job: str, candidates: pd.DataFrame, as_of: date, flow_run_id: str | None,
                status: str = "pending") -> set[str]:
        """sql/reserve_dunning and sql/reserve_renewals: each candidate checked against the
        ledger as it was before the statement, and the live source rows."""
        records: list[Row] = [{str(k): v for k, v in x.items()} for x in candidates.assign(
            subject_form=id_forms(candidates["subject_id"])).to_dict("records")]

        def holds(x: Mapping[str, Any]) -> bool:
            if job == Job.RENEWAL:
                return self._no_more_urgent(x)
            return (self._invoice_open(x["subject_id"]) and self._step_is_next(x)
                    and self._payments_unchanged(x, as_of))

        def work() -> set[str]:
            now = self._now()
            winners = [x for x in records if x["key"] not in self.rows and holds(x)]
            for x in winners:
                self.rows[x["key"]] = ledger_row(x, job, as_of, flow_run_id, status, now)
            return {x["key"] for x in winners}
        return self._tx(work)

    def prepare_to_store(self, rows: int) -> None:
        return None  # no planner to tell

    def store_messages(self, messages: Sequence[Mapping[str, Any]]) -> None:
        def work() -> None:
            for message in messages:
                self._store(message)
        self._tx(work)

    def _store(self, message: Mapping[str, Any]) -> None:
        """sql/store_message: the first message stored on a row stays."""
        row = self.rows.get(message["key"])
        if row and row["status"] == "pending" and row["sending_at"] is None and row["body_text"] is None:
            row.update({f: message.get(f) for f in MESSAGE_FIELDS}, updated_at=self._now())
            if row["previous_recipient"] == message.get("recipient"):
                row["previous_recipient"] = None

    def restate_messages(self, messages: Sequence[Mapping[str, Any]]) -> None:
        """sql/restate_message."""
        def work() -> None:
            for message in messages:
                row = self.rows.get(message["key"])
                if row and row["status"] == "pending" and row["sending_at"] is None \
                        and row["body_text"] is not None:
                    row.update({f: message.get(f) for f in RESTATED_FIELDS}, updated_at=self._now())
        self._tx(work)

    def record_unrendered(self, failures: Sequence[tuple[str, str]]) -> None:
        """sql/record_unrendered."""
        def work() -> None:
            for key, error in failures:
                row = self.rows.get(key)
                if row and row["status"] == "pending" and row["sending_at"] is None:
                    row.update(status="failed", error=error, attempts=row["attempts"] + 1, permanent=False,
                               retry_after=None, updated_at=self._now())
        self._tx(work)

    def retry_candidates(self, as_of: date, max_attempts: int, now: datetime) -> pd.DataFrame:
        """sql/retry_candidates."""
        stamp = utc_stamp(now)

        def due(row: Row) -> bool:
            return row["status"] == "failed" and (row["permanent"] or (
                row["attempts"] < max_attempts
                and (row["retry_after"] is None or row["retry_after"] <= stamp))
            ) and self._still_due(row, as_of.isoformat())

        rows = self._tx(lambda: sorted((r for r in self.rows.values() if due(r)), key=lambda r: r["key"]))
        frame = _frame(rows, RETRY_COLUMNS)
        return frame.assign(permanent=frame["permanent"].astype(bool))

    def requeue_failed(self, flow_run_id: str | None, messages: Sequence[Mapping[str, Any]]) -> None:
        """sql/requeue_failed, then sql/store_message, in one transaction."""
        def work() -> None:
            won = set()
            for message in messages:
                row = self.rows.get(message["key"])
                if row is None or row["status"] != "failed":
                    continue
                row.update(status="pending", sending_at=None, claim_token=None, flow_run_id=flow_run_id,
                           error=None, retry_after=None, attempts=0 if row["permanent"] else row["attempts"],
                           permanent=False, previous_recipient=row["recipient"], subject=None,
                           body_text=None, body_html=None, statement_key=None)
                won.add(message["key"])
            for message in whole_statements(messages, won):
                self._store(message)
        self._tx(work)

    def record_unrendered_retries(self, failures: Sequence[tuple[str, str]], retry_after: datetime) -> None:
        """sql/record_unrendered_retry."""
        def work() -> None:
            for key, error in failures:
                row = self.rows.get(key)
                if row and row["status"] == "failed" and not row["permanent"]:
                    row.update(error=error, attempts=row["attempts"] + 1, retry_after=utc_stamp(retry_after))
        self._tx(work)

    def withdraw_unsent(self, as_of: date) -> list[str]:
        """sql/withdraw_unsent."""
        def work() -> list[str]:
            gone = [row for row in self.rows.values() if row["status"] == "pending"
                    and row["sending_at"] is None and not self._still_due(row, as_of.isoformat())]
            for row in gone:
                row.update(status="failed", error=NOT_DUE, updated_at=self._now())
            broken = {row["statement_key"] for row in self.rows.values() if row["statement_key"] is not None
                      and not (row["status"] == "pending" and row["sending_at"] is None)}
            for row in self.rows.values():  # sql/unstore_broken_statements
                if gone and row["status"] == "pending" and row["sending_at"] is None \
                        and row["statement_key"] in broken:
                    row.update(subject=None, body_text=None, body_html=None, message_id=None,
                               statement_key=None, updated_at=self._now())
            return [row["key"] for row in gone]
        return self._tx(work)

    def unsent_rows(self, keys: Sequence[str] | None = None) -> pd.DataFrame:
        """sql/unsent (sql/unsent_of with `keys`)."""
        wanted = None if keys is None else set(keys)
        rows = self._tx(lambda: sorted(
            ({**row, "stored": row["body_text"] is not None} for row in self.rows.values()
             if row["status"] == "pending" and row["sending_at"] is None
             and (wanted is None or row["key"] in wanted)), key=lambda row: row["key"]))
        frame = _frame(rows, UNSENT_COLUMNS)
        return frame.assign(stored=frame["stored"].astype(bool))

    def prune_bodies(self, before: date) -> int:
        """sql/prune_copies, sql/prune_bodies: the copies kept as digests."""
        def work() -> int:
            pruned = [row for row in self.rows.values() if row["status"] in ("sent", "adopted")
                      and row["pruned_at"] is None
                      and (row["attempt_as_of"] or row["as_of"]) < before.isoformat()]
            for row in pruned:
                if row["cc_recipient"] is not None or row["bcc_recipient"] is not None:
                    row["copy_digests"] = copy_digests(row["recipient"], row["cc_recipient"],
                                                       row["bcc_recipient"])
                row.update(dict.fromkeys(PRUNED_FIELDS), pruned_at=self._now())
            return len(pruned)
        return self._tx(work)

    # -------------------------------------------------------------- reporting

    def unsettled_counts(self) -> dict[str, int]:
        """sql/unsettled_counts."""
        def work() -> dict[str, int]:
            counts = {"pending": 0, "failed": 0, "permanent": 0, "unsent": 0, "bounced": 0}
            for row in self.rows.values():
                if row["status"] in ("pending", "failed", "bounced"):
                    counts["unsent" if row["status"] == "pending" and row["sending_at"] is None
                           else "permanent" if row["status"] == "failed" and row["permanent"]
                           else row["status"]] += 1
            return counts
        return self._tx(work)

    def unsettled_rows(self, limit: int = 50) -> pd.DataFrame:
        """sql/unsettled_rows."""
        rows = self._tx(lambda: sorted((r for r in self.rows.values()
                                        if r["status"] in ("pending", "failed")),
                                       key=lambda r: (r["created_at"], r["key"]))[:limit])
        return _frame(rows, ("key", "status", "attempts", "permanent", "error", "sending_at"))

    def bounced_rows(self, limit: int = 200) -> pd.DataFrame:
        """sql/bounced_rows."""
        rows = self._tx(lambda: sorted((r for r in self.rows.values() if r["status"] == "bounced"),
                                       key=lambda r: (r["updated_at"], r["key"]))[:limit])
        return _frame(rows, ("key", "job", "recipient", "error"))

    # -------------------------------------------------------------- what intake and operators do

    def mark_bounced(self, key: str, reason: str) -> None:
        """A bounce report for a delivered row (sql/bounce_rows): the twin of bounce intake."""
        def work() -> None:
            for row in self._statement_of(key):  # a statement's report marks each of its rows
                if row["status"] == "sent":
                    row.update(status="bounced", error=reason, updated_at=self._now())
            self.bounces.add(key)
        self._tx(work)

    def resolve(self, key: str, outcome: str, note: str, by: str | None = None) -> bool:
        """sql/resolve_pending: an operator settles a pending row (`sent` only once claimed)."""
        def work() -> bool:
            settled = [row for row in self._statement_of(key) if row["status"] == "pending"
                       and (outcome == "failed" or row["sending_at"] is not None)]
            for row in settled:
                row.update(status=outcome, error=note, permanent=False, retry_after=None,
                           updated_at=self._now(), attempts=0 if outcome == "failed" else row["attempts"],
                           sent_at=self._now() if outcome == "sent" else row["sent_at"],
                           resolved_by=by, resolved_at=self._now())
            return bool(settled)
        return self._tx(work)

    def resolve_retry(self, key: str, note: str, by: str | None = None) -> bool:
        """sql/resolve_retry (then sql/bounce_settle): a failed or bounced row goes once more
        — a failed row due for its first attempt, which the next night requeues; a
        statement's, with every row of it."""
        def work() -> bool:
            again = [row for row in self._statement_of(key) if row["status"] in ("failed", "bounced")]
            for row in again:
                row.update(status="failed", error=note, permanent=False, retry_after=None, attempts=0,
                           sending_at=None, claim_token=None, resolved_by=by, resolved_at=self._now(),
                           updated_at=self._now())
            self.bounces.discard(key)
            if again and again[0]["statement_key"]:
                self.bounces.discard(again[0]["statement_key"])
            return bool(again)
        return self._tx(work)


def ledger_row(x: Mapping[str, Any], job: str, as_of: date, flow_run_id: str | None, status: str,
               now: str) -> Row:
    """A row as sql/reserve_* inserts it (the table's defaults for every other column)."""
    return {"key": x["key"], "job": job, "subject_id": x["subject_id"], "subject_form": x["subject_form"],
            "cycle": x["cycle"], "step": x["step"], "step_rank": int(x["step_rank"]),
            "recipient": x["recipient"], "as_of": as_of.isoformat(), "flow_run_id": flow_run_id,
            "status": status, "attempts": 0, "permanent": False, "retry_after": None, "created_at": now,
            "updated_at": now, "sent_at": None, "sending_at": None, "claim_token": None,
            "attempt_as_of": None, "smtp_response": None, "error": None, "previous_recipient": None,
            "pruned_at": None, "copy_digests": None, "resolved_by": None, "resolved_at": None,
            **dict.fromkeys(MESSAGE_FIELDS)}


def _email(row: Mapping[str, Any]) -> OutgoingEmail:
    return OutgoingEmail(row["key"], row["recipient"], row["subject"], row["body_text"], row["body_html"],
                         row["message_id"], cc_recipient=row["cc_recipient"],
                         bcc_recipient=row["bcc_recipient"], attachment_path=row["attachment_path"],
                         attachment_name=row["attachment_name"], attachment_sha256=row["attachment_sha256"],
                         attachment_size=None if _missing(row["attachment_size"])
                         else int(row["attachment_size"]), statement_key=row["statement_key"])


def memory_store(contracts: Iterable[Mapping[str, Any]] = (), clients: Iterable[Mapping[str, Any]] = (),
                 invoices: Iterable[Mapping[str, Any]] = (),
                 clock: Callable[[], datetime] | None = None,
                 payments: Iterable[Mapping[str, Any]] = ()) -> Store:
    """A store in memory with these source rows (the factories' dicts) and an empty ledger."""
    sources = MemorySources.of(contracts, clients, invoices)
    sources.add(payments=payments)
    ledger = MemoryLedger(sources, clock=clock or (lambda: datetime.now(UTC)))
    sources.ledger = ledger
    return Store(ledger, sources)
