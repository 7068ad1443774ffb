"""The settings' table: every setting dueflow reads, declared once.

Each row is one field of `SettingsTable`, with its variable, the parser of its text, its
default, the Prefect block field that may carry it, and its line in docs/configuration.md.
Everything else is derived from the rows: `Settings.from_env` and `with_blocks`
(blocks/settings.py), the block classes (blocks/prefect_blocks.py), the URL settings and
their parsers (blocks/urls.py), the variables `dueflow check` tries one by one, the secrets
scrubbed from every line, and the tables of docs/configuration.md (`python -m
dueflow.blocks.table` writes them; tests/unit/test_settings_table.py fails when they differ).

A new setting is one row here, and its use; a new field of the emails' block is one row
with `block=EMAIL.field(…)`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

from dueflow.blocks.parsers import (
    Parser,
    language,
    multiline,
    on_off,
    one_of,
    schema_name,
    seconds,
    share,
    text,
    times,
    whole,
)
from dueflow.tasks.core import defaults
from dueflow.tasks.core.parameters import DUNNING_STARTS, STATEMENT_CHOICES

UrlParser = Literal["sqlalchemy", "urlsplit"]  # the parser that connects with a URL setting


@dataclass(frozen=True)
class BlockType:
    """A Prefect block type that carries some settings, named by a DUEFLOW_*_BLOCK variable."""

    name: str  # its class: blocks/prefect_blocks.py's, or `module`'s
    title: str  # its block type's name in Prefect
    doc: str  # what it is, shown in the Prefect UI
    # A field left empty keeps the variable's value; False: the block replaces every
    # setting it carries, an empty field too.
    empty_keeps_variable: bool = True
    module: str = ""  # another package's block (prefect-email's), not generated here

    def field(self, description: str = "", name: str = "", required: bool = False) -> BlockField:
        """The field of this block type that carries a setting (named as the setting when
        `name` is empty)."""
        return BlockField(self, name, description, required)


@dataclass(frozen=True)
class BlockField:
    block: BlockType
    name: str
    description: str
    required: bool


@dataclass(frozen=True)
class Setting:
    """One row of the table (the field of SettingsTable it is declared as: `field`)."""

    variable: str | None  # None: a setting only a block carries (a file's text)
    parse: Parser  # the variable's text, stripped and not empty, to the value
    default: Any
    group: str  # the section of docs/configuration.md whose table lists it ("" for none)
    doc: str  # its meaning there
    shown: str = "{default}"  # its default there
    block: BlockField | None = None  # the block field that carries it, when a block is named
    names: BlockType | None = None  # the block type this setting names
    secret: bool = False  # never shown: repr, output, logs and errors scrub it
    url: UrlParser | None = None  # a URL setting, read (and shown masked) by this parser
    parameter: str | None = None  # the flow's parameter that is this setting for one run
    text_block: BlockType | None = None  # a file setting whose text that block type may carry instead
    field: str = ""  # the Settings attribute

    @property
    def block_field(self) -> str:
        return (self.block.name or self.field) if self.block else ""


_ROW = "dueflow.setting"


def setting(variable: str | None, parse: Parser, default: Any, *, group: str = "", doc: str = "",
            **row: Any) -> Any:
    """A row of the table, declared as a field of SettingsTable."""
    declared = Setting(variable, parse, default, group, doc, **row)
    return field(default=default, repr=not (declared.secret or variable is None), metadata={_ROW: declared})


DATABASE = BlockType("DueflowDatabase", "Dueflow Database", "Where the source tables and the ledger live.")
MAIL_SERVER = BlockType("EmailServerCredentials", "Email Server Credentials",
                        "prefect-email's SMTP server and login.", module="prefect_email")
LLM = BlockType("DueflowLLM", "Dueflow LLM",
                "An OpenAI-compatible model that drafts the personalised reminder paragraph.",
                empty_keeps_variable=False)
EMAIL = BlockType(
    "DueflowEmail", "Dueflow Email",
    "How one company's emails look, who they are from and what they say about it (DUEFLOW_EMAIL_BLOCK, or"
    " the flow's `email_block` parameter: one deployment per company). A field left empty keeps the"
    " matching variable (docs/emails.md).")
SOURCES = BlockType(
    "DueflowSources", "Dueflow Sources",
    "Where dueflow's columns come from in the company's own tables or views: the text of a mapping file"
    " (DUEFLOW_SOURCES_BLOCK; docs/your-data.md). For teams that cannot put a file beside the worker or"
    " create a view in the production database.")
PROFILES = BlockType(
    "DueflowProfiles", "Dueflow Profiles",
    "Named dunning profiles chosen per client (`clients.dunning_profile`): the text of a"
    " DUEFLOW_PROFILES_FILE, in TOML (docs/configuration.md, \"Dunning profiles\").")
PHRASEBOOK = BlockType(
    "DueflowPhrasebook", "Dueflow Phrasebook",
    "A company's own reviewed sentences for its reminders' paragraph, over dueflow's or in their place:"
    " the text of a DUEFLOW_PHRASEBOOK_FILE, in TOML (docs/llm.md, \"Your own phrasebook\")."
    " `dueflow check --phrasebook` lists every sentence for review.")
BOUNCES = BlockType("DueflowBounceMailbox", "Dueflow Bounce Mailbox",
                    "The mailbox bounces arrive at (DUEFLOW_BOUNCE_BLOCK; docs/bounces.md).")
# In the order they are loaded: the emails' block may name the profiles' and the phrasebook's.
BLOCK_TYPES = (DATABASE, MAIL_SERVER, LLM, SOURCES, BOUNCES, EMAIL, PROFILES, PHRASEBOOK)


@dataclass(frozen=True)
class SettingsTable:
    """Every setting, a row each (see the module's docstring); Settings reads them."""

    # -- Database and sources ---------------------------------------------------------------
    database_url: str = setting(
        "DUEFLOW_DATABASE_URL", text, defaults.DATABASE_URL, group="database", secret=True, url="sqlalchemy",
        block=DATABASE.field("SQLAlchemy URL, e.g. postgresql://user:pass@host/db", "url", required=True),
        doc="SQLAlchemy URL of the one database that holds the source relations and the ledger"
            " (`postgresql://…` uses psycopg2)")
    source_schema: str | None = setting(
        "DUEFLOW_SOURCE_SCHEMA", schema_name, None, group="database", shown="the search path",
        doc="the schema of your tables or views (PostgreSQL); 1 to 63 characters, no control characters")
    ledger_schema: str | None = setting(
        "DUEFLOW_LEDGER_SCHEMA", schema_name, None, group="database", shown="the search path",
        doc="the schema of dueflow's own tables (PostgreSQL); same form")
    sources_file: str | None = setting(
        "DUEFLOW_SOURCES_FILE", text, None, group="database", shown="dueflow's own names", text_block=SOURCES,
        doc="a TOML file mapping your relation and column names and spellings to dueflow's"
            " ([your-data.md](your-data.md))")
    sources_block: str | None = setting(
        "DUEFLOW_SOURCES_BLOCK", text, None, group="database", names=SOURCES, shown="unset",
        doc="the name of a `DueflowSources` block holding that mapping; it wins over the file")
    sources_text: str | None = setting(  # the block's mapping, once loaded
        None, text, None,
        block=SOURCES.field("The mapping, in TOML: [invoices] relation = \"…\" …", "mapping", required=True))
    database_block: str | None = setting(
        "DUEFLOW_DATABASE_BLOCK", text, None, group="database", names=DATABASE, shown="unset",
        doc="the name of a `DueflowDatabase` block (its secret `url`); it wins over `DUEFLOW_DATABASE_URL`")
    db_lock_timeout: float = setting(
        "DUEFLOW_DB_LOCK_TIMEOUT", seconds, defaults.DB_LOCK_TIMEOUT, group="database",
        doc="seconds to wait for a SQLite file another process is writing to (said on stderr while"
            " waiting); a positive number")
    attention_state: str = setting(
        "DUEFLOW_ATTENTION_STATE", one_of(defaults.ATTENTION_STATES), defaults.ATTENTION_STATE,
        group="database",
        doc="the state type of a run whose emails wait for a person (failed, pending, bounced): `failed`"
            " shows it red in the Prefect UI, `completed` green; named \"Needs attention\" either way"
            " ([operations.md](operations.md#needs-attention-the-state-and-the-event))")
    run_lock: bool = setting(
        "DUEFLOW_RUN_LOCK", on_off, True, group="database",
        doc="`off` disables the database run lock, the second fence of G5 — G1 holds without it, and the"
            " tests switch it off to show that")

    # -- Mail -------------------------------------------------------------------------------
    mail_url: str = setting(
        "DUEFLOW_MAIL_URL", text, defaults.MAIL_URL, group="mail", secret=True, url="urlsplit",
        block=MAIL_SERVER.field(),
        doc="`smtp://host:port`, `smtp+starttls://user:pass@host:587`, `smtps://user:pass@host:465`, or"
            " `file:///dir` (each email written as an `.eml` file); `?verify=false` turns certificate"
            " checks off")
    mail_block: str | None = setting(
        "DUEFLOW_MAIL_BLOCK", text, None, group="mail", names=MAIL_SERVER, shown="unset",
        doc="the name of a prefect-email `EmailServerCredentials` block; it wins over"
            " `DUEFLOW_MAIL_URL` (its `smtp_type` SSL, STARTTLS or INSECURE is the scheme and default port"
            " 465, 587 or 25; `verify=False` becomes `?verify=false`)")
    mail_from: str = setting(
        "DUEFLOW_MAIL_FROM", text, defaults.MAIL_FROM, group="mail",
        block=EMAIL.field("The sender: ar@acme.example or Name <…>"),
        doc="the sender: `alerts@corp.example`, `Finance <alerts@corp.example>` or `\"Finance, Inc\" <…>`"
            " (the name may hold commas and accents; the address must be plain ASCII)")
    escalation_to: str | None = setting(
        "DUEFLOW_ESCALATION_TO", text, None, group="mail", shown="unset (needed for OVERDUE)",
        block=EMAIL.field("Where OVERDUE escalations go"),
        doc="where OVERDUE escalations go: an address, or `Name <address>`. Without it an escalation that"
            " falls due is quarantined with that reason every night until it is set — never dropped — and"
            " every other email goes out")

    # -- The emails' look and words ---------------------------------------------------------
    mail_from_name: str | None = setting(
        "DUEFLOW_MAIL_FROM_NAME", text, None, group="email", shown="the name in `DUEFLOW_MAIL_FROM`",
        block=EMAIL.field("The From name, e.g. Acme Finance"),
        doc="the From name, over the name in `DUEFLOW_MAIL_FROM` (`Acme Finance`); one line, no angle"
            " brackets, at most 200 characters")
    reply_to: str | None = setting(
        "DUEFLOW_REPLY_TO", text, None, group="email", shown="none",
        block=EMAIL.field("Where replies go: ar@acme.example or Name <…>"),
        doc="where replies go: `ar@acme.example` or `Accounts <ar@acme.example>`")
    company_name: str = setting(
        "DUEFLOW_COMPANY_NAME", text, "", group="email", shown="none",
        block=EMAIL.field("Shown at the top of every email"),
        doc="shown at the top of every HTML email and in the closing")
    signature: str = setting(
        "DUEFLOW_SIGNATURE", multiline, "", group="email", block=EMAIL.field("Closing lines of every email"),
        shown="`Accounts receivable` (reminders), `dueflow contract alerts` (renewals)",
        doc="closing lines (`\\n` starts a new line)")
    payment_instructions: str = setting(
        "DUEFLOW_PAYMENT_INSTRUCTIONS", multiline, "", group="email", shown="none",
        block=EMAIL.field("How to pay: bank account, reference…"),
        doc="how to pay, in reminders (`\\n` starts a new line); a section per language under a line"
            " `[es]`, `[de]` (`[en]`), the text before the first one for the others")
    payment_link: str = setting(
        "DUEFLOW_PAYMENT_LINK", text, "", group="email", shown="none",
        block=EMAIL.field("https://pay.example/{number}: {number}, {invoice_id}, {amount}, {currency}"),
        doc="a payment URL template, `https://pay.acme.example/{number}?amount={amount}&cur={currency}`:"
            " fields `{number}`, `{invoice_id}`, `{amount}`, `{currency}`, URL-quoted")
    contract_contact: str = setting(
        "DUEFLOW_CONTRACT_CONTACT", text, "", group="email", shown="none",
        block=EMAIL.field("Who to ask about a contract"),
        doc="who to ask about a contract, in renewal alerts")
    templates_dir: str | None = setting(
        "DUEFLOW_TEMPLATES_DIR", text, None, group="email", shown="none",
        block=EMAIL.field("Directory of templates that override dueflow's"),
        doc="a directory of templates that override the packaged ones"
            " ([emails.md](emails.md#your-own-templates))")
    email_block: str | None = setting(
        "DUEFLOW_EMAIL_BLOCK", text, None, group="email", names=EMAIL, shown="unset", parameter="email_block",
        doc="the name of a `DueflowEmail` block carrying the settings whose block field is `DueflowEmail.…`"
            " (here and in the other tables); a field it leaves empty keeps the variable. The flow's"
            " `email_block` parameter, when given, wins over this variable")

    # -- Copies, the invoice, retention -----------------------------------------------------
    bcc: str | None = setting(
        "DUEFLOW_BCC", text, None, group="copies", shown="none",
        block=EMAIL.field("The archive: a copy of every email, envelope only"),
        doc="the archive: a blind copy of every email, a recipient of its envelope only (no header names"
            " it). One address, checked like the others; a name, if written, is dropped")
    invoice_pdf: str | None = setting(
        "DUEFLOW_INVOICE_PDF", text, None, group="copies", shown="none: no attachment",
        block=EMAIL.field("Invoice PDFs for reminders: /srv/acme/{number}.pdf"),
        doc="the invoice PDF each reminder carries: an absolute path template, `/srv/invoices/{number}.pdf`"
            " (fields `{number}`, `{invoice_id}`, `{client_id}`), or the folder `invoices.pdf_path` is"
            " relative to, `/srv/invoices/`. The folder before the first field is the invoice folder: no"
            " file outside it is ever attached")
    invoice_pdf_max_bytes: int = setting(
        "DUEFLOW_INVOICE_PDF_MAX_BYTES", whole(1, defaults.INVOICE_PDF_MAX_BYTES_LIMIT),
        defaults.INVOICE_PDF_MAX_BYTES, group="copies", shown="{default} (10 MiB)",
        doc=f"the largest PDF attached, 1 to {defaults.INVOICE_PDF_MAX_BYTES_LIMIT:,}; a larger one is never"
            " read and the reminder goes without it, saying so")
    retain_bodies_days: int | None = setting(
        "DUEFLOW_RETAIN_BODIES_DAYS", whole(1, defaults.RETAIN_BODIES_DAYS_LIMIT), None, group="copies",
        shown="unset: kept for ever",
        doc=f"after this many days (1 to {defaults.RETAIN_BODIES_DAYS_LIMIT:,}), the bodies, subjects,"
            " addresses, paragraphs and refused model answers of settled rows are pruned by every nightly"
            " run and by `dueflow prune`; keys, statuses and dates stay")

    # -- Dunning rules ----------------------------------------------------------------------
    business_days: str | None = setting(
        "DUEFLOW_BUSINESS_DAYS", text, None, group="dunning", shown="every day",
        doc="the working weekdays, `mon-fri`, `sun-thu`, `mon,tue,thu`. On any other day no email goes out:"
            " what falls due then goes out on the next business day, once (one step an invoice a night,"
            " the most urgent renewal lead)")
    holidays: str | None = setting(
        "DUEFLOW_HOLIDAYS", text, None, group="dunning", shown="none",
        doc="public holidays, closed too: a country, `ES`, or a region, `ES-MD`, as the"
            " [holidays](https://pypi.org/project/holidays/) package knows them; `check` and `forecast`"
            " name them in `DUEFLOW_OPERATOR_LANGUAGE` ([below](#language-and-locale))")
    closed_days_file: str | None = setting(
        "DUEFLOW_CLOSED_DAYS_FILE", text, None, group="dunning", shown="none",
        doc="the company's own closures, a text file: one `2027-12-24 Christmas Eve` or"
            " `2027-08-09..2027-08-20 summer closure` a line, `#` comments")
    renewal_on_any_day: bool = setting(
        "DUEFLOW_RENEWAL_ON_ANY_DAY", on_off, False, group="dunning", parameter="renewal_on_any_day",
        doc="`on`: renewal alerts go out on closed days too, in every run; the flow's `renewal_on_any_day`"
            " parameter switches it on for one run (either on is on). Otherwise they wait for the next"
            " business day like reminders, and a renewal that fell on the closed days just past gets its"
            " most urgent alert then")
    dunning_start: str = setting(
        "DUEFLOW_DUNNING_START", one_of(DUNNING_STARTS), defaults.DUNNING_START, group="dunning",
        parameter="dunning_start",
        doc="what the first reminder's delay counts from: `sent`, the day the invoice was sent (`sent_at`;"
            " a first reminder may then go before the due date), or `due`, its due date (`due_date`, as"
            " billing systems usually do). One reading: a profile's `start` wins for its clients, then the"
            " flow's `dunning_start` parameter (`dueflow run --dunning-start`) for one run, then this"
            " variable; `dueflow check` says which is in force")
    statements: str = setting(
        "DUEFLOW_STATEMENTS", one_of(STATEMENT_CHOICES), "off", group="dunning",
        doc="`reminders`: a client with several invoices at a reminder step on one night gets one email"
            " listing them all (each invoice with its number, amount, due date and step; every PDF"
            " attached), instead of one per invoice; `all`: the escalations of one client's invoices go"
            " as one too. Each invoice step keeps its own key: exactly once holds per invoice"
            " ([design.md](design.md#statements)); a profile's `statements` wins for its clients. `off`: one"
            " email per invoice step")
    dunning_minimum: str | None = setting(
        "DUEFLOW_DUNNING_MINIMUM", text, None, group="dunning", shown="none",
        doc="no reminder or escalation below this open amount, per currency: `EUR 5, USD 5, JPY 500`. Such"
            " an invoice is reported `skipped` with the reason, counted once a night (`below_minimum`), not"
            " quarantined; an amount equal to the minimum is chased")
    reference_rates: str | None = setting(
        "DUEFLOW_REFERENCE_RATES", text, None, group="dunning", shown="none",
        doc="the reference rate of statutory interest for late payment, dated: `2026-01-01 2.15, 2026-07-01"
            " 2.15` (percent a year from each date on; the ECB's or your central bank's, which changes every"
            " half-year). A profile step with `interest` states the interest on the open amount at the rate"
            " in force each day plus 8 points (Directive 2011/7/EU), on its own line, never added to the"
            " invoice; needed once a profile asks for interest")
    late_compensation: str = setting(
        "DUEFLOW_LATE_COMPENSATION", text, "EUR 40", group="dunning",
        doc="the flat compensation for recovery costs stated with statutory interest, per currency: `EUR"
            " 40` (Directive 2011/7/EU art. 6); a currency not named gets none")
    profiles_file: str | None = setting(
        "DUEFLOW_PROFILES_FILE", text, None, group="dunning", shown="none: the run's parameters for every"
        " client", text_block=PROFILES, block=EMAIL.field("This company's dunning profiles (TOML file)"),
        doc="named dunning profiles, chosen per client by `clients.dunning_profile` (TOML, below)")
    profiles_block: str | None = setting(
        "DUEFLOW_PROFILES_BLOCK", text, None, group="dunning", names=PROFILES, shown="unset",
        block=EMAIL.field("Or the name of a DueflowProfiles block holding them"),
        doc="the name of a `DueflowProfiles` block holding the same text; wins over the file")
    profiles_text: str | None = setting(  # the block's profiles, once loaded
        None, text, None, block=PROFILES.field(
            "The profiles, in TOML: [profiles.key-account] delays = [14, 14, 30] …", "profiles",
            required=True))

    # -- Time -------------------------------------------------------------------------------
    timezone: str = setting(
        "DUEFLOW_TIMEZONE", text, defaults.TIMEZONE, group="time",
        doc="the business time zone (IANA name): `as_of` defaults to today there, timestamps without an"
            " offset are read in it, and the emails' `Date` header carries its real offset")
    allow_any_as_of: bool = setting(
        "DUEFLOW_ALLOW_ANY_AS_OF", on_off, False, group="time", parameter="allow_any_as_of",
        doc="`on`: every run may take any `as_of` (a backfill, a test on fixed dates); the flow's"
            " `allow_any_as_of` parameter allows it for one run (either on is on). Otherwise an `as_of` more"
            " than 31 days after today or before the ledger's first night is refused"
            " ([parameters.md](parameters.md))")
    schedule_cron: str | None = setting(
        "DUEFLOW_SCHEDULE_CRON", text, None, group="time", shown="`prefect.yaml`'s: `0 6 * * *`",
        doc="replaces the cron schedule of `python -m dueflow.deployments.serve`"
            " ([deployment.md](deployment.md))")
    schedule_timezone: str | None = setting(
        "DUEFLOW_SCHEDULE_TIMEZONE", text, None, group="time", shown="`prefect.yaml`'s: `Europe/Madrid`",
        doc="replaces the time zone of that schedule")

    # -- A night that looks wrong -----------------------------------------------------------
    guard: bool = setting(
        "DUEFLOW_GUARD", on_off, True, group="guard",
        doc="`off`: a night never waits for a person, whatever it would send (see the bounds below;"
            " [operations.md](operations.md#a-night-that-looks-wrong))")
    guard_min_emails: int = setting(
        "DUEFLOW_GUARD_MIN_EMAILS", whole(1, 10_000_000), defaults.GUARD_MIN_EMAILS, group="guard",
        doc="a job with no more emails than this tonight never waits: small nights are what dunning is")
    guard_factor: float = setting(
        "DUEFLOW_GUARD_FACTOR", times, defaults.GUARD_FACTOR, group="guard",
        doc="a night waits when a job would send more than this many times the median of the recent"
            " nights' emails, or remind this many times their amount in a currency, or finds this many"
            " times the open invoices of the last night (a first night waits above the minimum alone)")
    guard_open_share: float = setting(
        "DUEFLOW_GUARD_OPEN_SHARE", share, defaults.GUARD_OPEN_SHARE, group="guard", shown="`50%`",
        doc="a night waits when it would remind more than this share of the open invoices")
    approval_timeout: float = setting(
        "DUEFLOW_APPROVAL_TIMEOUT", seconds, defaults.APPROVAL_TIMEOUT, group="guard",
        doc="seconds a paused night waits for a person's choice in the Prefect UI; then it ends"
            " \"Needs attention\" with nothing sent, and emits `dueflow.run.needs-attention`")

    # -- Language ---------------------------------------------------------------------------
    operator_language: str = setting(
        "DUEFLOW_OPERATOR_LANGUAGE", language, defaults.OPERATOR_LANGUAGE, group="language",
        doc="the language of the holidays' names in what operators read: a code, `en`, `es`, `de`, `fr`,"
            " or with a country, `en_GB`, `pt-BR` (CLDR's codes, as Babel knows them)")

    # -- The reminder's paragraph: the phrasebook and the model ------------------------------
    phrasebook_file: str | None = setting(
        "DUEFLOW_PHRASEBOOK_FILE", text, None, group="paragraph", shown="dueflow's phrasebook alone",
        text_block=PHRASEBOOK, block=EMAIL.field("This company's reviewed reminder sentences (TOML file)"),
        doc="the company's own reviewed sentences (TOML: `mode = \"extend\"` or `\"replace\"`, `disabled ="
            " [ids]`, `[[sentence]]` tables; [llm.md](llm.md#your-own-phrasebook)), checked at start-up: a"
            " file that cannot be used is one line and exit 2")
    phrasebook_block: str | None = setting(
        "DUEFLOW_PHRASEBOOK_BLOCK", text, None, group="paragraph", names=PHRASEBOOK, shown="unset",
        block=EMAIL.field("Or the name of a DueflowPhrasebook block holding them"),
        doc="the name of a `DueflowPhrasebook` block holding the same text; wins over the file")
    phrasebook_text: str | None = setting(  # the block's phrasebook, once loaded
        None, text, None, block=PHRASEBOOK.field(
            "The sentences, in TOML: mode = \"extend\" [[sentence]] id = \"…\" …", "phrasebook",
            required=True))
    llm_api_key: str | None = setting(
        "OPENAI_API_KEY", text, None, group="paragraph", secret=True, block=LLM.field(name="api_key",
                                                                                       required=True),
        shown="unset: dueflow's rule plans every paragraph, `openai` is not even imported",
        doc="a model chooses each reminder's tone plan (a tone and sentence ids, by a strict JSON schema)")
    llm_base_url: str | None = setting(
        "OPENAI_BASE_URL", text, None, group="paragraph", shown="the `openai` client's",
        block=LLM.field("OpenAI-compatible endpoint", "base_url"),
        doc="an OpenAI-compatible endpoint (a local server works)")
    llm_model: str = setting(
        "DUEFLOW_LLM_MODEL", text, defaults.DEFAULT_MODEL, group="paragraph", block=LLM.field(name="model"),
        doc="the model")
    llm_block: str | None = setting(
        "DUEFLOW_LLM_BLOCK", text, None, group="paragraph", names=LLM, shown="unset",
        doc="the name of a `DueflowLLM` block (`api_key`, `model`, `base_url`); it wins over the three"
            " above, an empty field too")

    # -- Mail server limits -----------------------------------------------------------------
    smtp_connect_timeout: float = setting(
        "DUEFLOW_SMTP_CONNECT_TIMEOUT", seconds, defaults.SMTP_CONNECT_TIMEOUT, group="limits",
        doc="seconds for each step of opening a connection: TCP, the greeting, EHLO, STARTTLS or TLS, the"
            " login")
    smtp_reply_timeout: float = setting(
        "DUEFLOW_SMTP_REPLY_TIMEOUT", seconds, defaults.SMTP_REPLY_TIMEOUT, group="limits",
        doc="seconds for each later reply: MAIL FROM, RCPT TO, DATA, and the reply after the message")
    smtp_max_failures: int = setting(
        "DUEFLOW_SMTP_MAX_FAILURES", whole(1, 1000), defaults.SMTP_MAX_CONNECTION_FAILURES, group="limits",
        doc="connection faults in a row (no connection, no answer in time, a broken connection) after which"
            " the night's delivery stops, 1 to 1000")

    # -- Bounces ----------------------------------------------------------------------------
    bounce_url: str | None = setting(
        "DUEFLOW_BOUNCE_URL", text, None, group="bounces", secret=True, url="urlsplit",
        shown="unset: no intake",
        block=BOUNCES.field("imaps://user:pass@host/INBOX, or maildir:///path", "url", required=True),
        doc="the mailbox bounces arrive at: `imaps://user:pass@host/INBOX`, `imap+starttls://…`,"
            " `maildir:///path`, `mbox:///path/file`; options `?move_to=FOLDER`, `?delete=yes`,"
            " `?cafile=…`, `?verify=false`, `?timeout=SECONDS` (percent-encode the password, as for every"
            " URL)")
    bounce_block: str | None = setting(
        "DUEFLOW_BOUNCE_BLOCK", text, None, group="bounces", names=BOUNCES, shown="unset",
        doc="the name of a `DueflowBounceMailbox` block; it wins over `DUEFLOW_BOUNCE_URL`")
    bounce_address: str | None = setting(
        "DUEFLOW_BOUNCE_ADDRESS", text, None, group="bounces", shown="unset: the From address",
        block=BOUNCES.field("The envelope sender (MAIL FROM) whose bounces arrive there, e.g."
                            " bounces@acme.example", "address"),
        doc="the envelope sender (`MAIL FROM`) of every email, so that bounces reach the mailbox dueflow"
            " reads while replies go to Reply-To")


SETTINGS: tuple[Setting, ...] = tuple(replace(f.metadata[_ROW], field=f.name) for f in fields(SettingsTable))
ROW = {row.field: row for row in SETTINGS}  # by Settings attribute
VARIABLES = tuple(row.variable for row in SETTINGS if row.variable)  # every variable, in the table's order
URL_SETTINGS: dict[str, UrlParser] = {row.variable: row.url for row in SETTINGS if row.variable and row.url}
PARAMETERS = {row.parameter: row for row in SETTINGS if row.parameter}  # by the flow's parameter
GROUPS = tuple(dict.fromkeys(row.group for row in SETTINGS if row.group))


def carried_by(block: BlockType) -> tuple[Setting, ...]:
    """The rows a block of this type carries."""
    return tuple(row for row in SETTINGS if row.block and row.block.block is block)


def naming(block: BlockType) -> Setting:
    """The row of the variable that names a block of this type."""
    return next(row for row in SETTINGS if row.names is block)


# -- docs/configuration.md ------------------------------------------------------------------

DOCS = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"
_GENERATED = re.compile(r"(<!-- settings: (\w+) .*?-->\n).*?(<!-- end of settings: \2 -->)", re.DOTALL)


def shown_default(row: Setting) -> str:
    value = row.default
    if isinstance(value, bool):
        written = "on" if value else "off"
    elif isinstance(value, float) and value.is_integer():
        written = str(int(value))
    else:
        written = "" if value is None else str(value)
    return row.shown.format(default=f"`{written}`" if written else "unset")


def docs_table(group: str) -> str:
    """The markdown table of a group of settings, as docs/configuration.md shows it."""
    rows = [row for row in SETTINGS if row.group == group and row.variable]
    blocks = any(row.block for row in rows)  # the column "block field", where a block carries one
    lines = ["| variable | meaning | default |" + (" block field |" if blocks else ""),
             "|---|---|---|" + ("---|" if blocks else "")]
    for row in rows:
        where = ""
        if row.block:
            where = (f"`{row.block.block.name}`" if row.block.block.module
                     else f"`{row.block.block.name}.{row.block_field}`")
        cells = [f"`{row.variable}`", row.doc, shown_default(row)] + ([where] if blocks else [])
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def with_docs_tables(markdown: str) -> str:
    """`markdown` with each generated table (between `<!-- settings: GROUP … -->` and `<!--
    end of settings: GROUP -->`) made anew from the table."""
    return _GENERATED.sub(lambda m: m.group(1) + "\n" + docs_table(m.group(2)) + "\n" + m.group(3), markdown)


if __name__ == "__main__":  # python -m dueflow.blocks.table: write docs/configuration.md's tables
    DOCS.write_text(with_docs_tables(DOCS.read_text(encoding="utf-8")), encoding="utf-8")
