"""The seeds' own script, as the seeds write it: the reference of `bench.nights`.

SELECT the rows, loop over them in Python, INSERT each due key into a table with a
UNIQUE key in autocommit (the insert that conflicts is "already sent"), a new SMTP
connection per email. No history reads: the dunning step follows from the days since
the invoice was sent (7, 12, 19: the flow's default delays added up), so an invoice
whose reminders were missed gets its latest step at once, as the seeds' code does.

    python -m bench.seeds [--flow] DATABASE_URL MAIL_HOST MAIL_PORT AS_OF

prints one JSON line with what it did. Its table (`seeds_sent`) is its own. With --flow the
same night runs inside one Prefect `@flow` (against PREFECT_API_URL): the script as the seeds
would first put it under Prefect, with nothing else changed.
"""

from __future__ import annotations

import json
import smtplib
import sys
import time
from datetime import date, timedelta
from email.message import EmailMessage

import psycopg2
from sqlalchemy import make_url

LEADS = (15, 30, 60)
STEPS = ((19, "OVERDUE"), (12, "REMINDED_2"), (7, "REMINDED_1"))  # days since sent, latest first
MAIL_FROM = "alerts@dueflow.bench"
ESCALATION_TO = "escalations@dueflow.bench"
TABLE = "CREATE TABLE IF NOT EXISTS seeds_sent (key text NOT NULL UNIQUE, sent_at timestamptz DEFAULT now())"
CLAIM = "INSERT INTO seeds_sent (key) VALUES (%s) ON CONFLICT (key) DO NOTHING"


def send(host: str, port: int, recipient: str, subject: str, body: str) -> None:
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = MAIL_FROM, recipient, subject
    message.set_content(body)
    with smtplib.SMTP(host, port, timeout=30) as smtp:  # a new connection per email
        smtp.send_message(message)


def night(url: str, host: str, port: int, as_of: date) -> dict[str, int]:
    parsed = make_url(url)
    conn = psycopg2.connect(host=parsed.host, port=parsed.port or 5432, user=parsed.username,
                            password=parsed.password, dbname=parsed.database)
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute(TABLE)
    stats = {"rows": 0, "inserts": 0, "sent": 0}

    cur.execute("SELECT id, vendor, title, amount, currency, renewal_date, notify_email FROM contracts"
                " WHERE status = 'active' AND renewal_date BETWEEN %s AND %s",
                (as_of, as_of + timedelta(days=max(LEADS))))
    for cid, vendor, title, amount, currency, renewal, email in cur.fetchall():
        stats["rows"] += 1
        days_left = (renewal - as_of).days
        lead = min(x for x in LEADS if x >= days_left)
        cur.execute(CLAIM, (f"renewal/{cid}/{renewal.isoformat()}/{lead}d",))
        stats["inserts"] += 1
        if cur.rowcount == 1:
            send(host, port, email, f"{vendor}: {title} renews in {days_left} days",
                 f"{title} with {vendor} renews on {renewal} for {amount} {currency}.")
            stats["sent"] += 1

    cur.execute("SELECT i.id, i.number, i.amount, i.currency, i.sent_at, c.name, c.email"
                " FROM invoices i JOIN clients c ON c.id = i.client_id"
                " WHERE i.paid_at IS NULL AND i.status = 'sent'")
    for iid, number, amount, currency, sent_at, name, email in cur.fetchall():
        stats["rows"] += 1
        days = (as_of - sent_at.date()).days
        step = next((s for d, s in STEPS if days >= d), None)
        if step is None:
            continue
        cur.execute(CLAIM, (f"dunning/{iid}/{step}",))
        stats["inserts"] += 1
        if cur.rowcount == 1:
            send(host, port, ESCALATION_TO if step == "OVERDUE" else email, f"Invoice {number}: {step}",
                 f"Dear {name}, invoice {number} for {amount} {currency} is unpaid.")
            stats["sent"] += 1
    conn.close()
    return stats


def main(argv: list[str]) -> None:
    as_flow = "--flow" in argv
    url, host, port, as_of = [a for a in argv if a != "--flow"]
    started = time.perf_counter()
    if as_flow:
        from prefect import flow

        stats = flow(name="seeds-night")(night)(url, host, int(port), date.fromisoformat(as_of))
    else:
        stats = night(url, host, int(port), date.fromisoformat(as_of))
    print(json.dumps(stats | {"seconds": round(time.perf_counter() - started, 3)}))


if __name__ == "__main__":
    main(sys.argv[1:])
