"""The naive per-row pattern, for comparison: what dueflow replaces.

For each row, one at a time: SELECT the ledger, INSERT the key (catching the unique
violation), render, send on a new SMTP connection, UPDATE the outcome — each write
its own transaction. Plain psycopg2 and smtplib, no Prefect, no DataFrames.
"""

from __future__ import annotations

import smtplib
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

import psycopg2
import psycopg2.errors
from sqlalchemy import make_url

from dueflow.tasks.core.addresses import Mailbox
from dueflow.tasks.core.message import OutgoingEmail, message_bytes, message_id_for
from dueflow.tasks.core.render import dunning_context, render, renewal_context

STEPS = ("REMINDED_1", "REMINDED_2", "OVERDUE")

INSERT = """
INSERT INTO dueflow_ledger (key, job, subject_id, cycle, step, step_rank, recipient, as_of, flow_run_id)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)
"""
ALREADY_RENEWAL = """
SELECT 1 FROM dueflow_ledger
WHERE job = 'renewal' AND subject_id = %s AND cycle = %s AND step_rank <= %s LIMIT 1
"""
SETTLE = """
UPDATE dueflow_ledger SET status = %s, subject = %s, body_text = %s, body_html = %s,
    message_id = %s, smtp_response = %s, error = %s, attempts = attempts + 1,
    sent_at = CASE WHEN %s = 'sent' THEN now() END, updated_at = now()
WHERE key = %s
"""


def connect(url: str) -> Any:
    """A plain psycopg2 connection to the database of a SQLAlchemy URL."""
    parsed = make_url(url)
    return psycopg2.connect(
        host=parsed.host, port=parsed.port or 5432, user=parsed.username,
        password=parsed.password, dbname=parsed.database,
    )


@dataclass(frozen=True)
class Candidate:
    """One renewal alert to reserve: the ledger row's columns."""

    key: str
    subject_id: str
    cycle: str
    step: str
    step_rank: int
    recipient: str


def reserve_per_row(url: str, candidates: Sequence[Candidate], as_of: date, flow_run_id: str) -> int:
    """Reserve each candidate in its own transaction: SELECT, then INSERT or skip."""
    won = 0
    conn = connect(url)
    try:
        cur = conn.cursor()
        for c in candidates:
            cur.execute(ALREADY_RENEWAL, (c.subject_id, c.cycle, c.step_rank))
            if cur.fetchone() is not None:
                conn.rollback()
                continue
            try:
                cur.execute(INSERT, (c.key, "renewal", c.subject_id, c.cycle, c.step, c.step_rank,
                                     c.recipient, as_of, flow_run_id))
                conn.commit()
                won += 1
            except psycopg2.errors.UniqueViolation:
                conn.rollback()
    finally:
        conn.close()
    return won


@dataclass
class NaiveNight:
    rows_read: int = 0
    rows_processed: int = 0  # after sampling
    ledger_selects: int = 0
    inserted: int = 0
    sent: int = 0
    failed: int = 0
    skipped_bad: int = 0
    seconds: float = 0.0


def _sampled(rows: Iterable[tuple[Any, ...]], fraction: float) -> list[tuple[Any, ...]]:
    """A deterministic, evenly spread sample of the rows (every k-th)."""
    rows = list(rows)
    if fraction >= 1:
        return rows
    step = max(1, round(1 / fraction))
    return rows[::step]


