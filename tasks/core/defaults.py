"""Defaults of the public contract (docs/design.md): the rules' parameters and the settings."""

from __future__ import annotations

RENEWAL_LEADS = (60, 30, 15)  # days before the renewal date
DUNNING_DELAYS = (7, 5, 7)  # days SENT→REMINDED_1, REMINDED_1→REMINDED_2, REMINDED_2→OVERDUE
RETRY_MAX_ATTEMPTS = 3
RETRY_BACKOFF_MINUTES = 60
DELIVERY_WORKERS = 4  # parallel SMTP connections; the flow's thread pool is bounded to this

DATABASE_URL = "sqlite:///dueflow.db"
MAIL_URL = "file://./outbox"
MAIL_FROM = "dueflow@localhost"
TIMEZONE = "UTC"
DEFAULT_MODEL = "gpt-4o-mini"
DB_LOCK_TIMEOUT = 60.0  # seconds to wait for a SQLite file another process writes to
SCHEDULE_CRON = "0 6 * * *"
# Bytes of a bounce report that are read (docs/bounces.md): the delivery status and the
# quoted headers come first; the rest of an enormous report is never held.
MAX_REPORT_BYTES = 1_000_000
