"""Defaults of the public contract (docs/design.md): the rules' parameters and the settings."""

from __future__ import annotations

from typing import Final

RENEWAL_LEADS = (60, 30, 15)  # days before the renewal date
DUNNING_DELAYS = (7, 5, 7)  # days SENT→REMINDED_1, REMINDED_1→REMINDED_2, REMINDED_2→OVERDUE
# What the first delay counts from (DUEFLOW_DUNNING_START): the day an invoice was sent, as
# dueflow always has — a first reminder may then go before the due date, which `dueflow
# check`, `check --sources`, the dry run and `init-db` say. Kept so that no install's
# nights change under it; a new install is told how to choose `due`.
DUNNING_START: Final = "sent"
RETRY_MAX_ATTEMPTS = 3
RETRY_BACKOFF_MINUTES = 60
# The longest back-off a run takes: a failed email retried more than a month later is a
# typo, not a policy (and the retry time stays far inside what a datetime can hold).
RETRY_BACKOFF_MAX_MINUTES = 30 * 24 * 60
DELIVERY_WORKERS = 4  # parallel SMTP connections; the flow's thread pool is bounded to this

DATABASE_URL = "sqlite:///dueflow.db"
MAIL_URL = "file://./outbox"
MAIL_FROM = "dueflow@localhost"
TIMEZONE = "UTC"
DEFAULT_MODEL = "gpt-4o-mini"
# A mail server that does not answer is seen quickly, and once a night (issue 25):
SMTP_CONNECT_TIMEOUT = 10.0  # seconds for the TCP connection, the greeting, EHLO, TLS and login
SMTP_REPLY_TIMEOUT = 60.0  # seconds for each later reply (MAIL, RCPT, DATA, end of DATA)
SMTP_MAX_CONNECTION_FAILURES = 3  # in a row: delivery stops for the night
DB_LOCK_TIMEOUT = 60.0  # seconds to wait for a SQLite file another process writes to
# Bytes of a bounce report that are read (docs/bounces.md): the delivery status and the
# quoted headers come first; the rest of an enormous report is never held.
MAX_REPORT_BYTES = 1_000_000
# The largest invoice PDF attached (DUEFLOW_INVOICE_PDF_MAX_BYTES): relays commonly refuse
# messages over 10–25 MB, and base64 adds a third. A larger file is never attached in part.
INVOICE_PDF_MAX_BYTES = 10 * 1024 * 1024
INVOICE_PDF_MAX_BYTES_LIMIT = 100 * 1024 * 1024
# DUEFLOW_RETAIN_BODIES_DAYS: at most about a century (a typo of a date is refused).
RETAIN_BODIES_DAYS_LIMIT = 36_500
# The state type of a run whose emails need a person (DUEFLOW_ATTENTION_STATE).
ATTENTION_STATES = ("failed", "completed")
ATTENTION_STATE = "failed"
# The language of what operators read (DUEFLOW_OPERATOR_LANGUAGE): dueflow's own sentences
# are English; the names it takes from elsewhere (public holidays) are asked for in this one.
OPERATOR_LANGUAGE = "en"
# A night that looks wrong (tasks/core/guard.py): a job under this many emails never waits;
# more than FACTOR times the recent nights' median waits; reminding more than the share of
# the open invoices waits; a paused night waits this many seconds for a person (6 hours).
GUARD_MIN_EMAILS = 100
GUARD_FACTOR = 5.0
GUARD_OPEN_SHARE = 0.5
APPROVAL_TIMEOUT = 6 * 3600.0
