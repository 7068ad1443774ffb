"""`dueflow check`: is this environment set up right before tonight's run?

Each item is checked the way a run would use it, and nothing is written or sent:

- settings: every variable parses (time zone, sender, escalation address, lock timeout);
- Prefect: the API answers when PREFECT_API_URL is set, and the blocks named load;
- database: reachable, and the tables and columns a run needs are there;
- mail: connect, EHLO, STARTTLS or TLS and login as configured, then MAIL FROM and RSET
  (the server's answer to the sender, without a message); a file outbox must be writable;
- LLM: when configured, the endpoint lists its models (no drafting) and offers the model;
- phrasebook: the reminders' reviewed sentences, dueflow's and the company's own, cover every
  step and tone (`--phrasebook` lists every sentence for review);
- templates: every email kind renders in every locale with sample values, from sample rows
  decided by the same rules as real ones, into a well-formed wire message.

One `Check` per item: ok, or a problem and how to fix it. No secret is ever in the text:
URLs are shown with `***` for passwords, and every password and key is scrubbed.
"""

from __future__ import annotations

import os
import smtplib
import ssl
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from dueflow.blocks.errors import ConfigError
from dueflow.blocks.settings import Settings, redact_url
from dueflow.blocks.table import SETTINGS, VARIABLES
from dueflow.tasks.core import defaults
from dueflow.tasks.core.addresses import Mailbox
from dueflow.tasks.core.dunning_rule import due_dunning_steps
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.llm_guard import rule_drafts
from dueflow.tasks.core.locales import SUPPORTED_LOCALES
from dueflow.tasks.core.message import message_bytes
from dueflow.tasks.core.parameters import default_parameters
from dueflow.tasks.core.phrasebook import DRAFTED_STEPS, Phrasebook, default_phrasebook
from dueflow.tasks.core.render import Composed, EmailLook, compose_dunning_emails, compose_renewal_alerts
from dueflow.tasks.core.renewal_rule import due_renewal_alerts

TIMEOUT = 10.0  # seconds for each network check
SAMPLE_ESCALATION = "escalations@example.com"


@dataclass(frozen=True)
class Check:
    """One item: ok, or a problem with its fix."""

    item: str
    ok: bool
    detail: str
    fix: str | None = None
    warning: bool = False  # ok to run, but a person should look (the command still exits 0)

    def line(self) -> str:
        label = "problem" if not self.ok else "warning" if self.warning else "ok"
        text = f"{label:<8} {self.item}: {self.detail}"
        return text + (f" — fix: {self.fix}" if self.fix and (not self.ok or self.warning) else "")


def _reason(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:300]


# -- settings ---------------------------------------------------------------------------------

def check_settings(env: dict[str, str]) -> tuple[list[Check], Settings | None]:
    """The variables, each checked alone through the same parsing as a run (one line per
    bad variable); and the settings when all are usable, together too."""
    problems = []
    for name in VARIABLES:
        if not env.get(name):
            continue
        try:
            Settings.from_env({name: env[name]})
        except ConfigError as exc:
            problems.append(Check(f"setting {name}", False, str(exc), f"correct or unset {name}"))
    if problems:
        return problems, None
    try:
        settings = Settings.from_env(env)
    except ConfigError as exc:  # each alone is usable, not all together
        return [Check("settings", False, str(exc), "correct the settings it names")], None
    escalation = settings.escalation_address()
    checks = [Check("settings", True, f"time zone {settings.timezone} (today {settings.today()}),"
                    f" sender {settings.sender().address}")]
    if reply := unanswerable_sender(settings):
        checks.append(reply)
    if escalation is None:
        checks.append(Check("setting DUEFLOW_ESCALATION_TO", False,
                            "not set: OVERDUE escalations are quarantined until it is",
                            "set DUEFLOW_ESCALATION_TO=collections@yourcompany.example"))
    else:
        checks.append(Check("setting DUEFLOW_ESCALATION_TO", True, f"escalations go to {escalation}"))
    checks.append(dunning_start_check(settings, bool((env.get("DUEFLOW_DUNNING_START") or "").strip())))
    rules = dunning_rules_line(settings)
    if rules:
        checks.append(Check("dunning rules", True, rules))
    return checks, settings


