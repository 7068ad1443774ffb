"""Run configuration read from the environment (the public contract in DESIGN.md)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from urllib.parse import urlsplit, urlunsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


class ConfigError(ValueError):
    """A setting is missing or malformed; the message is meant for the operator."""


@dataclass(frozen=True)
class Settings:
    database_url: str = "sqlite:///dueflow.db"
    mail_url: str = "file://./outbox"
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
        settings.zone()  # fail early on a bad time zone
        return settings

    def zone(self) -> ZoneInfo:
        try:
            return ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ConfigError(f"DUEFLOW_TIMEZONE={self.timezone!r} is not a known time zone") from None

    def today(self) -> date:
        """Today in the business time zone: the default `as_of` of a run."""
        return datetime.now(self.zone()).date()


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
