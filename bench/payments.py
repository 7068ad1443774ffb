"""The big first night with and without a payments relation (issue 43), in one process.

    .venv/bin/python -m bench.payments --scale 1 --runs 3 [--reuse-data]

The data shape of bench/nights.py at scale k (k·1M invoices, 2,000 renewals and 1,000
first reminders due tonight, k·120,000 open invoices) in PostgreSQL, plus a `payments`
relation of the company's own (no key, an index on invoice_id as `dueflow check
--sources` advises) with one payment row for a third of the invoices: a part payment on a
third of tonight's reminders, and old payments on paid invoices for the rest.

Each run empties dueflow's tables and times a whole first night (the real night of
tasks/night.py, its steps called directly, its mail handed to a sink that answers 250):
alternately without the relation (renamed aside: an absent optional source) and with it. The
medians are printed with their ratio; the issue asks for the night with payments within
10 % of the night without.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from datetime import date
from types import TracebackType
from typing import Any

from bench.nights import AS_OF, ESCALATION_TO, MAIL_FROM, Shape, ensure_data, log, psql, reset_ledgers

PAYMENTS = [
    "DROP TABLE IF EXISTS payments, payments_aside",
    "CREATE TABLE payments (invoice_id text, amount numeric, currency text, received_at date)",
    # One payment row for every third invoice: tonight's reminders among them get a part
    # payment (a third of the amount), the others an old payment.
    """INSERT INTO payments
       SELECT i.id, round(i.amount / 3, 2), i.currency, DATE '{as_of}' - 2 - CAST(g % 20 AS integer)
       FROM generate_series(1, (SELECT count(*) FROM invoices)) g
       JOIN invoices i ON i.id = 'i' || lpad(g::text, 9, '0')
       WHERE g % 3 = 0""",
    "CREATE INDEX payments_invoice ON payments (invoice_id)",
    "VACUUM ANALYZE payments",
]


class Sink:
    """A mail server that accepts everything at once (what is measured is the night)."""

    def send(self, email: Any) -> Any:
        from dueflow.tasks.core.statuses import SendResult, SendStatus

        return SendResult(SendStatus.SENT, "250 accepted")

    def __enter__(self) -> Sink:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        return None


def first_night(url: str, as_of: date) -> tuple[float, int]:
    """One first night on empty ledgers: seconds, emails sent."""
    from dueflow.blocks.endpoints import parse_mail_url
    from dueflow.blocks.settings import Settings
    from dueflow.tasks.adapters.db import Database
    from dueflow.tasks.adapters.sql_store import sql_store
    from dueflow.tasks.core.parameters import run_parameters
    from dueflow.tasks.deliver import DeliverySettings
    from dueflow.tasks.jobs import night_jobs
    from dueflow.tasks.night import Direct, Night, run_night

    reset_ledgers(url)
    psql(url.rsplit("/", 1)[1], "CHECKPOINT")  # the truncation's writes are not the night's
    started = time.perf_counter()
    settings = Settings.from_env({"DUEFLOW_DATABASE_URL": url, "DUEFLOW_MAIL_FROM": MAIL_FROM,
                                  "DUEFLOW_ESCALATION_TO": ESCALATION_TO, "DUEFLOW_GUARD": "off"})
    store = sql_store(Database(url).with_sources())
    params = run_parameters(renewal_leads=[60, 30, 15], dunning_delays=[7, 5, 7], dunning_start="sent",
                            renewal_locale="en", retry_max_attempts=5, retry_backoff_minutes=30,
                            send_cap=None, adopt=False, dry_run=False)
    delivery = DeliverySettings(parse_mail_url("smtp://127.0.0.1:1"), settings.sender(), store.ledger, as_of,
                                params.retry_backoff, settings.smtp_max_failures,
                                transports=lambda mail, sender, breaker: Sink())
    night = Night(night_jobs(settings, params, "bench"), store, delivery, as_of, params, "bench", None, as_of,
                  logging.getLogger("bench.payments"))
    summary = run_night(night, Direct())
    return time.perf_counter() - started, summary.sent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.payments", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0, help="the shape of bench/nights.py at this scale")
    parser.add_argument("--runs", type=int, default=3, help="first nights of each kind (medians)")
    parser.add_argument("--reuse-data", action="store_true", help="keep the generated shape if it is there")
    args = parser.parse_args(argv)
    shape = Shape.scaled(args.scale)
    url, _ = ensure_data(shape, f"payments-{args.scale:g}", AS_OF, args.reuse_data)
    name = url.rsplit("/", 1)[1]
    from dueflow.tasks.adapters import db

    db.init_db(db.engine_for(url))
    times: dict[str, list[float]] = {"without": [], "with": []}
    sent: dict[str, int] = {}
    # The relation is made once; a night without it finds it renamed aside (an absent
    # optional source), so that no night is measured right after 333,333 rows were written.
    psql(name, *(sql.format(as_of=AS_OF.isoformat()) for sql in PAYMENTS), "CHECKPOINT")
    first_night(url, AS_OF)  # warm: imports, caches, the database's own
    for run in range(args.runs):
        for kind in (("without", "with") if run % 2 == 0 else ("with", "without")):
            aside = ("payments_aside", "payments") if kind == "with" else ("payments", "payments_aside")
            psql(name, f"ALTER TABLE IF EXISTS {aside[0]} RENAME TO {aside[1]}")
            seconds, sent[kind] = first_night(url, AS_OF)
            times[kind].append(seconds)
            log(f"run {run + 1}: {kind} payments: {seconds:.2f} s, {sent[kind]:,} sent")
    psql(name, "ALTER TABLE IF EXISTS payments_aside RENAME TO payments")
    rows = psql(name, "SELECT count(*) FROM payments")[0][0][0]
    without, with_ = statistics.median(times["without"]), statistics.median(times["with"])
    print(f"shape: {shape.invoices:,} invoices ({shape.reminders_due:,} first reminders due),"
          f" {rows:,} payment rows")
    for kind, seconds in (("without", without), ("with", with_)):
        print(f"first night {kind + ' payments:':<18} {seconds:.2f} s (median of {args.runs}),"
              f" {sent[kind]:,} sent")
    print(f"ratio: {with_ / without:.3f} ({(with_ / without - 1) * 100:+.1f} %)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