def dunning_start_check(settings: Settings, chosen: bool) -> Check:
    """Which start is in force and which of its three places wins; a warning while nobody
    chose it and reminders may go before their due date (issue 38)."""
    from dueflow.tasks.core.dunning_start import start_in_force

    unchosen = not chosen and settings.dunning_start == "sent"
    return Check("dunning start", True, start_in_force(settings.dunning_start, chosen, settings.profiles()),
                 "set DUEFLOW_DUNNING_START=due or =sent, whichever you mean" if unchosen else None,
                 warning=unchosen)


# Domains no client's mail can reach: a reply to them is lost.
LOCAL_ONLY_DOMAINS = ("localhost", "localdomain", "local", "internal", "invalid", "test", "lan", "home.arpa")


def local_only(address: str) -> bool:
    """Whether the address is on a domain mail from outside cannot reach (`@localhost`,
    `.local`, a bare host name without a dot)."""
    domain = address.rpartition("@")[2].strip().lower().rstrip(".")
    return "." not in domain or domain.endswith(tuple(f".{d}" for d in LOCAL_ONLY_DOMAINS)) or (
        domain in LOCAL_ONLY_DOMAINS)


def unanswerable_sender(settings: Settings) -> Check | None:
    """A warning when the address a client's reply goes to (DUEFLOW_REPLY_TO, else the
    sender) is one no client can write to — the reminders say "just reply to this email"."""
    sender = settings.sender()
    answer = sender.reply_to.address if sender.reply_to else sender.address
    if not local_only(answer):
        return None
    why = (f"DUEFLOW_REPLY_TO {answer} is on a local-only domain" if sender.reply_to else
           f"the sender {answer} is on a local-only domain and DUEFLOW_REPLY_TO is not set")
    return Check("reply address", True, f"{why}: a client who answers a reminder reaches no one",
                 "set DUEFLOW_MAIL_FROM to your company's address, or DUEFLOW_REPLY_TO to the mailbox"
                 " that reads the replies (e.g. accounts@yourcompany.example)", warning=True)


def dunning_rules_line(settings: Settings) -> str:
    """The calendar, minimums and profiles in one line ('' when none is set): which days
    emails go out, and whether today is one."""
    parts = []
    calendar = settings.calendar()
    if calendar is not None:
        today = settings.today()
        why = calendar.why_closed(today)
        days = [name[:3].lower() for name, on in zip(("Monday", "Tuesday", "Wednesday", "Thursday", "Friday",
                                                      "Saturday", "Sunday"), calendar.weekmask, strict=True)
                if on == "1"]
        parts.append(f"business days {','.join(days)}"
                     + (f", holidays {calendar.country}{'-' + calendar.subdiv if calendar.subdiv else ''}"
                        if calendar.country else "")
                     + (f", {len(calendar.closed)} closed day(s)" if calendar.closed else "")
                     + (f"; today is closed ({why}): emails wait for {calendar.next_open(today)}" if why
                        else "; today is a business day")
                     + ("; renewal alerts on any day" if settings.renewal_on_any_day else ""))
    minimums = settings.minimums()
    if minimums:
        parts.append("no reminder below " + ", ".join(f"{c} {m}" for c, m in minimums.items()))
    named = settings.profiles().named
    if named:
        parts.append(f"profiles {', '.join(sorted(named))}")
    return "; ".join(parts)


# -- Prefect ----------------------------------------------------------------------------------

def check_prefect(env: dict[str, str]) -> Check:
    api = (env.get("PREFECT_API_URL") or "").strip()
    if not api:
        return Check("Prefect API", True, "PREFECT_API_URL not set: each run starts a temporary"
                     " local server (set it to see runs in a Prefect UI)")
    import httpx

    key = (env.get("PREFECT_API_KEY") or "").strip()
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    fix = "start it (`prefect server start`) or correct PREFECT_API_URL"
    try:
        with httpx.Client(base_url=api.rstrip("/"), headers=headers, timeout=TIMEOUT) as client:
            health = client.get("/health")
            version = client.get("/admin/version") if health.status_code == 200 else None
    except httpx.HTTPError as exc:
        return Check("Prefect API", False, f"{api} does not answer: {_reason(exc)}", fix)
    if health.status_code in (401, 403):
        return Check("Prefect API", False, f"{api} refuses this client (HTTP {health.status_code})",
                     "check PREFECT_API_KEY")
    if health.status_code != 200:
        return Check("Prefect API", False, f"{api}/health answered HTTP {health.status_code}", fix)
    server = version.json() if version is not None and version.status_code == 200 else "unknown"
    return Check("Prefect API", True, f"{api} answers (server {server})")


