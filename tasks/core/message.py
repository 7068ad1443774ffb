"""The email on the wire, built in one place (G6): every header value that comes from data
is encoded (RFC 2047) or refused, so no value can add a header line, end the headers
early or put raw 8-bit bytes in them; every line stays far below 998 octets.

Written by hand rather than with email.message.EmailMessage, which costs over a
millisecond a message — more than the SMTP conversation with a local relay. The bodies
are quoted-printable: plain ASCII reads as it is in an editor, and every line stays short.

A copy to the client's account manager is a `Cc` header (and a recipient of the envelope);
the archive copy (DUEFLOW_BCC) is a recipient of the envelope only, never a header
(`envelope_recipients`). A reminder that carries its invoice PDF is multipart/mixed: the
text/HTML alternative first, then the PDF in base64 under an RFC 2231 file name — the bytes
attached must be the ones the ledger row names by size and SHA-256 (docs/design.md, G2).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from datetime import datetime
from email.utils import format_datetime
from functools import cache
from typing import Any
from urllib.parse import quote
from zoneinfo import ZoneInfo

from dueflow.tasks.core.addresses import Mailbox, is_address
from dueflow.tasks.core.text import clean_line

HEADER_NAMES = ("From", "To", "Subject", "Date", "Message-ID", "X-Dueflow-Key", "MIME-Version",
                "Content-Type")  # and Reply-To after From, Cc after To, when there is one
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
    # Reminders: who chose the paragraph (core.tone.PlanSource: model, rule, template), why
    # not the model when it did not, the paragraph of a plan and the plan itself (tone,
    # sentence ids: a retry says the same), and a refused answer of the model, capped.
    draft_source: str | None = None
    draft_note: str | None = None
    paragraph: str | None = None
    tone_plan: str | None = None
    refused_answer: str | None = None
    cc_recipient: str | None = None  # reminders: the client's account manager (clients.cc_email)
    bcc_recipient: str | None = None  # the archive (DUEFLOW_BCC): envelope only, never a header
    # Reminders: the invoice PDF, named by what it must be when sent (path, size, SHA-256),
    # or why it is not attached (attachment_note: missing, too large, not a PDF).
    attachment_path: str | None = None
    attachment_name: str | None = None
    attachment_sha256: str | None = None
    attachment_size: int | None = None
    attachment_note: str | None = None
    # Reminders: what the amount the body states was read from (sql/fragments/payment_state).
    owed_state: str | None = None
    # One statement per client (tasks/core/statements.py): the key of the statement's carrier,
    # on each of its rows; None for an email of its own.
    statement_key: str | None = None
    # The other rows of a statement, claimed with its carrier: their invoice PDFs go in the
    # one email. Never stored (each row stores its own).
    riders: tuple[OutgoingEmail, ...] = ()

    def as_row(self) -> dict[str, Any]:
        """The ledger row's fields (every field but `riders`): a shallow copy, as each is a
        str, int or None (`asdict` deep-copied each one: a third of storing a first night)."""
        return {name: getattr(self, name) for name in _ROW_FIELDS}

    def with_message_of(self, statement: OutgoingEmail, statement_key: str) -> OutgoingEmail:
        """This row's email carrying a statement's message: its subject, bodies and
        Message-ID; its own addressing and PDF stay."""
        return replace(self, subject=statement.subject, body_text=statement.body_text,
                       body_html=statement.body_html, message_id=statement.message_id,
                       statement_key=statement_key)

    @property
    def attachments(self) -> list[Attachment]:
        """Every file the email carries: its own, then its riders' (a statement)."""
        return [a for a in (e.attachment for e in (self, *self.riders)) if a is not None]

    @property
    def attachment(self) -> Attachment | None:
        """The file this email carries, as its ledger row names it (None: no attachment)."""
        if not self.attachment_sha256:
            return None
        return Attachment(str(self.attachment_path), str(self.attachment_name), self.attachment_sha256,
                          int(self.attachment_size or 0))


def with_riders(claim: Sequence[str], claimed: Mapping[str, OutgoingEmail]) -> list[OutgoingEmail]:
    """The emails of the claimed keys, in the order asked, each statement's carrier with the
    other rows claimed with it (their PDFs go in the one email); those rows are never an
    email of their own, even when asked for."""
    riders: dict[str, list[OutgoingEmail]] = {}
    for email in claimed.values():
        if email.statement_key is not None and email.statement_key != email.key:
            riders.setdefault(email.statement_key, []).append(email)
    return [replace(claimed[key], riders=tuple(sorted(riders.get(key, ()), key=lambda e: e.key)))
            for key in claim if key in claimed and claimed[key].statement_key in (None, key)]


