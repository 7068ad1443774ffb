"""Transports: SMTP (plain, STARTTLS, SSL) and a file outbox, chosen by DUEFLOW_MAIL_URL.

Every send ends in one of three outcomes (G3, G4):
- `sent`: the server accepted the message (250 after DATA), or the file was written;
- `failed`: surely not sent — refused before acceptance (connect error, 4xx/5xx at
  MAIL, RCPT or DATA, or a refusal of the message content);
- `pending`: may have been delivered — the conversation broke after the content
  started to leave. Pending rows are never resent automatically.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import smtplib
import ssl
from dataclasses import dataclass, field
from email.header import Header
from email.utils import formataddr, formatdate, parseaddr
from pathlib import Path
from types import TracebackType
from typing import Literal
from urllib.parse import parse_qs, unquote, urlsplit

from blocks.settings import ConfigError
from tasks.compose import OutgoingEmail

Outcome = Literal["sent", "failed", "pending"]


@dataclass(frozen=True)
class SendResult:
    status: Outcome
    smtp_response: str | None = None
    error: str | None = None
    permanent: bool = False  # a 5xx refusal: retrying will not help


@dataclass(frozen=True)
class MailConfig:
    scheme: Literal["smtp", "smtps", "smtp+starttls", "file"]
    host: str = ""
    port: int = 0
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    directory: Path | None = None
    timeout: float = 30.0
    cafile: str | None = None  # ?cafile=/path/ca.pem: trust a private CA for TLS

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
    )


def _header(value: str) -> str:
    """A header value as it goes on the wire: plain ASCII as is, anything else RFC 2047."""
    if value.isascii() and len(value) < 900:
        return value
    return Header(value, "utf-8").encode(linesep="\r\n")


def _address(value: str) -> str:
    name, address = parseaddr(value)
    return formataddr((name, address), charset="utf-8") if name else address


def _part(content_type: str, body: str) -> bytes:
    return (f"Content-Type: {content_type}; charset=\"utf-8\"\r\n"
            "Content-Transfer-Encoding: base64\r\n\r\n").encode() + b"\r\n".join(
        base64.encodebytes(body.encode()).splitlines()) + b"\r\n"


def message_bytes(email: OutgoingEmail, mail_from: str) -> bytes:
    """The message exactly as sent: text and HTML alternatives, base64 bodies, CRLF lines.

    Written by hand rather than with email.message.EmailMessage, which costs over a
    millisecond a message — more than the SMTP conversation with a local relay. Header
    values arrive single-line (compose strips CR/LF); the body is base64, so no line of
    it can start with a dot or break the 998-character line limit."""
    boundary = "dueflow-" + email.message_id.strip("<>").split("@")[0][:24]
    head = (
        f"From: {_address(mail_from)}\r\n"
        f"To: {email.recipient}\r\n"
        f"Subject: {_header(email.subject)}\r\n"
        f"Date: {formatdate(localtime=False)}\r\n"
        f"Message-ID: {email.message_id}\r\n"
        f"X-Dueflow-Key: {email.key}\r\n"
        "MIME-Version: 1.0\r\n"
        f"Content-Type: multipart/alternative; boundary=\"{boundary}\"\r\n\r\n"
    )
    return b"".join([
        head.encode(),
        f"--{boundary}\r\n".encode(), _part("text/plain", email.body_text),
        f"--{boundary}\r\n".encode(), _part("text/html", email.body_html),
        f"--{boundary}--\r\n".encode(),
    ])


class Transport:
    """Sends rendered emails; use as a context manager so connections are closed."""

    def send(self, email: OutgoingEmail) -> SendResult:
        raise NotImplementedError

    def close(self) -> None:
        """Release the connection, if any."""

    def __enter__(self) -> Transport:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class _BrokeBeforeContent(Exception):
    """The SMTP conversation broke before any of the message left: surely not sent."""


def open_transport(config: MailConfig, mail_from: str) -> Transport:
    if config.scheme == "file":
        return FileOutbox(config, mail_from)
    return SmtpTransport(config, mail_from)


class FileOutbox(Transport):
    """Writes one .eml per message; a message is `sent` once its file is in place."""

    def __init__(self, config: MailConfig, mail_from: str) -> None:
        assert config.directory is not None
        self.directory = config.directory
        self.mail_from = mail_from
        self.directory.mkdir(parents=True, exist_ok=True)

    def send(self, email: OutgoingEmail) -> SendResult:
        name = re.sub(r"[^A-Za-z0-9._-]+", "_", email.key) + ".eml"
        final = self.directory / name
        partial = final.with_suffix(".eml.part")
        try:
            partial.write_bytes(message_bytes(email, self.mail_from))
            os.replace(partial, final)
        except OSError as exc:
            partial.unlink(missing_ok=True)
            return SendResult("failed", error=f"could not write {final}: {exc.strerror or exc}")
        return SendResult("sent", smtp_response=f"written to {final}")


def _smtp_text(code: int, reply: bytes | str) -> str:
    text = reply.decode(errors="replace") if isinstance(reply, bytes) else str(reply)
    return f"{code} {' '.join(text.split())}"


class SmtpTransport(Transport):
    """One SMTP connection, reused across messages and reopened when it breaks."""

    def __init__(self, config: MailConfig, mail_from: str) -> None:
        self.config = config
        self.mail_from = mail_from
        self._conn: smtplib.SMTP | None = None

    def _connect(self) -> smtplib.SMTP:
        cfg = self.config
        if cfg.scheme == "smtps":
            conn: smtplib.SMTP = smtplib.SMTP_SSL(
                cfg.host, cfg.port, timeout=cfg.timeout,
                context=ssl.create_default_context(cafile=cfg.cafile),
            )
        else:
            conn = smtplib.SMTP(cfg.host, cfg.port, timeout=cfg.timeout)
        conn.ehlo()
        if cfg.scheme == "smtp+starttls":
            conn.starttls(context=ssl.create_default_context(cafile=cfg.cafile))
            conn.ehlo()
        if cfg.username:
            conn.login(cfg.username, cfg.password or "")
        return conn

    def _drop(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None

    def send(self, email: OutgoingEmail) -> SendResult:
        reused = self._conn is not None
        try:
            return self._converse(email)
        except _BrokeBeforeContent as first:
            if not reused:
                return SendResult("failed", error=str(first))
        # A reused connection may have gone stale while idle: one try on a fresh one.
        try:
            return self._converse(email)
        except _BrokeBeforeContent as second:
            return SendResult("failed", error=str(second))

    def _converse(self, email: OutgoingEmail) -> SendResult:
        phase = "connect"
        try:
            if self._conn is None:
                self._conn = self._connect()
            conn = self._conn
            phase = "MAIL"
            code, reply = conn.mail(self.mail_from)
            if code != 250:
                return self._refused(phase, code, reply)
            phase = "RCPT"
            code, reply = conn.rcpt(email.recipient)
            if code not in (250, 251):
                return self._refused(phase, code, reply)
            phase = "DATA"
            conn.putcmd("data")
            code, reply = conn.getreply()
            if code != 354:
                return self._refused(phase, code, reply)
            payload = re.sub(rb"(?m)^\.", b"..", message_bytes(email, self.mail_from))
            phase = "content"  # from here on the server may have the message
            conn.send(payload + b".\r\n")
            code, reply = conn.getreply()
        except (smtplib.SMTPException, OSError) as exc:
            self._drop()
            detail = f"{type(exc).__name__}: {exc}"
            if phase == "content":
                return SendResult("pending", error=f"outcome unknown after DATA: {detail}")
            raise _BrokeBeforeContent(f"not sent: connection broke at {phase}: {detail}") from None
        if code == 250:
            return SendResult("sent", smtp_response=_smtp_text(code, reply))
        if 400 <= code < 600:
            return self._refused("end of DATA", code, reply)
        # Anything else after the content left is not a refusal we understand.
        self._drop()
        return SendResult("pending", error=f"unexpected reply after DATA: {_smtp_text(code, reply)}")

    def _refused(self, phase: str, code: int, reply: bytes | str) -> SendResult:
        text = _smtp_text(code, reply)
        try:
            assert self._conn is not None
            self._conn.rset()
        except (smtplib.SMTPException, OSError):
            self._drop()
        return SendResult(
            "failed", smtp_response=text, error=f"refused at {phase}: {text}", permanent=code >= 500
        )

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(smtplib.SMTPException, OSError):
                self._conn.quit()
            self._drop()