def check_blocks(settings: Settings) -> tuple[Check | None, Settings]:
    """The Prefect blocks the settings name, loaded: the settings a run would use."""
    named = [name for row in SETTINGS if row.names and (name := getattr(settings, row.field))]
    if not named:
        return None, settings
    try:
        loaded = settings.with_blocks()
    except Exception as exc:
        return Check("Prefect blocks", False, _reason(exc),
                     "create the block (`prefect block register -m dueflow.blocks.prefect_blocks`,"
                     " then in the UI) or correct DUEFLOW_*_BLOCK"), settings
    return Check("Prefect blocks", True, "loaded " + ", ".join(named)), loaded


# -- database ---------------------------------------------------------------------------------

def check_database(settings: Settings) -> list[Check]:
    """The database answers, dueflow's own tables are at this version and writable, the
    sources can be read — each as a run would: every statement of the night planned, a
    write to dueflow's tables in a rolled-back transaction, and a timed read of each
    source (tonight's extract), so that a read-only user or a statement timeout shows here,
    not at night."""
    from sqlalchemy.exc import SQLAlchemyError

    from dueflow.tasks.adapters import db
    from dueflow.tasks.adapters.sources import SourceError, explain_night

    where = redact_url(settings.database_url)
    item = f"database {where}"
    try:
        engine = db.engine_for(settings.database_url, settings.db_lock_timeout, settings.ledger_schema)
    except ConfigError as exc:
        return [Check(item, False, str(exc), "correct DUEFLOW_DATABASE_URL")]
    path = engine.url.database if engine.dialect.name == "sqlite" else None
    if path and path != ":memory:" and not Path(path).exists():  # connecting would create it
        return [Check(item, False, f"the file {path} does not exist", "run `dueflow init-db`")]
    try:
        problems = db.ledger_problems(engine)
        version = db.ledger_version(engine)
    except SQLAlchemyError as exc:
        return [Check(item, False, f"cannot connect: {_reason(exc)}",
                      "check DUEFLOW_DATABASE_URL (host, port, user, password) and that the server runs")]
    # The sources are checked with or without dueflow's own tables: each problem its own line
    # (each problem's text says its fix), and a read of the sources as a first night would.
    checks = ([Check(item, True, "reachable"), Check("ledger", False, "; ".join(problems))]
              if problems else [Check(item, True, f"reachable; ledger at version {version.head}")])
    database = db.Database(settings.database_url, settings.db_lock_timeout, settings.ledger_schema)
    try:
        database = database.with_sources(settings.source_mapping(), settings.source_schema, settings.timezone)
    except SourceError as exc:
        return checks + [Check(f"source {p.source}", False, p.detail, p.fix) for p in exc.problems]
    except ConfigError as exc:
        return [*checks, Check("sources", False, str(exc), "correct DUEFLOW_SOURCES_FILE")]
    assert database.sources is not None
    if problems:  # no ledger (or not this dueflow's) to plan the night's statements against
        return [*checks, _timed_read(database, settings, ledger=False)]
    planned = explain_night(engine, database.sources)
    checks += [Check(f"source {p.source}", False, p.detail, p.fix) for p in planned]
    checks.append(_write_probe(database))
    if not planned:
        checks += [_timed_read(database, settings)]
    return checks


def night_store(database: Any, ledger: bool = True) -> Any:
    """The store a check reads the sources through: the database's, or, before its ledger is
    made (`ledger=False`), the sources with an empty ledger in memory — a first night."""
    from dueflow.tasks.adapters.memory import MemoryLedger, MemorySources
    from dueflow.tasks.adapters.sql_store import FirstNightSources, sql_store
    from dueflow.tasks.core.ports import Store

    if ledger:
        return sql_store(database)
    return Store(MemoryLedger(MemorySources.of()), FirstNightSources(database))