def whole_statements(messages: Sequence[Mapping[str, Any]], won: set[str]) -> list[Mapping[str, Any]]:
    """The messages of the keys `won` that can be stored as they are: an email of its own, or
    a statement whose every row was won. A statement another run took a row of is not stored
    (its rows stay pending without a message, and are rendered again as what this run holds)."""
    lost = {m["statement_key"] for m in messages if m.get("statement_key") and m["key"] not in won}
    return [m for m in messages if m["key"] in won and m.get("statement_key") not in lost]

@dataclass(frozen=True)
class Attachment:
    """An invoice PDF as the ledger row names it: where it is read from, the file name the
    reader sees, and the size and SHA-256 the bytes sent must have."""

    path: str
    name: str
    sha256: str
    size: int


class AttachmentChanged(ValueError):
    """The bytes at hand are not the ones the ledger row names (the file changed or
    vanished since the message was stored): the email is not sent."""


def envelope_recipients(email: OutgoingEmail) -> list[str]:
    """Every RCPT TO of an email, the recipient first: the To address, the Cc, the archive
    Bcc — each once (compared without case)."""
    seen: list[str] = []
    for address in (email.recipient, email.cc_recipient, email.bcc_recipient):
        if address and address.lower() not in (s.lower() for s in seen):
            seen.append(address)
    return seen


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


def message_id_for(key: str, sender: Mailbox, secret: str = "") -> str:
    """Deterministic Message-ID: the same key (and database secret) always yields the same
    id. With the database's secret (dueflow_secrets) it is HMAC-SHA256(secret, key): nobody
    who knows only an invoice id can name the email in a forged bounce. Without one (a
    preview, a unit test) it is the key's digest alone, as releases before 0007 wrote it."""
    data = key.encode("utf-8", "surrogatepass")
    digest = (hmac.new(secret.encode(), data, hashlib.sha256) if secret else hashlib.sha256(data)).hexdigest()
    return f"<{digest[:32]}@{sender.domain}>"


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


FILE_NAME_LIMIT = 200  # characters of an attachment's name as shown
_PLAIN_FILENAME = re.compile(r"[A-Za-z0-9._()+-]+(?: [A-Za-z0-9._()+-]+)*")
_FILENAME_CHUNK = 60  # characters of an RFC 2231 continuation: each folded line stays short


# What no common mail client or file system lets a saved file's name hold (Windows forbids
# each of these; a name wrapped in quotes or angle brackets also reads back without them).
_UNSAVEABLE = re.compile(r'[\\/:*?"<>|]')


def attachment_name(name: str) -> str:
    """An attachment's name as the recipient sees and saves it: one line (`clean_line`), and
    each character a file name cannot hold replaced by `_`."""
    return _UNSAVEABLE.sub("_", clean_line(name, FILE_NAME_LIMIT))


def file_name_parameter(parameter: str, name: str) -> str:
    """`name="…"` or `filename="…"` for a header, folded onto lines of its own: quoted when
    the name is plain ASCII, else RFC 2231 (`filename*0*=utf-8''%C3%A9…;` continuations),
    which every mail client reads and Python's strict parser takes without a defect (an
    RFC 2047 word inside a quoted parameter is a defect there). The name is shown as one
    line (`attachment_name`)."""
    name = attachment_name(name)
    if not name:
        raise ValueError("attachment name is empty")
    if _PLAIN_FILENAME.fullmatch(name) and len(name) <= 70:
        return f'\r\n {parameter}="{name}"'
    # Continuations split between characters, never inside one: mail clients (and Python)
    # decode each piece on its own.
    chunks, current = [], ""
    for character in name:
        encoded = quote(character.encode("utf-8", "replace"), safe="")
        if current and len(current) + len(encoded) > _FILENAME_CHUNK:
            chunks.append(current)
            current = ""
        current += encoded
    chunks.append(current)
    if len(chunks) == 1:
        return f"\r\n {parameter}*=utf-8''{chunks[0]}"
    return ";".join(f"\r\n {parameter}*{n}*={'utf-8' + chr(39) * 2 if n == 0 else ''}{chunk}"
                    for n, chunk in enumerate(chunks))


def _attachment_part(attachment: Attachment, data: bytes) -> bytes:
    payload = b"\r\n".join(base64.encodebytes(data).splitlines())
    return (f"Content-Type: application/pdf;{file_name_parameter('name', attachment.name)}\r\n"
            f"Content-Disposition: attachment;{file_name_parameter('filename', attachment.name)}\r\n"
            "Content-Transfer-Encoding: base64\r\n\r\n").encode("ascii") + payload + b"\r\n"


