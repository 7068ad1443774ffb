"""dueflow's delivery alone: the emails a first night sent, sent again by tasks/deliver.py
with nothing else in the process — no Prefect, no composing — to the same sink.

    python -m bench.delivery_alone DATABASE_URL AS_OF WORKERS

The night's sent rows are put back as they were before their claim (pending, their message
stored, unclaimed) — the benchmark's own database, never a user's —, then
`deliver_one_batch` runs over `batches(keys, WORKERS)` on WORKERS threads, as the flow's
pool runs them, with the mail settings of the environment (DUEFLOW_MAIL_URL, ...). Prints
one JSON line {emails, sent, workers, seconds, per_second}; seconds run from the first claim
to the last outcome recorded. Between the night (everything) and the mail path (a bare
client), it says what the delivery's own work costs: its claims and outcomes in the ledger,
building each message from its stored text.
"""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import date

import sqlalchemy as sa

PUT_BACK = """UPDATE dueflow_ledger SET status = 'pending', sending_at = NULL, claim_token = NULL,
attempts = 0 WHERE status = 'sent' AND body_text IS NOT NULL"""
UNCLAIMED = """SELECT key, recipient FROM dueflow_ledger WHERE status = 'pending' AND sending_at IS NULL
AND body_text IS NOT NULL AND (statement_key IS NULL OR statement_key = key) ORDER BY key"""


def main(argv: list[str]) -> None:
    url, as_of, workers = argv[0], date.fromisoformat(argv[1]), int(argv[2])
    from dueflow.blocks.settings import Settings
    from dueflow.tasks.adapters.sql_store import ledger_of
    from dueflow.tasks.deliver import DeliverySettings, Recipient, batches, deliver_one_batch

    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text(PUT_BACK))
        items = [Recipient(key, recipient) for key, recipient in conn.execute(sa.text(UNCLAIMED))]
    engine.dispose()
    settings = Settings.from_env()
    delivery = DeliverySettings(settings.mail_config(), settings.sender(), ledger_of(settings), as_of)
    groups = batches(items, workers)
    started = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        done = [d for result in [pool.submit(deliver_one_batch, g, delivery) for g in groups]
                for d in result.result()]
    seconds = time.perf_counter() - started
    sent = sum(1 for d in done if d.status == "sent")
    print(json.dumps({"emails": len(items), "sent": sent, "workers": workers, "seconds": round(seconds, 3),
                      "per_second": round(sent / seconds, 1) if seconds else None}))


if __name__ == "__main__":
    main(sys.argv[1:])