def _write_probe(database: Any) -> Check:
    from sqlalchemy import text
    from sqlalchemy.exc import DBAPIError

    from dueflow.sql import statement
    from dueflow.tasks.adapters import db_errors

    try:
        with database.engine.connect().execution_options(dueflow_write=True) as conn:
            conn.execute(text(statement("write_probe")))
            conn.rollback()
    except DBAPIError as exc:
        line = db_errors.database_problem(exc, "cannot write")
        detail, _, fix = line.partition(" — fix: ")
        return Check("dueflow's tables", False, detail, fix)
    return Check("dueflow's tables", True, "writable (a write tried in a transaction rolled back)")


def _timed_read(database: Any, settings: Settings, ledger: bool = True) -> Check:
    """Tonight's extract of each job, as a run reads it, timed (`ledger=False`: none yet)."""
    import time

    from sqlalchemy.exc import DBAPIError

    from dueflow.tasks.adapters import db_errors
    from dueflow.tasks.jobs import DunningJob, night_jobs

    today = settings.today()
    renewal, _ = night_jobs(settings, default_parameters(settings.dunning_start))
    started = time.monotonic()
    try:
        renewals = renewal.extract(night_store(database, ledger), today)
        dunning = DunningJob.extract_all(night_store(database, ledger), today)
    except DBAPIError as exc:
        line = db_errors.database_problem(exc, "reading tonight's source rows failed")
        detail, _, fix = line.partition(" — fix: ")
        return Check("sources", False, detail, fix)
    seconds = time.monotonic() - started
    notes = "; ".join(database.sources.notes) if database.sources.notes else ""
    return Check("sources", True, f"read in {seconds:.1f} s: {len(renewals['contracts']):,} contract(s),"
                 f" {len(dunning['invoices']):,} open invoice(s), {len(dunning['clients']):,} client(s)"
                 f" tonight ({database.sources.mapping_origin}"
                 + ("" if ledger else "; no ledger yet: as a first night") + ")"
                 + (f"; note: {notes}" if notes else ""))


def sources_report(settings: Settings) -> list[str]:
    """`dueflow check --sources`: how each source is read (relation, each column with where
    it comes from and the type seen), what tonight's real extract and rules make of the
    rows (read, quarantined and why, due), and the indexes that would help."""
    from dueflow.tasks.adapters import db
    from dueflow.tasks.adapters.sources import ABSENT, SourceError, index_advice
    from dueflow.tasks.core.dunning_start import before_due, before_due_line
    from dueflow.tasks.jobs import night_jobs
    from dueflow.tasks.operations import sqlite_missing

    database = db.Database(settings.database_url, settings.db_lock_timeout, settings.ledger_schema)
    if sqlite_missing(settings):  # looking would create the file
        return ["", "Sources: not readable (see the problems above)."]
    ledger = not db.ledger_problems(database.engine)
    try:
        database = database.with_sources(settings.source_mapping(), settings.source_schema, settings.timezone)
    except (SourceError, ConfigError):
        return ["", "Sources: not readable (see the problems above)."]
    sources = database.sources
    assert sources is not None
    lines = ["", f"Sources ({sources.mapping_origin}):"]
    for source in sources.sources.values():
        if source.kind == ABSENT:
            lines.append(f"  {source.name}: none (optional: docs/your-data.md, What the client still owes)")
            continue
        lines.append(f"  {source.name} ← {source.qualified} ({source.kind})")
        shown = [c for c in source.columns if c.origin != "(not used)"]
        width = max(len(c.column) for c in shown)
        for column in shown:
            seen = f"  [{column.type_seen}]" if column.type_seen else ""
            lines.append(f"    {column.column:<{width}} ← {column.origin}{seen}")
    lines += [f"  note: {note}" for note in sources.notes]

    today = settings.today()
    renewal_job, dunning_job = night_jobs(settings, default_parameters(settings.dunning_start))
    store = night_store(database, ledger)
    renewals = renewal_job.extract(store, today)
    renewal = renewal_job.decide(renewals, today)
    dunning = dunning_job.extract_all(store, today)
    reminders = dunning_job.decide(dunning, today)
    lines += ["", f"Tonight ({today}), through the real extract and rules (default parameters, dunning start"
              f" {settings.dunning_start}; {'' if ledger else 'no ledger yet: as a first night; '}nothing"
              " written):"]
    for job, read, decision in (("renewal", renewals["contracts"], renewal),
                                ("dunning", dunning["invoices"], reminders)):
        quarantined = decision.quarantined
        lines.append(f"  {job}: {len(read):,} row(s) read, {len(read) - len(quarantined):,} decode,"
                     f" {len(quarantined):,} would be quarantined, {len(decision.to_reserve):,} due"
                     f" tonight ({int(decision.due['handled'].sum()):,} more already handled)")
        for reason, count in quarantined["reason"].value_counts().head(5).items():
            lines.append(f"    {count:>6,} × {reason}")
    if early := before_due_line(before_due(reminders.to_reserve, today), settings.dunning_start):
        lines.append(f"  {early}")
    advice = index_advice(database.engine, sources, dunning_job.candidates_start())
    if advice:
        lines += ["", "Indexes the night relies on (dueflow creates none on your relations):"]
        for item in advice:
            if item.statement:
                lines.append(f"  {item.source}: missing for {item.purpose}: {item.statement}")
            elif item.note:
                lines.append(f"  {item.source}: {item.note}")
            else:
                lines.append(f"  {item.source}: ok for {item.purpose}")
    return lines


