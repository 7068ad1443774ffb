"""The email on the wire, built in one place (G6): every header value that comes from data
is encoded (RFC 2047) or refused, so no value can add a header line, end the headers
early or put raw 8-bit bytes in them; every line stays far below 998 octets.

Written by hand rather than with email.message.EmailMessage, which costs over a
millisecond a message — more than the SMTP conversation with a local relay.
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import asdict, dataclass
from datetime import datetime
from email.header import Header
from email.utils import format_datetime
from typing import Any

from dueflow.tasks.core.addresses import Mailbox, is_address

HEADER_NAMES = ("From", "To", "Subject", "Date", "Message-ID", "X-Dueflow-Key", "MIME-Version",
                "Content-Type")
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_PLAIN = re.compile(r"[\x21-\x7e]+(?: [\x21-\x7e]+)*")  # printable ASCII words, single spaces
_PLAIN_MAX = 900  # a plain value this long still leaves its line far below 998 octets
_MESSAGE_ID = re.compile(r"<[A-Za-z0-9._%+$=-]{1,64}@[A-Za-z0-9.-]{1,200}>")


@dataclass(frozen=True)
class OutgoingEmail:
    """One rendered email, exactly as stored on its ledger row and sent."""

    key: str
    recipient: str
    subject: str
    body_text: str
    body_html: str
    message_id: str
    draft_source: str | None = None  # dunning reminders: 'llm' or 'template' paragraph
    draft_note: str | None = None  # why the template was used, or the model's tone

    def as_row(self) -> dict[str, Any]:
        return asdict(self)


def message_id_for(key: str, sender: Mailbox) -> str:
    """Deterministic Message-ID: the same key always yields the same id."""
    return f"<{hashlib.sha256(key.encode('utf-8', 'surrogatepass')).hexdigest()[:32]}@{sender.domain}>"


def header_value(name: str, value: str) -> str:
    """`value` ready to follow `name: `. Plain ASCII text stays readable; anything else —
    non-ASCII, runs of spaces, text that looks like an encoded word (`=?…?=`), very long
    text — becomes RFC 2047 encoded words, folded with CRLF, which decode back to exactly
    `value`. Control characters are refused: data must be cleaned before it is a header."""
    if _UNSAFE.search(value):
        raise ValueError(f"{name} header value contains control characters: {value[:60]!r}")
    if _PLAIN.fullmatch(value) and "=?" not in value and len(value) <= _PLAIN_MAX:
        return value
    return Header(value, "utf-8", header_name=name).encode(linesep="\r\n")


def mailbox_header(mailbox: Mailbox) -> str:
    """A mailbox for From: the name quoted or encoded, the address bare."""
    name = mailbox.display_name
    if not name:
        return mailbox.address
    if _PLAIN.fullmatch(name) and "=?" not in name and len(name) <= 200:
        return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + f'" <{mailbox.address}>'
    return f"{header_value('From', name)} <{mailbox.address}>"


def _part(content_type: str, body: str) -> bytes:
    return (f"Content-Type: {content_type}; charset=\"utf-8\"\r\n"
            "Content-Transfer-Encoding: base64\r\n\r\n").encode() + b"\r\n".join(
        base64.encodebytes(body.encode("utf-8", "replace")).splitlines()) + b"\r\n"


def message_bytes(email: OutgoingEmail, sender: Mailbox, now: datetime | None = None) -> bytes:
    """The message exactly as sent: text and HTML alternatives, base64 bodies, CRLF lines.
    Raises ValueError for an email no header can carry (the send then fails before any
    byte leaves: `failed`, never `pending`)."""
    if not is_address(email.recipient):
        raise ValueError(f"recipient is not a plain email address: {email.recipient[:60]!r}")
    if not _MESSAGE_ID.fullmatch(email.message_id):
        raise ValueError(f"malformed Message-ID: {email.message_id[:60]!r}")
    boundary = "dueflow-" + email.message_id[1:25]
    head = (
        f"From: {mailbox_header(sender)}\r\n"
        f"To: {email.recipient}\r\n"
        f"Subject: {header_value('Subject', email.subject)}\r\n"
        f"Date: {format_datetime(now or datetime.now().astimezone())}\r\n"
        f"Message-ID: {email.message_id}\r\n"
        f"X-Dueflow-Key: {header_value('X-Dueflow-Key', email.key)}\r\n"
        "MIME-Version: 1.0\r\n"
        f"Content-Type: multipart/alternative; boundary=\"{boundary}\"\r\n\r\n"
    )
    return b"".join([
        head.encode("ascii"),
        f"--{boundary}\r\n".encode(), _part("text/plain", email.body_text),
        f"--{boundary}\r\n".encode(), _part("text/html", email.body_html),
        f"--{boundary}--\r\n".encode(),
    ])
