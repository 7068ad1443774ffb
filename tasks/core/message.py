"""The email on the wire, built in one place (G6): every header value that comes from data
is encoded (RFC 2047) or refused, so no value can add a header line, end the headers
early or put raw 8-bit bytes in them; every line stays far below 998 octets.

Written by hand rather than with email.message.EmailMessage, which costs over a
millisecond a message — more than the SMTP conversation with a local relay. The bodies
are quoted-printable: plain ASCII reads as it is in an editor, and every line stays short.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import asdict, dataclass
from datetime import datetime
from email.utils import format_datetime
from functools import cache
from typing import Any
from zoneinfo import ZoneInfo

from dueflow.tasks.core.addresses import Mailbox, is_address

HEADER_NAMES = ("From", "To", "Subject", "Date", "Message-ID", "X-Dueflow-Key", "MIME-Version",
                "Content-Type")  # and Reply-To after From, when the sender has one
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
    paragraph: str | None = None  # the drafted paragraph, kept for a retry rendered again

    def as_row(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Sender(Mailbox):
    """Who an email is from, as the headers say it: the From mailbox, an optional Reply-To
    mailbox (DUEFLOW_REPLY_TO) and the time zone its Date header is written in
    (DUEFLOW_TIMEZONE: `Date: Mon, 1 Mar 2027 06:00:03 +0100`)."""

    reply_to: Mailbox | None = None
    timezone: str | None = None  # an IANA name; None: the machine's local zone
    # The envelope sender (MAIL FROM, DUEFLOW_BOUNCE_ADDRESS): where bounces go; None: From.
    envelope: str | None = None

    @property
    def envelope_address(self) -> str:
        return self.envelope or self.address


@cache
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


def date_header(sender: Mailbox, now: datetime | None = None) -> str:
    """RFC 5322 date with the real offset of the sender's time zone (never -0000)."""
    zone = getattr(sender, "timezone", None)
    if now is None:
        now = datetime.now(_zone(zone)) if zone else datetime.now().astimezone()
    elif now.tzinfo is None:
        now = now.astimezone()  # a naive time is the machine's local time
    return format_datetime(now)


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
    return encoded_words(value)


_WORD_BYTES = 45  # 60 base64 characters: each encoded word is 72, a folded line at most 73


def encoded_words(value: str) -> str:
    """RFC 2047 `B` encoded words of `value` in UTF-8, folded with CRLF SP; no word splits
    a character, and the whitespace between words is not part of the text when decoded.
    (email.header.Header does the same at ten times the cost: it ran for every subject.)"""
    data = value.encode("utf-8")
    if len(data) <= _WORD_BYTES:
        return f"=?utf-8?b?{base64.b64encode(data).decode('ascii')}?=" if data else ""
    words, start = [], 0
    while start < len(data):
        end = min(start + _WORD_BYTES, len(data))
        while end < len(data) and (data[end] & 0xC0) == 0x80:  # not inside a character
            end -= 1
        words.append(f"=?utf-8?b?{base64.b64encode(data[start:end]).decode('ascii')}?=")
        start = end
    return "\r\n ".join(words)


def mailbox_header(mailbox: Mailbox) -> str:
    """A mailbox for From: the name quoted or encoded, the address bare."""
    name = mailbox.display_name
    if not name:
        return mailbox.address
    if _PLAIN.fullmatch(name) and "=?" not in name and len(name) <= 200:
        return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + f'" <{mailbox.address}>'
    return f"{header_value('From', name)} <{mailbox.address}>"


def _part(content_type: str, body: str) -> bytes:
    """One body part. Quoted-printable (readable, lines of at most 76 characters) with the
    body's line breaks as CRLF; base64 only for a body holding a carriage return of its
    own, which quoted-printable lines could not carry back exactly."""
    data = body.encode("utf-8", "replace")
    if b"\r" in data:
        encoding = "base64"
        payload = b"\r\n".join(base64.encodebytes(data).splitlines())
    else:
        encoding = "quoted-printable"
        payload = binascii.b2a_qp(data).replace(b"\n", b"\r\n")  # no CR in data: LF ends lines
    return (f"Content-Type: {content_type}; charset=\"utf-8\"\r\n"
            f"Content-Transfer-Encoding: {encoding}\r\n\r\n").encode() + payload + b"\r\n"


def message_bytes(email: OutgoingEmail, sender: Mailbox, now: datetime | None = None) -> bytes:
    """The message exactly as sent: text and HTML alternatives, quoted-printable bodies,
    CRLF lines, the Date in the sender's time zone, Reply-To when the sender has one.
    Raises ValueError for an email no header can carry (the send then fails before any
    byte leaves: `failed`, never `pending`)."""
    if not is_address(email.recipient):
        raise ValueError(f"recipient is not a plain email address: {email.recipient[:60]!r}")
    if not _MESSAGE_ID.fullmatch(email.message_id):
        raise ValueError(f"malformed Message-ID: {email.message_id[:60]!r}")
    boundary = "dueflow-" + email.message_id[1:25]
    reply_to = getattr(sender, "reply_to", None)
    head = (
        f"From: {mailbox_header(sender)}\r\n"
        + (f"Reply-To: {mailbox_header(reply_to)}\r\n" if reply_to else "")
        + f"To: {email.recipient}\r\n"
        f"Subject: {header_value('Subject', email.subject)}\r\n"
        f"Date: {date_header(sender, now)}\r\n"
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
