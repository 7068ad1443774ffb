"""Run configuration read from the environment (the public contract in DESIGN.md)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tasks.core.addresses import Mailbox, parse_mailbox


class ConfigError(ValueError):
    """A setting is missing or malformed; the message is meant for the operator."""


@dataclass(frozen=True)
class Settings:
    database_url: str = field(default="sqlite:///dueflow.db", repr=False)  # may hold a password
    mail_url: str = field(default="file://./outbox", repr=False)
    mail_from: str = "dueflow@localhost"
    escalation_to: str | None = None
    timezone: str = "UTC"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        defaults = cls()
        settings = cls(
            database_url=env.get("DUEFLOW_DATABASE_URL") or defaults.database_url,
            mail_url=env.get("DUEFLOW_MAIL_URL") or defaults.mail_url,
            mail_from=env.get("DUEFLOW_MAIL_FROM") or defaults.mail_from,
            escalation_to=env.get("DUEFLOW_ESCALATION_TO") or None,
            timezone=env.get("DUEFLOW_TIMEZONE") or defaults.timezone,
        )
        settings.zone()  # fail early on a bad time zone and bad addresses
        settings.sender()
        settings.escalation_address()
        return settings

    def with_blocks(self, env: Mapping[str, str] | None = None) -> Settings:
        """These settings with any block named in the environment applied (blocks win).
        Needs the Prefect API, so it runs inside the flow."""
        env = os.environ if env is None else env
        settings = self
        if name := env.get("DUEFLOW_DATABASE_BLOCK"):
            from blocks.prefect_blocks import DueflowDatabase

            block = load_block(DueflowDatabase, name)
            settings = replace(settings, database_url=block.url.get_secret_value())
        if name := env.get("DUEFLOW_MAIL_BLOCK"):
            from prefect_email import EmailServerCredentials

            settings = replace(settings, mail_url=mail_url_from_credentials(
                load_block(EmailServerCredentials, name)))
        return settings

    def zone(self) -> ZoneInfo:
        try:
            return ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ConfigError(f"DUEFLOW_TIMEZONE={self.timezone!r} is not a known time zone") from None

    def sender(self) -> Mailbox:
        """DUEFLOW_MAIL_FROM parsed: the envelope address and the From header's name."""
        try:
            return parse_mailbox(self.mail_from, "DUEFLOW_MAIL_FROM", dotted=False)
        except ValueError as exc:
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


def load_block(block_class: Any, name: str) -> Any:
    try:
        return block_class.load(name)
    except ValueError as exc:
        raise ConfigError(f"cannot load {block_class.__name__} block {name!r}: {exc}") from None


def mail_url_from_credentials(credentials: Any) -> str:
    """A DUEFLOW_MAIL_URL equivalent of prefect-email's EmailServerCredentials."""
    scheme = {"SSL": "smtps", "STARTTLS": "smtp+starttls", "INSECURE": "smtp"}[
        credentials.smtp_type.name]
    auth = ""
    if credentials.username:
        password = credentials.password.get_secret_value() if credentials.password else ""
        auth = f"{quote(credentials.username, safe='')}:{quote(password, safe='')}@"
    port = credentials.smtp_port or credentials.smtp_type.value
    return f"{scheme}://{auth}{credentials.smtp_server}:{port}"


def redact_url(url: str) -> str:
    """The URL with any password replaced by ***, safe for logs and artifacts."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    netloc = f"{parts.username}:***@{host}" if parts.username else f"***@{host}"
    return urlunsplit(parts._replace(netloc=netloc))
