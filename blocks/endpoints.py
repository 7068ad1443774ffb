"""Where mail goes and where bounces are read: the URL settings DUEFLOW_MAIL_URL (or the
prefect-email block that stands for it) and DUEFLOW_BOUNCE_URL parsed into the
configuration the adapters connect with (tasks/adapters/mail.py, tasks/adapters/mailbox.py).
Parsing is a setting's business: a URL that cannot be used is one ConfigError line at
start-up, its password never shown. Their options that are switches (`?verify=`,
`?delete=`) are read by the settings' one on/off parser."""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast, get_args
from urllib.parse import parse_qs, quote, unquote, urlsplit

from dueflow.blocks.errors import ConfigError
from dueflow.blocks.parsers import on_off
from dueflow.blocks.urls import mask_url, read_url
from dueflow.tasks.core.defaults import SMTP_CONNECT_TIMEOUT, SMTP_REPLY_TIMEOUT


@dataclass(frozen=True)
class MailConfig:
    """Where mail goes (DUEFLOW_MAIL_URL, or a prefect-email block turned into one)."""

    scheme: Literal["smtp", "smtps", "smtp+starttls", "file"]
    host: str = ""
    port: int = 0
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    directory: Path | None = None
    # Up to the login (TCP, greeting, EHLO, TLS, AUTH), then for each later reply.
    connect_timeout: float = SMTP_CONNECT_TIMEOUT
    reply_timeout: float = SMTP_REPLY_TIMEOUT
    cafile: str | None = None  # ?cafile=/path/ca.pem: trust a private CA for TLS
    verify: bool = True  # ?verify=false: TLS without checking the server's certificate

    def tls_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.cafile)
        if not self.verify:  # the operator's explicit choice (EmailServerCredentials.verify)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context

    def describe(self) -> str:
        """Where mail goes, without credentials."""
        if self.scheme == "file":
            return f"the folder {self.directory}/ (one .eml per email)"
        return f"{self.scheme}://{self.host}:{self.port}"


def parse_mail_url(url: str) -> MailConfig:
    """MailConfig from `smtp://`, `smtps://`, `smtp+starttls://` or `file://` URLs."""
    if url.startswith("file://"):
        path = url[len("file://"):]
        if not path:
            raise ConfigError("DUEFLOW_MAIL_URL file:// needs a directory, e.g. file://./outbox")
        return MailConfig(scheme="file", directory=Path(unquote(path)))
    read_url(url, "DUEFLOW_MAIL_URL")  # a password that moved the host: one line, not shown
    parts = urlsplit(url)
    defaults = {"smtp": 25, "smtp+starttls": 587, "smtps": 465}
    if parts.scheme not in defaults or not parts.hostname:
        raise ConfigError(
            "DUEFLOW_MAIL_URL must look like smtp://host:port, smtp+starttls://user:pass@host:587,"
            " smtps://user:pass@host:465 or file:///dir"
        )
    try:
        port = parts.port or defaults[parts.scheme]
    except ValueError:
        raise ConfigError("DUEFLOW_MAIL_URL has an invalid port") from None
    query = parse_qs(parts.query)
    return MailConfig(
        scheme=parts.scheme,  # type: ignore[arg-type]
        host=parts.hostname,
        port=port,
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password else None,
        cafile=query["cafile"][0] if "cafile" in query else None,
        verify=on_off(query.get("verify", ["true"])[0], "DUEFLOW_MAIL_URL ?verify"),
    )


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


Processed = Literal["flag", "move", "delete"]
Scheme = Literal["imaps", "imap+starttls", "imap", "maildir", "mbox"]
SCHEMES: tuple[Scheme, ...] = get_args(Scheme)


@dataclass(frozen=True)
class BounceConfig:
    """Where bounces are read (DUEFLOW_BOUNCE_URL, or a DueflowBounceMailbox block)."""

    scheme: Scheme
    host: str = ""
    port: int = 0
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    folder: str = "INBOX"
    path: Path | None = None
    processed: Processed = "flag"
    move_to: str | None = None
    cafile: str | None = None
    verify: bool = True
    timeout: float = 30.0

    @property
    def is_imap(self) -> bool:
        return self.scheme.startswith("imap")

    def describe(self) -> str:
        """Where the bounces are read, without credentials."""
        if not self.is_imap:
            return f"{self.scheme}://{self.path}"
        return f"{self.scheme}://{self.host}:{self.port}/{self.folder}"

    def tls_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.cafile)
        if not self.verify:  # the operator's explicit choice
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context


def parse_bounce_url(url: str) -> BounceConfig:
    """BounceConfig from `imaps://user:pass@host[:993]/FOLDER`, `imap+starttls://…`,
    `imap://…`, `maildir:///path` or `mbox:///path/file`, with `?move_to=FOLDER`,
    `?delete=yes`, `?cafile=…`, `?verify=false`, `?timeout=SECONDS`. ConfigError (the
    password masked) for anything else."""
    read_url(url, "DUEFLOW_BOUNCE_URL")  # a password that needs percent-encoding: one line
    shown = mask_url(url, "DUEFLOW_BOUNCE_URL")
    parts = urlsplit(url)
    port = parts.port
    if parts.scheme.lower() not in SCHEMES:
        raise ConfigError(f"DUEFLOW_BOUNCE_URL={shown!r}: use imaps://user:pass@host/INBOX,"
                          " imap+starttls://…, maildir:///path or mbox:///path")
    scheme = cast(Scheme, parts.scheme.lower())
    query = {name: values[-1] for name, values in parse_qs(parts.query).items()}
    unknown = set(query) - {"move_to", "delete", "cafile", "verify", "timeout"}
    if unknown:
        raise ConfigError(f"DUEFLOW_BOUNCE_URL={shown!r}: unknown option(s) {', '.join(sorted(unknown))}")
    processed: Processed = "flag"
    if query.get("move_to"):
        processed = "move"
    if on_off(query.get("delete", "off"), "DUEFLOW_BOUNCE_URL ?delete"):
        if processed == "move":
            raise ConfigError(f"DUEFLOW_BOUNCE_URL={shown!r}: move_to and delete exclude each other")
        processed = "delete"
    try:
        timeout = float(query.get("timeout", 30))
    except ValueError:
        raise ConfigError(f"DUEFLOW_BOUNCE_URL={shown!r}: timeout is not a number of seconds") from None
    common: dict[str, Any] = {"processed": processed, "move_to": query.get("move_to") or None,
                              "timeout": timeout}
    if scheme in ("maildir", "mbox"):
        path = unquote(parts.netloc + parts.path)
        if not path:
            raise ConfigError(f"DUEFLOW_BOUNCE_URL={shown!r}: no path")
        return BounceConfig(scheme, path=Path(path).expanduser(), **common)
    if not parts.hostname:
        raise ConfigError(f"DUEFLOW_BOUNCE_URL={shown!r}: no host")
    if not parts.username:
        raise ConfigError(f"DUEFLOW_BOUNCE_URL={shown!r}: no user to log in as (imaps://user:pass@host/INBOX)")
    folder = unquote(parts.path.lstrip("/")) or "INBOX"
    return BounceConfig(scheme, parts.hostname, port or (993 if scheme == "imaps" else 143),
                        unquote(parts.username), unquote(parts.password or ""), folder,
                        cafile=query.get("cafile"),
                        verify=on_off(query.get("verify", "on"), "DUEFLOW_BOUNCE_URL ?verify"), **common)