def check_attachment(email: OutgoingEmail, data: bytes | None) -> None:
    """Raise AttachmentChanged unless `data` is exactly the file the email's ledger row
    names (its size and SHA-256), or there is none and none is named."""
    named = email.attachment
    if named is None:
        if data is not None:
            raise ValueError("an attachment was given for an email whose ledger row names none")
        return
    if data is None:
        raise AttachmentChanged(f"the invoice PDF {named.path} is gone (it was {named.size:,} bytes,"
                                f" sha256 {named.sha256[:16]}…)")
    if len(data) != named.size or hashlib.sha256(data).hexdigest() != named.sha256:
        raise AttachmentChanged(f"the invoice PDF {named.path} changed since the message was stored"
                                f" (stored: {named.size:,} bytes, sha256 {named.sha256[:16]}…; now:"
                                f" {len(data):,} bytes, sha256 {hashlib.sha256(data).hexdigest()[:16]}…)")


def message_bytes(email: OutgoingEmail, sender: Mailbox, now: datetime | None = None,
                  attachment: bytes | None = None, rider_attachments: Sequence[bytes | None] = ()) -> bytes:
    """The message exactly as sent: text and HTML alternatives, quoted-printable bodies,
    CRLF lines, the Date in the sender's time zone, Reply-To when the sender has one, Cc
    when the email has a copy for the account manager; with `attachment` (the bytes of the
    invoice PDF its ledger row names), multipart/mixed with the PDF after the alternative;
    a statement's `rider_attachments` (the bytes its other rows name, in `email.riders`'
    order) follow it.
    The archive Bcc is never written: it is only a recipient of the envelope.
    Raises ValueError for an email no header can carry, and AttachmentChanged for bytes
    that are not the ones stored (the send then fails before any byte leaves: `failed`,
    never `pending`)."""
    if not is_address(email.recipient):
        raise ValueError(f"recipient is not a plain email address: {email.recipient[:60]!r}")
    for copy in (email.cc_recipient, email.bcc_recipient):
        if copy is not None and not is_address(copy):
            raise ValueError(f"copy recipient is not a plain email address: {copy[:60]!r}")
    if not _MESSAGE_ID.fullmatch(email.message_id):
        raise ValueError(f"malformed Message-ID: {email.message_id[:60]!r}")
    check_attachment(email, attachment)
    if len(rider_attachments) != len(email.riders):
        raise ValueError("one attachment (or None) is needed per rider of a statement")
    for rider, data in zip(email.riders, rider_attachments, strict=True):
        check_attachment(rider, data)
    named_files = [(email.attachment, attachment),
                   *((r.attachment, d) for r, d in zip(email.riders, rider_attachments, strict=True))]
    files = [(named, data) for named, data in named_files if named is not None and data is not None]
    boundary = "dueflow-" + email.message_id[1:25]
    reply_to = getattr(sender, "reply_to", None)
    cc = email.cc_recipient if email.cc_recipient and email.cc_recipient.lower() != email.recipient.lower() \
        else None
    # The outer boundary holds "=_", which no quoted-printable or base64 text can contain.
    mixed = "=_dueflow_mixed_" + re.sub(r"[^A-Za-z0-9]", "", email.message_id)[:24]
    content_type = (f"multipart/mixed; boundary=\"{mixed}\"" if files
                    else f"multipart/alternative; boundary=\"{boundary}\"")
    head = (
        f"From: {mailbox_header(sender)}\r\n"
        + (f"Reply-To: {mailbox_header(reply_to)}\r\n" if reply_to else "")
        + f"To: {email.recipient}\r\n"
        + (f"Cc: {cc}\r\n" if cc else "")
        + f"Subject: {header_value('Subject', email.subject)}\r\n"
        f"Date: {date_header(sender, now)}\r\n"
        f"Message-ID: {email.message_id}\r\n"
        f"X-Dueflow-Key: {header_value('X-Dueflow-Key', email.key)}\r\n"
        "MIME-Version: 1.0\r\n"
        f"Content-Type: {content_type}\r\n\r\n"
    )
    alternative = [
        f"--{boundary}\r\n".encode(), _part("text/plain", email.body_text),
        f"--{boundary}\r\n".encode(), _part("text/html", email.body_html),
        f"--{boundary}--\r\n".encode(),
    ]
    if not files:
        return b"".join([head.encode("ascii"), *alternative])
    return b"".join([
        head.encode("ascii"),
        f"--{mixed}\r\n".encode(),
        f"Content-Type: multipart/alternative; boundary=\"{boundary}\"\r\n\r\n".encode(),
        *alternative,
        *(part for named, data in files
          for part in (f"--{mixed}\r\n".encode(), _attachment_part(named, data))),
        f"--{mixed}--\r\n".encode(),
    ])


# The fields of a ledger row, in order: every field of OutgoingEmail but its riders.
_ROW_FIELDS = tuple(f.name for f in fields(OutgoingEmail) if f.name != "riders")
