"""Transports: SMTP (plain, STARTTLS, SSL) and a file outbox, chosen by DUEFLOW_MAIL_URL.

Every send ends in one of three outcomes (G3, G4):
- `sent`: the server accepted the message (250 after DATA), or the file was written;
- `failed`: surely not sent — refused before acceptance (connect error, 4xx/5xx at
  MAIL, RCPT or DATA, or a refusal of the message content);
- `pending`: may have been delivered — the conversation broke after the content
  started to leave. Pending rows are never resent automatically.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import smtplib
import threading
from collections.abc import Callable
from types import TracebackType

from dueflow.blocks.endpoints import MailConfig
from dueflow.tasks.adapters.invoice_files import attached_bytes
from dueflow.tasks.core.addresses import Mailbox
from dueflow.tasks.core.defaults import SMTP_MAX_CONNECTION_FAILURES
from dueflow.tasks.core.message import AttachmentChanged, OutgoingEmail, envelope_recipients, message_bytes
from dueflow.tasks.core.statuses import MailFault, SendResult, SendStatus


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


class BreakerOpen(Exception):
    """The night's delivery was stopped by its ServerBreaker: this email was not handed over."""


class ServerBreaker:
    """A night's circuit breaker on its mail server, shared by every delivery of the night
    (issue 25): it opens after `limit` connection faults in a row, or after one refused
    login — and only one login is tried at a time until one has succeeded, so a wrong
    password costs one attempt a night, not one per email and connection."""

    def __init__(self, limit: int = SMTP_MAX_CONNECTION_FAILURES) -> None:
        self.limit = limit
        self.in_a_row = 0
        self.fault: MailFault | None = None  # why it opened
        self.reason = ""  # what the server did, for the summary
        self.logged_in = False
        self._lock = threading.Lock()
        self._first_login = threading.Lock()

    @property
    def open(self) -> bool:
        return self.fault is not None

    def record(self, result: SendResult) -> None:
        with self._lock:
            if result.fault is MailFault.LOGIN:
                self._trip(MailFault.LOGIN, result.error or "")
            elif result.fault is MailFault.CONNECTION:
                self.in_a_row += 1
                if self.in_a_row >= self.limit:
                    self._trip(MailFault.CONNECTION, result.error or "")
            else:  # the server answered: it is up
                self.in_a_row = 0

    def _trip(self, fault: MailFault, reason: str) -> None:
        if self.fault is None:
            self.fault, self.reason = fault, reason

    def login(self, attempt: Callable[[], object]) -> None:
        """Run `attempt` (one login); until one succeeded tonight, one at a time."""
        if self.logged_in:
            attempt()
            return
        with self._first_login:
            if self.open:
                raise BreakerOpen(self.reason)
            if not self.logged_in:
                try:
                    attempt()
                except smtplib.SMTPAuthenticationError as exc:
                    with self._lock:  # set before the next waiting delivery looks
                        self._trip(MailFault.LOGIN, f"not sent: login refused: {_auth_text(exc)}")
                    raise
                self.logged_in = True
                return
        attempt()


def _auth_text(exc: smtplib.SMTPAuthenticationError) -> str:
    return _smtp_text(exc.smtp_code, exc.smtp_error)


def open_transport(config: MailConfig, sender: Mailbox, breaker: ServerBreaker | None = None) -> Transport:
    if config.scheme == "file":
        return FileOutbox(config, sender)
    return SmtpTransport(config, sender, breaker)