class _Night:
    def __init__(self, url: str, mail_host: str, mail_port: int, mail_from: str, as_of: date,
                 escalation_to: str, flow_run_id: str) -> None:
        self.conn = connect(url)
        self.cur = self.conn.cursor()
        self.mail_host, self.mail_port, self.mail_from = mail_host, mail_port, mail_from
        self.as_of, self.escalation_to, self.flow_run_id = as_of, escalation_to, flow_run_id
        self.stats = NaiveNight()

    def claim(self, key: str, job: str, subject_id: str, cycle: str, step: str, rank: int,
              recipient: str) -> bool:
        try:
            self.cur.execute(INSERT, (key, job, subject_id, cycle, step, rank, recipient, self.as_of,
                                      self.flow_run_id))
            self.conn.commit()
        except psycopg2.errors.UniqueViolation:
            self.conn.rollback()
            return False
        self.stats.inserted += 1
        return True

    def send(self, key: str, recipient: str, rendered: tuple[str, str, str]) -> None:
        subject, body_text, body_html = rendered
        email = OutgoingEmail(key, recipient, subject, body_text, body_html,
                              message_id_for(key, Mailbox(self.mail_from)))
        payload = message_bytes(email, Mailbox(self.mail_from))
        status, response, error = "sent", "250", None
        try:
            smtp = smtplib.SMTP(self.mail_host, self.mail_port, timeout=30)  # a new connection per email
            try:
                smtp.sendmail(self.mail_from, [recipient], payload)
            finally:
                smtp.quit()
        except (smtplib.SMTPException, OSError) as exc:
            status, response, error = "failed", None, repr(exc)
        self.cur.execute(SETTLE, (status, subject, body_text, body_html, email.message_id, response,
                                  error, status, key))
        self.conn.commit()
        if status == "sent":
            self.stats.sent += 1
        else:
            self.stats.failed += 1

    def renewals(self, leads: Sequence[int], fraction: float) -> None:
        start, end = self.as_of, self.as_of + timedelta(days=max(leads))
        self.cur.execute(
            "SELECT id, vendor, title, amount, currency, renewal_date, notify_email FROM contracts"
            " WHERE status = 'active' AND renewal_date BETWEEN %s AND %s", (start, end))
        rows = self.cur.fetchall()
        self.conn.rollback()
        self.stats.rows_read += len(rows)
        sample = _sampled(rows, fraction)
        self.stats.rows_processed += len(sample)
        for cid, vendor, title, amount, currency, renewal, email in sample:
            days_left = (renewal - self.as_of).days
            lead = min((x for x in leads if x >= days_left), default=None)
            if lead is None or days_left < 0:
                continue
            cycle = renewal.isoformat()
            self.stats.ledger_selects += 1
            self.cur.execute(ALREADY_RENEWAL, (cid, cycle, lead))
            found = self.cur.fetchone() is not None
            self.conn.rollback()
            if found:
                continue
            if amount is None or not email or "@" not in email:
                self.stats.skipped_bad += 1
                continue
            key = f"renewal/{cid}/{cycle}/{lead}d"
            if not self.claim(key, "renewal", cid, cycle, f"{lead}d", lead, email):
                continue
            context = renewal_context(vendor=vendor, title=title or "", amount=str(amount),
                                      currency=currency, renewal_date=renewal, days_left=days_left,
                                      lead=lead, locale="en")
            self.send(key, email, render("renewal", "en", context))

    def dunning(self, delays: Sequence[int], fraction: float) -> None:
        self.cur.execute(
            "SELECT i.id, i.client_id, i.number, i.amount, i.currency, i.sent_at, i.due_date,"
            " c.name, c.email, c.dunning_paused FROM invoices i JOIN clients c ON c.id = i.client_id"
            " WHERE i.paid_at IS NULL AND i.status = 'sent'")
        rows = self.cur.fetchall()
        self.conn.rollback()
        self.stats.rows_read += len(rows)
        sample = _sampled(rows, fraction)
        self.stats.rows_processed += len(sample)
        for iid, client_id, number, amount, currency, sent_at, due_date, name, email, paused in sample:
            if paused:
                continue
            self.stats.ledger_selects += 1
            self.cur.execute(
                "SELECT step_rank, as_of, step FROM dueflow_ledger WHERE job = 'dunning' AND subject_id = %s"
                " ORDER BY step_rank", (iid,))
            history = self.cur.fetchall()
            self.conn.rollback()
            rank, step_date = (history[-1][0], history[-1][1]) if history else (0, sent_at.date())
            if rank >= len(STEPS) or (self.as_of - step_date).days < delays[rank]:
                continue
            if amount is None or not email or "@" not in email:
                self.stats.skipped_bad += 1
                continue
            step = STEPS[rank]
            key = f"dunning/{iid}/{step}"
            recipient = self.escalation_to if step == "OVERDUE" else email
            if not self.claim(key, "dunning", iid, "", step, rank + 1, recipient):
                continue
            context = dunning_context(
                step=step, invoice_id=iid, number=number, amount=str(amount), currency=currency,
                issue_date=sent_at.date(), due_date=due_date, client_id=client_id, client_name=name,
                client_email=email,
                history=[{"step": s, "as_of": str(d), "status": "sent"} for _, d, s in history],
                paragraph="", as_of=self.as_of, locale="en")
            kind = "escalation" if step == "OVERDUE" else "dunning"
            self.send(key, recipient, render(kind, "en", context))

    def close(self) -> None:
        self.conn.close()


def naive_night(
    url: str, mail_host: str, mail_port: int, mail_from: str, as_of: date, escalation_to: str,
    leads: Sequence[int], delays: Sequence[int], fraction: float, flow_run_id: str,
) -> NaiveNight:
    """One night of both jobs, row by row, over a `fraction` of the source rows."""
    night = _Night(url, mail_host, mail_port, mail_from, as_of, escalation_to, flow_run_id)
    started = time.perf_counter()
    try:
        night.renewals(leads, fraction)
        night.dunning(delays, fraction)
    finally:
        night.close()
    night.stats.seconds = time.perf_counter() - started
    return night.stats


def main(argv: Sequence[str]) -> None:
    """`python -m bench.naive URL MAIL_HOST MAIL_PORT AS_OF MAIL_FROM ESCALATION_TO LEADS DELAYS`
    (the last two as JSON lists): one night of the naive script as its own process; its rows
    are flow run `bench-naive`, the bench's to delete. Prints its figures as one JSON line."""
    import json
    from dataclasses import asdict

    url, host, port, as_of, mail_from, escalation_to, leads, delays = argv
    stats = naive_night(url, host, int(port), mail_from, date.fromisoformat(as_of), escalation_to,
                        json.loads(leads), json.loads(delays), 1.0, "bench-naive")
    print(json.dumps(asdict(stats)))


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