# -- mail -------------------------------------------------------------------------------------

def _writable_folder(directory: Path) -> Check:
    item = f"mail to the folder {directory}/"
    existing = directory
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return Check(item, False, f"{existing} is not a folder", "point DUEFLOW_MAIL_URL at a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        return Check(item, False, f"{existing} is not writable by this user",
                     "make it writable or point DUEFLOW_MAIL_URL elsewhere")
    made = "" if existing == directory else " (created by the first run)"
    return Check(item, True, f"writable{made}")


def check_mail(settings: Settings) -> Check:
    from dueflow.tasks.adapters.mail import SmtpTransport

    try:
        config = settings.mail_config()
    except ConfigError as exc:
        return Check("mail", False, str(exc), "correct DUEFLOW_MAIL_URL")
    if config.scheme == "file":
        assert config.directory is not None
        return _writable_folder(config.directory)
    item = f"mail server {config.describe()}"
    steps = ["TLS"] if config.scheme == "smtps" else []
    steps += ["EHLO"] + (["STARTTLS"] if config.scheme == "smtp+starttls" else [])
    steps += [f"login as {config.username}"] if config.username else []
    waited = min(config.connect_timeout, TIMEOUT)
    transport = SmtpTransport(replace(config, connect_timeout=waited,
                                      reply_timeout=min(config.reply_timeout, TIMEOUT)), settings.sender())
    fix_url = "check the host and port in DUEFLOW_MAIL_URL and that the server runs"
    try:
        code, reply = transport.handshake()
    except smtplib.SMTPAuthenticationError as exc:
        return Check(item, False, f"login refused: {exc.smtp_code} {_smtp_error(exc)}",
                     "check the user and password in DUEFLOW_MAIL_URL")
    except smtplib.SMTPNotSupportedError as exc:
        return Check(item, False, f"the server does not offer what the URL asks: {_reason(exc)}",
                     "use smtp+starttls:// only where the server offers STARTTLS, and a user only"
                     " where it offers AUTH")
    except ssl.SSLCertVerificationError as exc:
        return Check(item, False, f"its TLS certificate is not trusted: {exc.verify_message}",
                     "add ?cafile=/path/to/ca.pem to DUEFLOW_MAIL_URL for a private CA,"
                     " or fix the server's certificate")
    except ssl.SSLError as exc:
        return Check(item, False, f"TLS handshake failed: {_reason(exc)}",
                     "smtps:// is TLS from the first byte (port 465); smtp+starttls:// upgrades a"
                     " plain connection (port 587): use the one the server speaks")
    except TimeoutError:
        return Check(item, False, f"no answer within {waited:g} s", fix_url)
    except (smtplib.SMTPException, OSError) as exc:
        return Check(item, False, f"cannot connect: {_reason(exc)}", fix_url)
    if code != 250:
        return Check(item, False, f"{', '.join(steps)} ok, but the server refuses the sender"
                     f" {settings.sender().address}: {reply}",
                     "give DUEFLOW_MAIL_URL the user and password the server wants, or set"
                     " DUEFLOW_MAIL_FROM to an address it accepts")
    return Check(item, True, f"{', '.join(steps)} ok; sender {settings.sender().address}"
                 " accepted (nothing sent)")