def outbox_name(key: str) -> str:
    """The .eml file name of a key: readable, and distinct for distinct keys (keys that
    only differ in characters a file name cannot hold get different hashes)."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", key)[:120]
    return f"{readable}.{hashlib.sha256(key.encode('utf-8', 'surrogatepass')).hexdigest()[:10]}.eml"


class FileOutbox(Transport):
    """Writes one .eml per message; a message is `sent` once its file is in place."""

    def __init__(self, config: MailConfig, sender: Mailbox) -> None:
        assert config.directory is not None
        self.directory = config.directory
        self.sender = sender
        self.directory.mkdir(parents=True, exist_ok=True)

    def send(self, email: OutgoingEmail) -> SendResult:
        final = self.directory / outbox_name(email.key)
        partial = final.with_suffix(".part")
        try:
            # What a recipient receives: the archive Bcc is in no header (a file has no envelope).
            partial.write_bytes(message_bytes(email, self.sender, attachment=attached_bytes(email),
                                              rider_attachments=[attached_bytes(r) for r in email.riders]))
            os.replace(partial, final)
        except (OSError, ValueError) as exc:
            partial.unlink(missing_ok=True)
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            return SendResult(SendStatus.FAILED, error=f"could not write {final}: {reason}")
        return SendResult(SendStatus.SENT, smtp_response=f"written to {final}")


def _smtp_text(code: int, reply: bytes | str) -> str:
    text = reply.decode(errors="replace") if isinstance(reply, bytes) else str(reply)
    return f"{code} {' '.join(text.split())}"


def _login_once(conn: smtplib.SMTP, user: str, password: str) -> None:
    """AUTH with one mechanism, once. smtplib's `login` tries each mechanism the server
    offers in turn: two or three refused logins per connection, a lockout risk."""
    if not conn.has_extn("auth"):
        raise smtplib.SMTPNotSupportedError("SMTP AUTH extension not supported by server.")
    offered = conn.esmtp_features["auth"].upper().split()
    mechanism = next((m for m in ("CRAM-MD5", "PLAIN", "LOGIN") if m in offered), None)
    if mechanism is None:
        raise smtplib.SMTPException("No suitable authentication method found.")
    conn.user, conn.password = user, password
    code, reply = conn.auth(mechanism, getattr(conn, "auth_" + mechanism.lower().replace("-", "_")))
    if code not in (235, 503):  # 503: already authenticated
        raise smtplib.SMTPAuthenticationError(code, reply)


class SmtpTransport(Transport):
    """One SMTP connection, reused across messages and reopened when it breaks."""

    def __init__(self, config: MailConfig, sender: Mailbox, breaker: ServerBreaker | None = None) -> None:
        self.config = config
        self.sender = sender
        self.breaker = breaker or ServerBreaker()
        self._conn: smtplib.SMTP | None = None

    def _connect(self) -> smtplib.SMTP:
        """A connection ready for MAIL FROM: every step up to the login within the connect
        timeout, each later reply within the reply timeout."""
        cfg = self.config
        # Connecting (TCP, TLS, the greeting) is part of making the object.
        if cfg.scheme == "smtps":
            conn: smtplib.SMTP = smtplib.SMTP_SSL(cfg.host, cfg.port, timeout=cfg.connect_timeout,
                                                  context=cfg.tls_context())
        else:
            conn = smtplib.SMTP(cfg.host, cfg.port, timeout=cfg.connect_timeout)
        try:
            conn.ehlo()
            if cfg.scheme == "smtp+starttls":
                conn.starttls(context=cfg.tls_context())
                conn.ehlo()
            if cfg.username:
                self.breaker.login(lambda: _login_once(conn, cfg.username or "", cfg.password or ""))
            if conn.sock is not None:
                conn.sock.settimeout(cfg.reply_timeout)
        except BaseException:
            conn.close()
            raise
        return conn

    def handshake(self) -> tuple[int, str]:
        """Connect, EHLO, STARTTLS and log in exactly as a send does, then offer the sender
        (MAIL FROM) and take it back (RSET): no message is sent (`dueflow check`). Returns
        the server's reply to MAIL FROM, its code and its text; raises what connecting or
        logging in raises."""
        conn = self._connect()
        try:
            code, reply = conn.mail(getattr(self.sender, "envelope_address", self.sender.address))
            conn.rset()
            return code, _smtp_text(code, reply)
        finally:
            with contextlib.suppress(smtplib.SMTPException, OSError):
                conn.quit()
            conn.close()

    def _drop(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None

    def send(self, email: OutgoingEmail) -> SendResult:
        """Hand one email over. Raises BreakerOpen, before anything of it left, once the
        night's breaker is open; every outcome is recorded in the breaker."""
        if self.breaker.open:
            raise BreakerOpen(self.breaker.reason)
        result = self._send(email)
        self.breaker.record(result)
        return result

    def _send(self, email: OutgoingEmail) -> SendResult:
        reused = self._conn is not None
        try:
            return self._converse(email)
        except _BrokeBeforeContent as first:
            if not reused or self.breaker.open:
                return SendResult(SendStatus.FAILED, error=str(first), fault=MailFault.CONNECTION)
        # A reused connection may have gone stale while idle: one try on a fresh one.
        try:
            return self._converse(email)
        except _BrokeBeforeContent as second:
            return SendResult(SendStatus.FAILED, error=str(second), fault=MailFault.CONNECTION)

    def _converse(self, email: OutgoingEmail) -> SendResult:
        phase = "build"
        refused_copies: list[str] = []
        try:
            # Built first: an email no header can carry, or whose invoice PDF is no longer the
            # one stored with it, fails before any byte leaves.
            payload = re.sub(rb"(?m)^\.", b"..", message_bytes(email, self.sender,
                                                                attachment=attached_bytes(email),
                                                                rider_attachments=[attached_bytes(r)
                                                                                   for r in email.riders]))
            phase = "connect"
            if self._conn is None:
                self._conn = self._connect()
            conn = self._conn
            phase = "MAIL"
            code, reply = conn.mail(getattr(self.sender, "envelope_address", self.sender.address))
            if code != 250:
                return self._refused(phase, code, reply)
            phase = "RCPT"
            code, reply = conn.rcpt(email.recipient)
            if code not in (250, 251):
                return self._refused(phase, code, reply)
            # The copies (Cc, the archive Bcc) are recipients of the envelope too. The email
            # is the recipient's: a copy refused is said in the reply recorded, never a
            # reason to hold back, or to send again, what the recipient is owed.
            for copy in envelope_recipients(email)[1:]:
                code, reply = conn.rcpt(copy)
                if code not in (250, 251):
                    refused_copies.append(f"copy to {copy} refused: {_smtp_text(code, reply)}")
            phase = "DATA"
            conn.putcmd("data")
            code, reply = conn.getreply()
            if code != 354:
                return self._refused(phase, code, reply)
            phase = "content"  # from here on the server may have the message
            conn.send(payload + b".\r\n")
            code, reply = conn.getreply()
        except BreakerOpen:
            raise
        except smtplib.SMTPAuthenticationError as exc:
            self._drop()
            return SendResult(SendStatus.FAILED, smtp_response=_auth_text(exc),
                              error=f"not sent: login refused: {_auth_text(exc)}", fault=MailFault.LOGIN)
        except Exception as exc:
            detail = f"{type(exc).__name__}: {exc}"
            broke = isinstance(exc, smtplib.SMTPException | OSError)  # the connection, not the email
            if phase == "build":
                # An invoice PDF that changed or vanished may come back (restored from a
                # backup): retried under the attempts and back-off, not as a refusal.
                return SendResult(SendStatus.FAILED, error=f"not sent: cannot build the message: {exc}",
                                  permanent=not isinstance(exc, AttachmentChanged))
            self._drop()
            if phase == "content":
                return SendResult(SendStatus.PENDING, error=f"outcome unknown after DATA: {detail}",
                                  fault=MailFault.CONNECTION if broke else None)
            if not broke:
                # Not the connection: nothing left, and trying again would fail the same way.
                return SendResult(SendStatus.FAILED, error=f"not sent: error at {phase}: {detail}")
            raise _BrokeBeforeContent(f"not sent: connection broke at {phase}: {detail}") from None
        if code == 250:
            return SendResult(SendStatus.SENT, smtp_response="; ".join([_smtp_text(code, reply),
                                                                        *refused_copies]))
        if 400 <= code < 600:
            return self._refused("end of DATA", code, reply)
        # Anything else after the content left is not a refusal we understand.
        self._drop()
        return SendResult(SendStatus.PENDING,
                          error=f"unexpected reply after DATA: {_smtp_text(code, reply)}")

    def _refused(self, phase: str, code: int, reply: bytes | str) -> SendResult:
        text = _smtp_text(code, reply)
        try:
            assert self._conn is not None
            self._conn.rset()
        except (smtplib.SMTPException, OSError):
            self._drop()
        return SendResult(SendStatus.FAILED, smtp_response=text, error=f"refused at {phase}: {text}",
                          permanent=code >= 500)

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(smtplib.SMTPException, OSError):
                self._conn.quit()
            self._drop()
