"""Settings: every environment variable dueflow reads (the public contract in docs/design.md),
and the Prefect blocks that override them — read here and nowhere else."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from dueflow.blocks.errors import ConfigError
from dueflow.tasks.core import defaults
from dueflow.tasks.core.addresses import parse_mailbox

if TYPE_CHECKING:
    from dueflow.blocks.endpoints import MailConfig
    from dueflow.tasks.core.calendar import BusinessCalendar
    from dueflow.tasks.core.invoice_pdf import PdfTemplate
    from dueflow.tasks.core.message import Sender
    from dueflow.tasks.core.phrasebook import Phrasebook
    from dueflow.tasks.core.profiles import Profiles
    from dueflow.tasks.core.render import EmailLook
    from dueflow.tasks.core.sources import SourceMapping


@dataclass(frozen=True)
class LLMConfig:
    """How to reach the model that drafts reminder paragraphs, and how much of it one run
    may use. None in `Settings.llm` means drafting is off."""

    api_key: str = field(repr=False)
    model: str = defaults.DEFAULT_MODEL
    base_url: str | None = None
    timeout_s: float = 10.0  # per call
    max_calls: int = 200  # per run; the rest fall back to templates, saying so
    concurrency: int = 4  # calls in flight at once
    # Stop calling once the API failed this many times in a row: a dead endpoint
    # must not cost max_calls x timeout_s of the nightly run.
    max_consecutive_failures: int = 5

    def __post_init__(self) -> None:
        if not self.api_key:
            raise ValueError("LLMConfig needs an API key")
        if self.timeout_s <= 0 or self.max_calls < 0 or self.concurrency < 1:
            raise ValueError("LLMConfig needs timeout_s > 0, max_calls >= 0 and concurrency >= 1")
        if self.max_consecutive_failures < 1:
            raise ValueError("LLMConfig needs max_consecutive_failures >= 1")


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    raw = (env.get(name) or "").strip()
    try:
        value = float(raw) if raw else default
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a number of seconds") from None
    if value <= 0:
        raise ConfigError(f"{name}={raw!r} must be a positive number of seconds")
    return value


def _switch(env: Mapping[str, str], name: str) -> bool:
    raw = (env.get(name) or "off").strip().lower()
    if raw not in ("on", "off", "true", "false", "1", "0", "yes", "no"):
        raise ConfigError(f"{name}={raw[:40]!r} must be on or off")
    return raw in ("on", "true", "1", "yes")


def _count(env: Mapping[str, str], name: str, default: int, low: int = 1, high: int = 1000) -> int:
    raw = (env.get(name) or "").strip()
    if not raw:
        return default
    if not re.fullmatch(r"[0-9]+", raw) or not low <= int(raw) <= high:
        raise ConfigError(f"{name}={raw[:40]!r} must be a whole number from {low} to {high}")
    return int(raw)


def _llm_from_env(env: Mapping[str, str]) -> LLMConfig | None:
    """OPENAI_API_KEY, OPENAI_BASE_URL, DUEFLOW_LLM_MODEL; None (LLM off) without a key."""
    api_key = (env.get("OPENAI_API_KEY") or "").strip()
    if not api_key:
        return None
    return LLMConfig(api_key=api_key,
                     model=(env.get("DUEFLOW_LLM_MODEL") or "").strip() or defaults.DEFAULT_MODEL,
                     base_url=(env.get("OPENAI_BASE_URL") or "").strip() or None)


def _setting_text(block_text: str | None, block_origin: str, setting: str,
                  path: str | None) -> tuple[str, str]:
    """The text of a configuration file setting (a block's text, once loaded, wins) and the
    origin its errors name; a file that cannot be read is one ConfigError line."""
    if block_text is not None:
        return block_text, block_origin
    try:
        return Path(path or "").expanduser().read_text(encoding="utf-8"), f"{setting} {path}"
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{setting}={path!r} cannot be read:"
                          f" {getattr(exc, 'strerror', None) or exc}") from None


@dataclass(frozen=True)
class Settings:
    database_url: str = field(default=defaults.DATABASE_URL, repr=False)  # may hold a password
    mail_url: str = field(default=defaults.MAIL_URL, repr=False)
    mail_from: str = defaults.MAIL_FROM
    escalation_to: str | None = None
    timezone: str = defaults.TIMEZONE
    run_lock: bool = True  # DUEFLOW_RUN_LOCK=off disables the database run lock (G5)
    db_lock_timeout: float = defaults.DB_LOCK_TIMEOUT  # DUEFLOW_DB_LOCK_TIMEOUT
    # A dead or hostile mail server (docs/configuration.md, "Mail server limits").
    smtp_connect_timeout: float = defaults.SMTP_CONNECT_TIMEOUT  # DUEFLOW_SMTP_CONNECT_TIMEOUT
    smtp_reply_timeout: float = defaults.SMTP_REPLY_TIMEOUT  # DUEFLOW_SMTP_REPLY_TIMEOUT
    smtp_max_failures: int = defaults.SMTP_MAX_CONNECTION_FAILURES  # DUEFLOW_SMTP_MAX_FAILURES
    # DUEFLOW_ALLOW_ANY_AS_OF=on: every run may take any as_of (docs/parameters.md)
    allow_any_as_of: bool = False
    llm: LLMConfig | None = field(default=None, repr=False)
    # DUEFLOW_SCHEDULE_CRON, DUEFLOW_SCHEDULE_TIMEZONE: deployments/serve.py's schedule, when
    # set; otherwise prefect.yaml's (0 6 * * *, Europe/Madrid)
    schedule_cron: str | None = None
    schedule_timezone: str | None = None
    # Names of Prefect blocks that override the variables above (applied by `with_blocks`).
    database_block: str | None = None
    mail_block: str | None = None
    llm_block: str | None = None
    # The emails' look and words (docs/emails.md); DUEFLOW_EMAIL_BLOCK names a
    # DueflowEmail block that overrides them.
    mail_from_name: str | None = None  # DUEFLOW_MAIL_FROM_NAME: the From name, over MAIL_FROM's
    reply_to: str | None = None  # DUEFLOW_REPLY_TO: where replies go
    company_name: str = ""  # DUEFLOW_COMPANY_NAME
    signature: str = ""  # DUEFLOW_SIGNATURE (\n starts a new line)
    payment_instructions: str = ""  # DUEFLOW_PAYMENT_INSTRUCTIONS (\n starts a new line)
    payment_link: str = ""  # DUEFLOW_PAYMENT_LINK: https://…/{number}
    contract_contact: str = ""  # DUEFLOW_CONTRACT_CONTACT: who to ask about a contract
    templates_dir: str | None = None  # DUEFLOW_TEMPLATES_DIR: templates that override ours
    # Copies and the invoice itself (docs/emails.md, "Copies", "The invoice").
    bcc: str | None = None  # DUEFLOW_BCC: the archive, a recipient of every email's envelope only
    invoice_pdf: str | None = None  # DUEFLOW_INVOICE_PDF: /srv/invoices/{number}.pdf
    invoice_pdf_max_bytes: int = defaults.INVOICE_PDF_MAX_BYTES  # DUEFLOW_INVOICE_PDF_MAX_BYTES
    email_block: str | None = None
    # DUEFLOW_RETAIN_BODIES_DAYS: settled rows' bodies and addresses are pruned after this
    # many days by the nightly run (docs/operations.md, "Retention"); None keeps them.
    retain_bodies_days: int | None = None
    # Where the company's own relations are, and dueflow's own tables (docs/your-data.md).
    source_schema: str | None = None  # DUEFLOW_SOURCE_SCHEMA
    ledger_schema: str | None = None  # DUEFLOW_LEDGER_SCHEMA
    sources_file: str | None = None  # DUEFLOW_SOURCES_FILE: the mapping (TOML)
    sources_block: str | None = None  # DUEFLOW_SOURCES_BLOCK: a DueflowSources block holding it
    sources_text: str | None = field(default=None, repr=False)  # the block's mapping, once loaded
    # Bounce intake (docs/bounces.md): the mailbox bounces arrive at, and the envelope
    # sender (MAIL FROM) that sends them there; DUEFLOW_BOUNCE_BLOCK overrides both.
    bounce_url: str | None = field(default=None, repr=False)  # DUEFLOW_BOUNCE_URL: may hold a password
    bounce_address: str | None = None  # DUEFLOW_BOUNCE_ADDRESS
    bounce_block: str | None = None
    # DUEFLOW_ATTENTION_STATE: the state type of a run whose emails need a person (failed,
    # pending, bounced): "failed" (default, red in the UI) or "completed" (green, as before);
    # named "Needs attention" either way (docs/operations.md, "Needs attention").
    attention_state: str = defaults.ATTENTION_STATE
    # Holds, calendar, thresholds, profiles (docs/configuration.md, "Dunning rules").
    business_days: str | None = None  # DUEFLOW_BUSINESS_DAYS: mon-fri
    holidays: str | None = None  # DUEFLOW_HOLIDAYS: ES or ES-MD (the holidays package)
    closed_days_file: str | None = None  # DUEFLOW_CLOSED_DAYS_FILE: the company's closures
    renewal_on_any_day: bool = False  # DUEFLOW_RENEWAL_ON_ANY_DAY=on: renewal alerts ignore the calendar
    dunning_minimum: str | None = None  # DUEFLOW_DUNNING_MINIMUM: EUR 5, USD 5, JPY 500
    profiles_file: str | None = None  # DUEFLOW_PROFILES_FILE: named dunning profiles (TOML)
    profiles_block: str | None = None  # DUEFLOW_PROFILES_BLOCK: a DueflowProfiles block holding them
    profiles_text: str | None = field(default=None, repr=False)  # the block's profiles, once loaded
    # The reminders' reviewed sentences (docs/llm.md, "Your own phrasebook"): a company's own, over dueflow's.
    phrasebook_file: str | None = None  # DUEFLOW_PHRASEBOOK_FILE (TOML)
    phrasebook_block: str | None = None  # DUEFLOW_PHRASEBOOK_BLOCK: a DueflowPhrasebook block holding it
    phrasebook_text: str | None = field(default=None, repr=False)  # the block's phrasebook, once loaded

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """The settings of this process's environment, checked: a bad value is one
        ConfigError naming the variable, before anything is written."""
        env = os.environ if env is None else env
        settings = cls(
            database_url=env.get("DUEFLOW_DATABASE_URL") or defaults.DATABASE_URL,
            mail_url=env.get("DUEFLOW_MAIL_URL") or defaults.MAIL_URL,
            mail_from=env.get("DUEFLOW_MAIL_FROM") or defaults.MAIL_FROM,
            escalation_to=env.get("DUEFLOW_ESCALATION_TO") or None,
            timezone=env.get("DUEFLOW_TIMEZONE") or defaults.TIMEZONE,
            run_lock=(env.get("DUEFLOW_RUN_LOCK") or "on").strip().lower()
            not in ("off", "0", "false", "no"),
            db_lock_timeout=_seconds(env, "DUEFLOW_DB_LOCK_TIMEOUT", defaults.DB_LOCK_TIMEOUT),
            smtp_connect_timeout=_seconds(env, "DUEFLOW_SMTP_CONNECT_TIMEOUT", defaults.SMTP_CONNECT_TIMEOUT),
            smtp_reply_timeout=_seconds(env, "DUEFLOW_SMTP_REPLY_TIMEOUT", defaults.SMTP_REPLY_TIMEOUT),
            smtp_max_failures=_count(env, "DUEFLOW_SMTP_MAX_FAILURES", defaults.SMTP_MAX_CONNECTION_FAILURES),
            allow_any_as_of=(env.get("DUEFLOW_ALLOW_ANY_AS_OF") or "off").strip().lower()
            in ("on", "1", "true", "yes"),
            llm=_llm_from_env(env),
            schedule_cron=env.get("DUEFLOW_SCHEDULE_CRON") or None,
            schedule_timezone=env.get("DUEFLOW_SCHEDULE_TIMEZONE") or None,
            database_block=(env.get("DUEFLOW_DATABASE_BLOCK") or "").strip() or None,
            mail_block=(env.get("DUEFLOW_MAIL_BLOCK") or "").strip() or None,
            llm_block=(env.get("DUEFLOW_LLM_BLOCK") or "").strip() or None,
            **_email_from_env(env),
            invoice_pdf_max_bytes=_count(env, "DUEFLOW_INVOICE_PDF_MAX_BYTES", defaults.INVOICE_PDF_MAX_BYTES,
                                         high=defaults.INVOICE_PDF_MAX_BYTES_LIMIT),
            retain_bodies_days=_count(env, "DUEFLOW_RETAIN_BODIES_DAYS", 0,
                                      high=defaults.RETAIN_BODIES_DAYS_LIMIT) or None,
            source_schema=_schema_name(env, "DUEFLOW_SOURCE_SCHEMA"),
            ledger_schema=_schema_name(env, "DUEFLOW_LEDGER_SCHEMA"),
            sources_file=(env.get("DUEFLOW_SOURCES_FILE") or "").strip() or None,
            sources_block=(env.get("DUEFLOW_SOURCES_BLOCK") or "").strip() or None,
            bounce_url=(env.get("DUEFLOW_BOUNCE_URL") or "").strip() or None,
            bounce_address=(env.get("DUEFLOW_BOUNCE_ADDRESS") or "").strip() or None,
            bounce_block=(env.get("DUEFLOW_BOUNCE_BLOCK") or "").strip() or None,
            attention_state=_attention_state(env),
            business_days=(env.get("DUEFLOW_BUSINESS_DAYS") or "").strip() or None,
            holidays=(env.get("DUEFLOW_HOLIDAYS") or "").strip() or None,
            closed_days_file=(env.get("DUEFLOW_CLOSED_DAYS_FILE") or "").strip() or None,
            renewal_on_any_day=_switch(env, "DUEFLOW_RENEWAL_ON_ANY_DAY"),
            dunning_minimum=(env.get("DUEFLOW_DUNNING_MINIMUM") or "").strip() or None,
            profiles_file=(env.get("DUEFLOW_PROFILES_FILE") or "").strip() or None,
            profiles_block=(env.get("DUEFLOW_PROFILES_BLOCK") or "").strip() or None,
            phrasebook_file=(env.get("DUEFLOW_PHRASEBOOK_FILE") or "").strip() or None,
            phrasebook_block=(env.get("DUEFLOW_PHRASEBOOK_BLOCK") or "").strip() or None,
        )
        from dueflow.blocks.urls import read_url

        read_url(settings.database_url, "DUEFLOW_DATABASE_URL")  # one line, the URL not shown
        read_url(settings.mail_url, "DUEFLOW_MAIL_URL")
        settings.zone()  # fail early on a bad time zone and bad addresses
        settings.sender()
        settings.escalation_address()
        settings.email_look()
        settings.invoice_pdf_template()
        settings.source_mapping()
        settings.bounce_mailbox()
        settings.calendar()
        settings.minimums()
        settings.profiles()
        settings.phrasebook()
        return settings

    def calendar(self) -> BusinessCalendar | None:
        """DUEFLOW_BUSINESS_DAYS, DUEFLOW_HOLIDAYS and DUEFLOW_CLOSED_DAYS_FILE as one
        calendar, checked (one ConfigError line); None when none is set (every day open)."""
        from dueflow.tasks.core.calendar import (
            BusinessCalendar,
            CalendarError,
            parse_business_days,
            parse_closed_days,
            parse_holidays,
        )

        if not (self.business_days or self.holidays or self.closed_days_file):
            return None
        try:
            closed: tuple = ()
            if self.closed_days_file:
                text, origin = _setting_text(None, "", "DUEFLOW_CLOSED_DAYS_FILE", self.closed_days_file)
                closed = parse_closed_days(text, origin)
            country, subdiv = parse_holidays(self.holidays)
            return BusinessCalendar(parse_business_days(self.business_days), country, subdiv, closed)
        except CalendarError as exc:
            raise ConfigError(str(exc)) from None

    def minimums(self) -> dict[str, Decimal]:
        """DUEFLOW_DUNNING_MINIMUM parsed: per currency, no reminder below it."""
        from dueflow.tasks.core.money import parse_minimums

        try:
            return parse_minimums(self.dunning_minimum)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    def profiles(self, default: Profiles | None = None) -> Profiles:
        """The named dunning profiles (DUEFLOW_PROFILES_FILE, or a DueflowProfiles block's
        text once `with_blocks` has loaded it) over `default` (the run's parameters), checked:
        one ConfigError line naming the file, profile and fix."""
        from dueflow.tasks.core.defaults import DUNNING_DELAYS
        from dueflow.tasks.core.profiles import ProfileError, default_profile, parse_profiles

        default = default or default_profile(DUNNING_DELAYS, "sent")
        if self.profiles_text is None and not self.profiles_file:
            return default
        text, origin = _setting_text(self.profiles_text, f"DueflowProfiles block {self.profiles_block!r}",
                                     "DUEFLOW_PROFILES_FILE", self.profiles_file)
        try:
            return parse_profiles(text, origin, default)
        except ProfileError as exc:
            raise ConfigError(str(exc)) from None

    def phrasebook(self) -> Phrasebook:
        """The reviewed sentences reminders are made of: dueflow's, extended or replaced by
        DUEFLOW_PHRASEBOOK_FILE or a DueflowPhrasebook block's text once `with_blocks` has
        loaded it, checked: one ConfigError line naming the file, sentence and fix."""
        from dueflow.tasks.core.phrasebook import PhrasebookError, load_phrasebook

        text, origin = None, ""
        if self.phrasebook_text is not None or self.phrasebook_file:
            text, origin = _setting_text(self.phrasebook_text,
                                         f"DueflowPhrasebook block {self.phrasebook_block!r}",
                                         "DUEFLOW_PHRASEBOOK_FILE", self.phrasebook_file)
        try:
            return load_phrasebook(text, origin)
        except PhrasebookError as exc:
            raise ConfigError(str(exc)) from None

    def bounce_mailbox(self) -> Any:
        """DUEFLOW_BOUNCE_URL parsed (blocks.endpoints.BounceConfig), or None when no
        bounce mailbox is configured; a bad URL is one ConfigError line, its password masked."""
        if not self.bounce_url:
            return None
        from dueflow.blocks.endpoints import parse_bounce_url

        return parse_bounce_url(self.bounce_url)

    def source_mapping(self) -> SourceMapping:
        """The mapping of the source relations (DUEFLOW_SOURCES_FILE, or the text of the
        DueflowSources block once `with_blocks` has loaded it), checked: one ConfigError
        line naming the file, source and column; dueflow's own names without one."""
        from dueflow.tasks.core.sources import DEFAULT_MAPPING, MappingError, parse_mapping

        if self.sources_text is None and not self.sources_file:
            return DEFAULT_MAPPING
        text, origin = _setting_text(self.sources_text, f"DueflowSources block {self.sources_block!r}",
                                     "DUEFLOW_SOURCES_FILE", self.sources_file)
        try:
            return parse_mapping(text, origin)
        except MappingError as exc:
            raise ConfigError(str(exc)) from None

    def with_blocks(self) -> Settings:
        """These settings with the blocks they name applied (blocks win). Needs the
        Prefect API, so it runs inside the flow."""
        settings = self
        if self.database_block:
            from dueflow.blocks.prefect_blocks import DueflowDatabase

            block = load_block(DueflowDatabase, self.database_block)
            settings = replace(settings, database_url=block.url.get_secret_value())
        if self.mail_block:
            from prefect_email import EmailServerCredentials

            settings = replace(settings, mail_url=mail_url_from_credentials(
                load_block(EmailServerCredentials, self.mail_block)))
        if self.llm_block:
            from dueflow.blocks.prefect_blocks import DueflowLLM

            block = load_block(DueflowLLM, self.llm_block)
            settings = replace(settings, llm=LLMConfig(api_key=block.api_key.get_secret_value(),
                                                       model=block.model, base_url=block.base_url))
        if self.sources_block:
            from dueflow.blocks.prefect_blocks import DueflowSources

            block = load_block(DueflowSources, self.sources_block)
            settings = replace(settings, sources_text=block.mapping)
            settings.source_mapping()
        if self.bounce_block:
            from dueflow.blocks.prefect_blocks import DueflowBounceMailbox

            block = load_block(DueflowBounceMailbox, self.bounce_block)
            settings = replace(settings, bounce_url=block.url.get_secret_value(),
                               bounce_address=block.address or settings.bounce_address)
            settings.bounce_mailbox()
            settings.sender()
        if self.email_block:
            from dueflow.blocks.prefect_blocks import DueflowEmail

            block = load_block(DueflowEmail, self.email_block)
            settings = replace(settings, **{name: value for name in EMAIL_FIELDS
                                            if (value := getattr(block, name, None)) not in (None, "")})
            if getattr(block, "profiles_file", None) and not getattr(block, "profiles_block", None):
                settings = replace(settings, profiles_block=None, profiles_text=None)  # this company's file
            if getattr(block, "phrasebook_file", None) and not getattr(block, "phrasebook_block", None):
                settings = replace(settings, phrasebook_block=None, phrasebook_text=None)
            settings.sender()
            settings.escalation_address()
            settings.email_look()
            settings.invoice_pdf_template()
        if settings.profiles_block and settings.profiles_text is None:
            from dueflow.blocks.prefect_blocks import DueflowProfiles

            block = load_block(DueflowProfiles, settings.profiles_block)
            settings = replace(settings, profiles_text=block.profiles)
        settings.profiles()
        if settings.phrasebook_block and settings.phrasebook_text is None:
            from dueflow.blocks.prefect_blocks import DueflowPhrasebook

            block = load_block(DueflowPhrasebook, settings.phrasebook_block)
            settings = replace(settings, phrasebook_text=block.phrasebook)
        settings.phrasebook()
        return settings

    def mail_config(self) -> MailConfig:
        """DUEFLOW_MAIL_URL parsed (ConfigError when it is not usable), with the SMTP
        timeouts of these settings."""
        from dueflow.blocks.endpoints import parse_mail_url

        return replace(parse_mail_url(self.mail_url), connect_timeout=self.smtp_connect_timeout,
                       reply_timeout=self.smtp_reply_timeout)

    def zone(self) -> ZoneInfo:
        try:
            return ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ConfigError(f"DUEFLOW_TIMEZONE={self.timezone!r} is not a known time zone") from None

    def sender(self) -> Sender:
        """DUEFLOW_MAIL_FROM parsed: the envelope address and the From header's name
        (DUEFLOW_MAIL_FROM_NAME wins), with DUEFLOW_REPLY_TO and the time zone of the
        Date header."""
        from dueflow.tasks.core.message import Sender

        try:
            mailbox = parse_mailbox(self.mail_from, "DUEFLOW_MAIL_FROM", dotted=False)
            reply_to = parse_mailbox(self.reply_to, "DUEFLOW_REPLY_TO") if self.reply_to else None
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        name = mailbox.display_name
        if self.mail_from_name:
            name = self.mail_from_name.strip()
            try:
                parse_mailbox(f"{name} <{mailbox.address}>", "DUEFLOW_MAIL_FROM_NAME", dotted=False)
            except ValueError:
                raise ConfigError(f"DUEFLOW_MAIL_FROM_NAME={self.mail_from_name!r} is not a usable"
                                  " name: one line, no angle brackets, at most 200 characters") from None
        envelope = None
        if self.bounce_address:  # MAIL FROM: bounces go there, replies to Reply-To
            try:
                envelope = parse_mailbox(self.bounce_address, "DUEFLOW_BOUNCE_ADDRESS").address
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
        return Sender(mailbox.address, name, reply_to=reply_to, timezone=self.timezone, envelope=envelope)

    def email_look(self) -> EmailLook:
        """What the emails say about the company (name, signature, how to pay, who to ask)
        and where override templates live, checked."""
        from dueflow.tasks.core.render import EmailLook, payment_link_problem

        if self.payment_link and (problem := payment_link_problem(self.payment_link)):
            raise ConfigError(f"DUEFLOW_PAYMENT_LINK={self.payment_link!r} {problem}")
        return EmailLook(company=self.company_name.strip(), signature=self.signature,
                         payment_instructions=self.payment_instructions,
                         payment_link=self.payment_link.strip(),
                         contract_contact=self.contract_contact.strip(),
                         templates_dir=self.templates_dir,
                         bcc=self.bcc_address() or "")

    def bcc_address(self) -> str | None:
        """DUEFLOW_BCC's address (a name, if given, is dropped: it is in no header), or None
        when it is not set; one ConfigError line when it is not one plain address."""
        if not self.bcc:
            return None
        try:
            return parse_mailbox(self.bcc, "DUEFLOW_BCC").address
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    def invoice_pdf_template(self) -> PdfTemplate | None:
        """DUEFLOW_INVOICE_PDF parsed, with DUEFLOW_INVOICE_PDF_MAX_BYTES; None when no
        invoice PDF is attached. One ConfigError line when it cannot be used."""
        from dueflow.tasks.core.invoice_pdf import TemplateError, parse_pdf_template

        if not self.invoice_pdf:
            return None
        try:
            return parse_pdf_template(self.invoice_pdf, self.invoice_pdf_max_bytes)
        except TemplateError as exc:
            raise ConfigError(str(exc)) from None

    def check_templates(self) -> None:
        """Every template a run can use renders with the documented variables (the
        packaged ones and DUEFLOW_TEMPLATES_DIR's): one ConfigError line otherwise. Run at
        start-up, before any write."""
        from dueflow.tasks.core.render import TemplateProblem, check_templates

        try:
            check_templates(self.email_look())
        except TemplateProblem as exc:
            raise ConfigError(str(exc)) from None

    def escalation_address(self) -> str | None:
        """DUEFLOW_ESCALATION_TO's address, or None when it is not set."""
        if self.escalation_to is None:
            return None
        try:
            return parse_mailbox(self.escalation_to, "DUEFLOW_ESCALATION_TO").address
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    def today(self) -> date:
        """Today in the business time zone: the default `as_of` of a run."""
        return datetime.now(self.zone()).date()


# What a DueflowEmail block may set (docs/configuration.md): everything that makes one
# company's emails its own, so that deployments sending for two companies differ only in
# the block they name (the flow's `email_block` parameter).
EMAIL_FIELDS = ("mail_from", "mail_from_name", "reply_to", "company_name", "signature",
                "payment_instructions", "payment_link", "contract_contact", "templates_dir",
                "escalation_to", "bcc", "invoice_pdf", "profiles_file", "profiles_block", "phrasebook_file",
                "phrasebook_block")


def _multiline(value: str | None) -> str:
    """A setting that may span lines: real line breaks, or `\\n` written in one line."""
    return (value or "").replace("\\n", "\n").strip()


def _email_from_env(env: Mapping[str, str]) -> dict[str, Any]:
    def one(name: str) -> str | None:
        return (env.get(name) or "").strip() or None

    return {
        "mail_from_name": one("DUEFLOW_MAIL_FROM_NAME"),
        "reply_to": one("DUEFLOW_REPLY_TO"),
        "company_name": one("DUEFLOW_COMPANY_NAME") or "",
        "signature": _multiline(env.get("DUEFLOW_SIGNATURE")),
        "payment_instructions": _multiline(env.get("DUEFLOW_PAYMENT_INSTRUCTIONS")),
        "payment_link": one("DUEFLOW_PAYMENT_LINK") or "",
        "contract_contact": one("DUEFLOW_CONTRACT_CONTACT") or "",
        "templates_dir": one("DUEFLOW_TEMPLATES_DIR"),
        "bcc": one("DUEFLOW_BCC"),
        "invoice_pdf": one("DUEFLOW_INVOICE_PDF"),
        "email_block": one("DUEFLOW_EMAIL_BLOCK"),
    }


_SCHEMA_NAME = re.compile(r"[^\x00-\x1f\x7f]{1,63}")


def _attention_state(env: Mapping[str, str]) -> str:
    raw = (env.get("DUEFLOW_ATTENTION_STATE") or "").strip()
    if not raw:
        return defaults.ATTENTION_STATE
    if raw.lower() not in defaults.ATTENTION_STATES:
        raise ConfigError(f"DUEFLOW_ATTENTION_STATE={raw!r} is not one of"
                          f" {', '.join(defaults.ATTENTION_STATES)}")
    return raw.lower()


def _schema_name(env: Mapping[str, str], name: str) -> str | None:
    value = (env.get(name) or "").strip()
    if not value:
        return None
    if not _SCHEMA_NAME.fullmatch(value):
        raise ConfigError(f"{name}={value[:80]!r} is not a schema name (1 to 63 characters, no"
                          " control characters)")
    return value


def load_block(block_class: Any, name: str) -> Any:
    try:
        return block_class.load(name)
    except ValueError as exc:
        raise ConfigError(f"cannot load {block_class.__name__} block {name!r}: {exc}") from None


def mail_url_from_credentials(credentials: Any) -> str:
    """A DUEFLOW_MAIL_URL equivalent of prefect-email's EmailServerCredentials: the server
    by name or by `SMTPServer` member (its host), `SMTPType` as the scheme and default
    port, and `verify=False` carried as `?verify=false`."""
    smtp_type = credentials.smtp_type
    smtp_type = getattr(smtp_type, "name", str(smtp_type)).upper()
    schemes = {"SSL": ("smtps", 465), "STARTTLS": ("smtp+starttls", 587), "INSECURE": ("smtp", 25)}
    if smtp_type not in schemes:
        raise ConfigError(f"mail block: unknown smtp_type {smtp_type!r} (SSL, STARTTLS or INSECURE)")
    scheme, default_port = schemes[smtp_type]
    server = credentials.smtp_server
    host = str(getattr(server, "value", server)).strip()  # an SMTPServer member is its host
    if not host:
        raise ConfigError("mail block: smtp_server is empty")
    auth = ""
    if credentials.username:
        password = credentials.password.get_secret_value() if credentials.password else ""
        auth = f"{quote(credentials.username, safe='')}:{quote(password, safe='')}@"
    port = credentials.smtp_port or default_port
    verify = "" if getattr(credentials, "verify", True) else "?verify=false"
    return f"{scheme}://{auth}{host}:{port}{verify}"


def redact_url(url: str) -> str:
    """A database URL for display: its password masked as SQLAlchemy reads it (the parser
    that connects; blocks/urls.py, `mask_url`, for any URL setting)."""
    from dueflow.blocks.urls import mask_url

    return mask_url(url, "DUEFLOW_DATABASE_URL")