def check_bounces(settings: Settings) -> Check | None:
    """The bounce mailbox, when one is configured: log in and find the folder (IMAP), or
    find the Maildir or mbox; no message is read or marked (docs/bounces.md)."""
    from dueflow.tasks.adapters.mailbox import MailboxError, open_mailbox

    item = "bounce mailbox"
    try:
        config = settings.bounce_mailbox()
    except ConfigError as exc:
        return Check(item, False, str(exc), "correct DUEFLOW_BOUNCE_URL")
    if config is None:
        return None
    try:
        with open_mailbox(replace(config, timeout=min(config.timeout, TIMEOUT))) as box:
            detail = box.check()
    except MailboxError as exc:
        return Check(item, False, str(exc), "correct DUEFLOW_BOUNCE_URL (user, password, host, folder)")
    envelope = settings.sender().envelope_address
    return Check(item, True, f"{config.describe()}: {detail}; bounces come back to {envelope}"
                 + ("" if settings.bounce_address else " (set DUEFLOW_BOUNCE_ADDRESS to send them here)"))


def _smtp_error(exc: smtplib.SMTPResponseException) -> str:
    error = exc.smtp_error
    return (error.decode(errors="replace") if isinstance(error, bytes) else str(error)).strip()


# -- LLM --------------------------------------------------------------------------------------

def check_llm(settings: Settings) -> Check:
    llm = settings.llm
    if llm is None:
        return Check("LLM", True, "off (no OPENAI_API_KEY): dueflow's rule plans every reminder's paragraph")
    import openai

    where = llm.base_url or "the OpenAI API"
    item = f"LLM {where}"
    client = openai.OpenAI(api_key=llm.api_key, base_url=llm.base_url, timeout=TIMEOUT, max_retries=0)
    try:
        models = sorted(model.id for model in client.models.list())
    except openai.AuthenticationError as exc:
        return Check(item, False, f"the API key is refused (HTTP {exc.status_code})",
                     "check OPENAI_API_KEY (or the DueflowLLM block)")
    except openai.APIStatusError as exc:
        return Check(item, False, f"listing the models failed: HTTP {exc.status_code}",
                     "check OPENAI_BASE_URL: it should end in /v1 for most OpenAI-compatible servers")
    except openai.APIConnectionError as exc:
        cause = exc.__cause__ or exc
        return Check(item, False, f"unreachable: {_reason(cause)}",
                     "check OPENAI_BASE_URL and that the server runs")
    finally:
        client.close()
    if llm.model not in models:
        offered = ", ".join(models[:8]) + (" …" if len(models) > 8 else "") or "none"
        return Check(item, False, f"the model {llm.model} is not offered (offered: {offered})",
                     "set DUEFLOW_LLM_MODEL to one the endpoint offers")
    return Check(item, True, f"reachable; model {llm.model} offered (nothing drafted)")


# -- templates --------------------------------------------------------------------------------

def sample_emails(sender: Mailbox, escalation_to: str, today: date,
                  look: EmailLook | None = None, book: Phrasebook | None = None) -> Composed:
    """Every kind of email in every locale, from sample source rows decided by the rules:
    a renewal alert per locale, both reminders per client locale (their paragraphs planned
    from `book` by dueflow's rule), and the escalation."""
    book = book or default_phrasebook()
    contracts = pd.DataFrame([{
        "id": "sample-contract", "vendor": "Sample Vendor", "title": "Sample service", "amount": "1250.50",
        "currency": "EUR", "renewal_date": (today + timedelta(days=30)).isoformat(),
        "notify_email": "owner@example.com", "status": "active"}])
    no_history = pd.DataFrame(columns=["subject_id", "cycle", "handled_rank"])
    renewal = due_renewal_alerts(contracts, no_history, today, defaults.RENEWAL_LEADS).due
    composed = Composed()
    for locale in SUPPORTED_LOCALES:
        composed += compose_renewal_alerts(renewal, locale, sender, look)

    clients = pd.DataFrame([{"id": f"client-{locale}", "name": f"Sample Client ({locale})",
                             "email": f"ap-{locale}@example.com", "locale": locale,
                             "notes": None, "dunning_paused": False} for locale in SUPPORTED_LOCALES])
    sent_at = (today - timedelta(days=60)).isoformat() + "T09:00:00+00:00"
    invoices, history = [], []
    for locale in SUPPORTED_LOCALES:
        for rank in range(3):  # no step yet, REMINDED_1 sent, REMINDED_2 sent
            invoice_id = f"sample-{locale}-{rank}"
            invoices.append({"id": invoice_id, "client_id": f"client-{locale}", "number": f"S-{rank}",
                             "amount": "980.40", "currency": "EUR", "status": "sent",
                             "sent_at": sent_at, "due_date": (today - timedelta(days=30)).isoformat(),
                             "paid_at": None})
            history += [{"subject_id": invoice_id, "step": step, "step_rank": n + 1,
                         "as_of": (today - timedelta(days=20)).isoformat(), "attempt_as_of": None,
                         "status": "sent"} for n, step in enumerate(DRAFTED_STEPS[:rank])]
    steps = pd.DataFrame(history, columns=["subject_id", "step", "step_rank", "as_of", "attempt_as_of",
                                           "status"])
    due = due_dunning_steps(pd.DataFrame(invoices), clients, steps, today,
                            escalation_to=escalation_to).due
    drafts = {d.key: d for d in rule_drafts(due, pd.DataFrame(), today, book)}
    return composed + compose_dunning_emails(due, steps, sender, drafts, today, look)


