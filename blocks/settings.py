"""Settings: the settings' table (blocks/table.py) read from the environment — here and
nowhere else — with the Prefect blocks that override it and a run's parameters that are
settings too; and each setting's checked view (the sender, the calendar, the profiles…).
The public contract of the variables is docs/design.md; their list, docs/configuration.md."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from dueflow.blocks.errors import ConfigError
from dueflow.blocks.parsers import on_off
from dueflow.blocks.table import (
    BLOCK_TYPES,
    MAIL_SERVER,
    PARAMETERS,
    SETTINGS,
    BlockType,
    SettingsTable,
    carried_by,
    naming,
)
from dueflow.tasks.core import defaults
from dueflow.tasks.core.addresses import parse_mailbox

if TYPE_CHECKING:
    from dueflow.blocks.endpoints import BounceConfig, MailConfig
    from dueflow.tasks.core.calendar import BusinessCalendar
    from dueflow.tasks.core.charges import Rates
    from dueflow.tasks.core.guard import Bounds
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
class Settings(SettingsTable):
    """The settings of a process — or of a run, with its parameters and blocks — checked."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """The settings of this process's environment, checked: a bad value is one
        ConfigError naming the variable, before anything is written."""
        env = os.environ if env is None else env
        values = {}
        for row in SETTINGS:  # an empty or unset variable is its row's default
            if row.variable and (text := (env.get(row.variable) or "").strip()):
                values[row.field] = row.parse(text, row.variable)
        return cls(**values).checked()

    def checked(self) -> Settings:
        """These settings, each tried the way a run uses it: one ConfigError line for the
        first that cannot be used (fail early, before anything is read or written)."""
        from dueflow.blocks.urls import read_url

        for row in SETTINGS:
            if row.url and row.variable and (url := getattr(self, row.field)):
                read_url(url, row.variable)  # one line, the URL not shown
        self.zone()
        self.sender()
        self.escalation_address()
        self.email_look()
        self.invoice_pdf_template()
        self.source_mapping()
        self.bounce_mailbox()
        self.calendar()
        self.minimums()
        if self.profiles().interest() and not self.rates().reference:
            raise ConfigError("a dunning profile states statutory interest (interest = [...]) but"
                              " DUEFLOW_REFERENCE_RATES is not set: set the reference rates, e.g."
                              " DUEFLOW_REFERENCE_RATES='2026-01-01 2.15, 2026-07-01 2.15'")
        self.phrasebook()
        return self

    def guard_bounds(self) -> Bounds | None:
        """What an ordinary night may do (tasks/core/guard.py); None with DUEFLOW_GUARD off."""
        from dueflow.tasks.core.guard import Bounds

        return Bounds(self.guard_min_emails, self.guard_factor, self.guard_open_share) if self.guard else None

    def with_parameters(self, **parameters: object) -> Settings:
        """These settings with a run's parameters that are settings too (the table's
        `parameter`), one reading for each: an on/off parameter switches its setting on for
        the run and never off (the variable switched on holds for every run: either on is
        on); any other, when given, wins over its variable for the run and, empty, keeps it
        (`email_block`, `dunning_start`). A value of the wrong kind is one ConfigError line."""
        from dueflow.tasks.core.parameters import SETTING_PARAMETERS, ParameterError, flag_of

        changes: dict[str, Any] = {}
        for name, value in parameters.items():
            row = PARAMETERS[name]
            try:
                if row.parse is on_off:
                    changes[row.field] = flag_of(name, value) or getattr(self, row.field)
                elif value is not None and str(value).strip():  # empty keeps the variable
                    changes[row.field] = SETTING_PARAMETERS[name](value)
            except ParameterError as exc:
                raise ConfigError(str(exc)) from None
        return replace(self, **changes)

    def with_blocks(self) -> Settings:
        """These settings with the blocks they name applied, in the order of BLOCK_TYPES (a
        block may name the next), then checked: a field of a block wins over its variable,
        an empty one keeps it unless the block type replaces all it carries. Needs the
        Prefect API, so it runs inside the flow."""
        settings = self
        for kind in BLOCK_TYPES:
            name = getattr(settings, naming(kind).field)
            if name:
                settings = replace(settings, **_carried(load_block(block_class(kind), name), kind))
        return settings.checked()

    @property
    def llm(self) -> LLMConfig | None:
        """The model, or None (drafting off) without an API key."""
        if not self.llm_api_key:
            return None
        return LLMConfig(api_key=self.llm_api_key, model=self.llm_model, base_url=self.llm_base_url)

    def secrets(self) -> list[str]:
        """Every secret these settings hold, in each form it may be written: to scrub them
        from any text."""
        from dueflow.blocks.urls import secrets_of

        return secrets_of({row.variable: getattr(self, row.field) for row in SETTINGS if row.variable})

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
            return BusinessCalendar(parse_business_days(self.business_days), country, subdiv, closed,
                                    self.operator_language)
        except CalendarError as exc:
            raise ConfigError(str(exc)) from None

    def minimums(self) -> dict[str, Decimal]:
        """DUEFLOW_DUNNING_MINIMUM parsed: per currency, no reminder below it."""
        from dueflow.tasks.core.money import parse_minimums

        try:
            return parse_minimums(self.dunning_minimum)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    def rates(self) -> Rates:
        """DUEFLOW_REFERENCE_RATES and DUEFLOW_LATE_COMPENSATION parsed (statutory interest)."""
        from dueflow.tasks.core.charges import Rates, parse_compensation, parse_rates

        try:
            return Rates(parse_rates(self.reference_rates), parse_compensation(self.late_compensation))
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

    def bounce_mailbox(self) -> BounceConfig | None:
        """DUEFLOW_BOUNCE_URL parsed, or None when no bounce mailbox is configured; a bad URL
        is one ConfigError line, its password masked."""
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


def block_class(kind: BlockType) -> Any:
    """The class of a block type: blocks/prefect_blocks.py's, or another package's."""
    import importlib

    return getattr(importlib.import_module(kind.module or "dueflow.blocks.prefect_blocks"), kind.name)


def _carried(block: Any, kind: BlockType) -> dict[str, Any]:
    """The settings a loaded block gives, by Settings attribute."""
    changes: dict[str, Any] = {}
    for row in carried_by(kind):
        value: Any = getattr(block, row.block_field, None)
        if kind is MAIL_SERVER:  # prefect-email's block: its server and login as one URL
            from dueflow.blocks.endpoints import mail_url_from_credentials

            value = mail_url_from_credentials(block)
        elif hasattr(value, "get_secret_value"):
            value = value.get_secret_value()
        if value not in (None, "") or not kind.empty_keeps_variable:
            changes[row.field] = value
    for row in carried_by(kind):
        # A company's own file, given by this block, wins over a block of the same text
        # that the environment named (DUEFLOW_PROFILES_BLOCK beside an emails' block's file).
        if row.text_block and row.field in changes and naming(row.text_block).field not in changes:
            changes[naming(row.text_block).field] = None
            changes |= {text.field: None for text in carried_by(row.text_block)}
    return changes


def load_block(block_class: Any, name: str) -> Any:
    try:
        return block_class.load(name)
    except ValueError as exc:
        raise ConfigError(f"cannot load {block_class.__name__} block {name!r}: {exc}") from None


def redact_url(url: str) -> str:
    """A database URL for display: its password masked as SQLAlchemy reads it (the parser
    that connects; blocks/urls.py, `mask_url`, for any URL setting)."""
    from dueflow.blocks.urls import mask_url

    return mask_url(url, "DUEFLOW_DATABASE_URL")
