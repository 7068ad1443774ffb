"""A real SMTP server (aiosmtpd) that records what it accepts and injects faults
at the protocol level, keyed by recipient address."""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult

FAULTS = ("rcpt_451", "rcpt_550", "data_554", "drop_before_data_reply")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class SmtpSink:
    """Accepted messages in `messages`; set `faults[recipient] = fault` to misbehave."""

    port: int = field(default_factory=free_port)
    messages: list[EmailMessage] = field(default_factory=list)
    raw: list[bytes] = field(default_factory=list)  # each accepted message as it arrived
    envelope_from: list[str] = field(default_factory=list)  # MAIL FROM of each message
    envelope_to: list[list[str]] = field(default_factory=list)  # RCPT TO of each accepted message
    on_data: Callable[[str], None] | None = None  # called with each key as its DATA arrives
    faults: dict[str, str] = field(default_factory=dict)
    data_seen: list[str] = field(default_factory=list)  # keys whose content reached us
    data_at: list[float] = field(default_factory=list)  # time.monotonic() of each, in order
    delay: float = 0.0  # seconds to think before answering DATA: a slow server
    gate: threading.Event = field(default_factory=threading.Event)  # DATA waits while unset
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.gate.set()

    tls: str | None = None  # None, "starttls" or "ssl" (implicit TLS)
    login: tuple[str, str] | None = None  # require AUTH with this user and password
    certfile: str | None = None  # with tls: the server's certificate and key (PEM)
    ehlos: int = 0  # EHLO greetings seen: one per plain connection
    logins: int = 0  # AUTH attempts seen, right or wrong
    plain_auth: bool = False  # offer AUTH without TLS (a test of login refusals)

    def start(self) -> None:
        kwargs: dict = {}
        if self.tls:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(self.certfile)
            kwargs["ssl_context" if self.tls == "ssl" else "tls_context"] = context
        if self.login:
            # With implicit TLS aiosmtpd cannot tell the socket is encrypted: allow AUTH.
            # PLAIN only: aiosmtpd's LOGIN after a failed PLAIN leaves smtplib waiting.
            kwargs |= {"auth_required": True, "authenticator": self._authenticate,
                       "auth_require_tls": self.tls != "ssl" and not self.plain_auth,
                       "auth_exclude_mechanism": ["LOGIN"]}
        self._controller = Controller(_Handler(self), hostname="127.0.0.1", port=self.port,
                                      **kwargs)
        self._controller.start()

    def _authenticate(self, server, session, envelope, mechanism, auth_data) -> AuthResult:
        login = (auth_data.login.decode(), auth_data.password.decode())
        with self.lock:
            self.logins += 1
        return AuthResult(success=login == self.login, handled=False)  # False: answer 535

    def stop(self) -> None:
        self._controller.stop()

    def keys(self) -> list[str]:
        with self.lock:
            return [str(m["X-Dueflow-Key"]) for m in self.messages]

    def by_key(self) -> dict[str, EmailMessage]:
        with self.lock:
            return {str(m["X-Dueflow-Key"]): m for m in self.messages}


class _Handler:
    def __init__(self, sink: SmtpSink) -> None:
        self.sink = sink

    async def handle_EHLO(self, server, session, envelope, hostname, responses):
        session.host_name = hostname
        with self.sink.lock:
            self.sink.ehlos += 1
        return responses

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        fault = self.sink.faults.get(address)
        if fault == "rcpt_451":
            return "451 4.3.0 Mailbox temporarily unavailable"
        if fault == "rcpt_550":
            return "550 5.1.1 No such user"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        message = message_from_bytes(envelope.content, policy=policy.default)
        fault = next((self.sink.faults.get(r) for r in envelope.rcpt_tos if r in self.sink.faults),
                     None)
        with self.sink.lock:
            self.sink.data_seen.append(str(message["X-Dueflow-Key"]))
            self.sink.data_at.append(time.monotonic())
            self.sink.envelope_from.append(envelope.mail_from)
        if self.sink.on_data is not None:
            await asyncio.get_running_loop().run_in_executor(
                None, self.sink.on_data, str(message["X-Dueflow-Key"]))
        if self.sink.delay:
            await asyncio.sleep(self.sink.delay)
        while not self.sink.gate.is_set():
            await asyncio.sleep(0.01)
        if fault == "data_554":
            return "554 5.6.0 Message rejected"
        if fault == "drop_before_data_reply":
            server.transport.abort()
            return "250 OK"  # never reaches the client: the connection is gone
        with self.sink.lock:
            self.sink.messages.append(message)
            self.sink.raw.append(envelope.original_content or envelope.content)
            self.sink.envelope_to.append(list(envelope.rcpt_tos))
        return "250 OK queued"