def check_templates(settings: Settings) -> Check:
    sender = settings.sender()
    try:
        composed = sample_emails(sender, settings.escalation_address() or SAMPLE_ESCALATION,
                                 settings.today(), settings.email_look(), settings.phrasebook())
        failures = list(composed.failures)
        for email in composed.emails:
            try:
                message_bytes(email, sender)
            except ValueError as exc:
                failures.append((email.key, f"not a valid message: {exc}"))
    except Exception as exc:  # a broken template environment, a missing file
        failures = [("templates", _reason(exc))]
        composed = Composed()
    expected = 4 * len(SUPPORTED_LOCALES)  # a renewal alert, two reminders, an escalation
    if failures:
        return Check("templates", False, "; ".join(f"{key}: {why}" for key, why in failures[:3]),
                     "fix the template named (tasks/templates/)")
    if len(composed.emails) != expected:
        return Check("templates", False,
                     f"{len(composed.emails)} sample emails rendered, expected {expected}",
                     "the sample rows no longer cover every step: update tasks/check.py")
    kinds = (f"renewal alert and reminders 1 and 2 in {', '.join(SUPPORTED_LOCALES)},"
             " the escalation")
    return Check("templates", True, f"{len(composed.emails)} sample emails render ({kinds})")


def check_phrasebook(settings: Settings) -> Check:
    """The reminders' reviewed sentences (dueflow's, and the company's own): how many each
    locale has, and what a night would do without (a kind of client with no opening, a
    tone with no closing). A phrasebook that cannot be used never gets here: the settings
    refuse it, one line naming the sentence and the fix."""
    book = settings.phrasebook()
    sizes = ", ".join(f"{locale} {len(book.of(locale))}" for locale in SUPPORTED_LOCALES)
    yours = [s for s in book.sentences if s.origin != "dueflow"]
    detail = (f"{sizes} sentences ({book.origin}{f': {len(yours)} of yours' if yours else ''}); every step"
              " and tone has a body sentence; `dueflow check --phrasebook` lists them for review")
    gaps = book.gaps()
    if gaps:
        return Check("phrasebook", True, detail + f"; such paragraphs go without: {'; '.join(gaps[:3])}"
                     + (f" and {len(gaps) - 3} more" if len(gaps) > 3 else ""),
                     "add an opening for each kind of client and a closing for each tone", warning=True)
    return Check("phrasebook", True, detail)


def phrasebook_report(settings: Settings) -> list[str]:
    """`dueflow check --phrasebook`: every sentence a reminder may say, for review — by
    locale and slot, with what it may be chosen for and whose it is."""
    from dueflow.tasks.core.phrasebook import DRAFTED_STEPS, Relationship, Tone, listing

    def named(values: frozenset, every: tuple, what: str) -> str:
        return f"every {what}" if set(values) == set(every) else ", ".join(sorted(str(v) for v in values))

    book = settings.phrasebook()
    lines = ["", f"Phrasebook ({book.origin}): what a reminder's paragraph may say, as written"]
    for locale, sentences in listing(book).items():
        lines += ["", f"  {locale} ({len(sentences)} sentences)"]
        for s in sentences:
            where = [named(s.steps, DRAFTED_STEPS, "step"), named(s.tones, tuple(Tone), "tone")]
            if s.slot == "opening":
                where.append(named(s.fits, tuple(Relationship), "client"))
            mine = "" if s.origin == "dueflow" else f"; {s.origin}"
            lines += [f"    {s.slot.value:<8} {s.id}  ({'; '.join(where)}{mine})", f"             {s.text}"]
    return lines


def check_copies_and_invoices(settings: Settings) -> Check | None:
    """The archive Bcc, the invoice directory (it exists and this user may read it) and
    retention, when any is set; nothing is read from the directory but its entry."""
    template = settings.invoice_pdf_template()
    said = []
    if settings.bcc_address():
        said.append(f"every email is copied to {settings.bcc_address()} (envelope only)")
    if settings.retain_bodies_days:
        said.append(f"bodies and addresses of settled rows are pruned after {settings.retain_bodies_days}"
                    " day(s)")
    if template is None:
        return Check("copies, invoices, retention", True, "; ".join(said)) if said else None
    folder = Path(template.directory)
    fix = "point DUEFLOW_INVOICE_PDF at the folder of the invoice PDFs, readable by this user"
    if not folder.is_dir():
        return Check("invoice PDFs", False, f"{folder} is not a folder: reminders would go without their"
                     " invoice", fix)
    if not os.access(folder, os.R_OK | os.X_OK):
        return Check("invoice PDFs", False, f"{folder} cannot be read by this user", fix)
    said.insert(0, f"reminders carry {template.template} (at most {template.max_bytes:,} bytes; {folder}"
                   " can be read)")
    return Check("invoice PDFs", True, "; ".join(said))


# -- all --------------------------------------------------------------------------------------

def _secrets(settings: Settings | None, env: dict[str, str]) -> list[str]:
    """The secrets of the environment and of the settings a run would use (its blocks'),
    URL passwords as the parser that connects reads them; and Prefect's API key."""
    from dueflow.blocks.urls import secrets_of

    values = [env.get("PREFECT_API_KEY", ""), *secrets_of(env), *(settings.secrets() if settings else ())]
    return [v for v in values if v and len(v) >= 3]


def scrub(text: str, secrets: list[str]) -> str:
    from dueflow.blocks.urls import scrub as masked

    return masked(text, secrets)


def run_checks(env: dict[str, str] | None = None,
               on_result: Callable[[Check], None] = lambda check: None, sources: bool = False,
               on_lines: Callable[[str], None] = lambda line: None, phrasebook: bool = False) -> list[Check]:
    """Every check, in order; `on_result` sees each as soon as it is known. Secrets are
    scrubbed from every line."""
    env = dict(os.environ if env is None else env)
    results: list[Check] = []
    settings: Settings | None = None

    def done(check: Check | None) -> None:
        if check is None:
            return
        clean = Check(check.item, check.ok, scrub(check.detail, _secrets(settings, env)),
                      scrub(check.fix, _secrets(settings, env)) if check.fix else None, check.warning)
        results.append(clean)
        on_result(clean)

    settings_checks, settings = check_settings(env)
    for check in settings_checks:
        done(check)
    done(check_prefect(env))
    if settings is None:
        done(Check("database, mail, LLM, templates", False, "not checked: the settings above are not"
                   " usable", "fix the settings above, then run `dueflow check` again"))
        return results
    block_check, settings = check_blocks(settings)
    done(block_check)
    checks: tuple[Callable[[Settings], Check | list[Check] | None], ...] = (
        check_database, check_mail, check_bounces, check_llm, check_phrasebook, check_templates,
        check_copies_and_invoices)
    for run_check in checks:
        try:
            outcome = run_check(settings)
            for one in outcome if isinstance(outcome, list) else [outcome]:
                done(one)
        except Exception as exc:  # a check must report, never crash the others
            done(Check(run_check.__name__.removeprefix("check_"), False,
                       f"the check itself failed: {_reason(exc)}"))
    if sources:
        try:
            for line in sources_report(settings):
                on_lines(scrub(line, _secrets(settings, env)))
        except Exception as exc:
            done(Check("sources report", False, f"could not be made: {_reason(exc)}"))
    if phrasebook:
        for line in phrasebook_report(settings):
            on_lines(line)
    return results
