"""Hand-made delivery status notifications, for the unit and integration layers
(docs/bounces.md): built from each server's documented format for what no local MTA of
the test machine writes — Microsoft Exchange Online's NDR (its expiry too: `Action:
failed` with 4.4.7), Gmail's DSN, Exim's classic "Mail delivery failed" message (not RFC
3464: it quotes the original in its text) — and the awkward ones: a report about a message
never sent, a forged one, malformed MIME, an enormous one. `postfix` imitates Postfix's
bounce(8) for tests that need a report about any Message-ID.

Hand-made, every one of them: what a real MTA writes is read from a real one — Postfix's
reports as it wrote them (tests/data/postfix, tests/unit/test_postfix_reports.py) and a
running Postfix in the MTA tier (tests/e2e/test_postfix_bounces.py)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import format_datetime

DEFAULT_DATE = datetime(2027, 1, 8, 6, 30, tzinfo=UTC)


@dataclass(frozen=True)
class Original:
    """The headers of the email a report is about (what dueflow wrote)."""

    message_id: str
    key: str
    recipient: str = "client@example.org"
    sender: str = "bounces@dueflow.test"
    subject: str = "Reminder: invoice INV-1"

    def headers(self) -> str:
        return (f"Return-Path: <{self.sender}>\r\n"
                f"From: Finance <alerts@dueflow.test>\r\n"
                f"To: {self.recipient}\r\n"
                f"Subject: {self.subject}\r\n"
                f"Date: Thu, 07 Jan 2027 06:00:03 +0000\r\n"
                f"Message-ID: {self.message_id}\r\n"
                f"X-Dueflow-Key: {self.key}\r\n"
                f"MIME-Version: 1.0\r\n"
                f"Content-Type: text/plain; charset=utf-8\r\n")


def _date(when: datetime | None) -> str:
    return format_datetime(when or DEFAULT_DATE)


def postfix(original: Original, *, when: datetime | None = None, delayed: bool = False,
            body: str = "") -> bytes:
    """Hand-made after Postfix's bounce(8): a multipart/report with the human part, the delivery-status part
    and the original's headers (text/rfc822-headers), or the whole original when `body`."""
    status, action = ("4.4.1", "delayed") if delayed else ("5.1.1", "failed")
    diagnostic = ("connect to mx.example.org[192.0.2.7]:25: Connection timed out" if delayed else
                  f"550 5.1.1 <{original.recipient}>: Recipient address rejected: User unknown in"
                  " virtual mailbox table")
    human = ("This is the mail system at host mail.dueflow.test.\r\n\r\n"
             + ("####################################################################\r\n"
                "# THIS IS A WARNING ONLY.  YOU DO NOT NEED TO RESEND YOUR MESSAGE. #\r\n"
                "####################################################################\r\n\r\n"
                "Your message could not be delivered for more than 4 hour(s).\r\n"
                "It will be retried until it is 5 day(s) old.\r\n" if delayed else
                "I'm sorry to have to inform you that your message could not\r\n"
                "be delivered to one or more recipients. It's attached below.\r\n")
             + f"\r\n<{original.recipient}>: host mx.example.org[192.0.2.7] said: {diagnostic}"
               " (in reply to RCPT TO command)\r\n")
    boundary = "A1B2C3D4E5.1767767400/mail.dueflow.test"
    subject = "Delayed Mail (still being retried)" if delayed else "Undelivered Mail Returned to Sender"
    if body:
        last = (f"Content-Description: Undelivered Message\r\nContent-Type: message/rfc822\r\n\r\n"
                f"{original.headers()}\r\n{body}\r\n")
    else:
        last = (f"Content-Description: Undelivered Message Headers\r\n"
                f"Content-Type: text/rfc822-headers\r\n\r\n{original.headers()}")
    return (
        f"Return-Path: <>\r\n"
        f"Date: {_date(when)}\r\n"
        f"From: MAILER-DAEMON@mail.dueflow.test (Mail Delivery System)\r\n"
        f"Subject: {subject}\r\n"
        f"To: {original.sender}\r\n"
        f"Auto-Submitted: auto-replied\r\n"
        f"MIME-Version: 1.0\r\n"
        f"Content-Type: multipart/report; report-type=delivery-status;\r\n\tboundary=\"{boundary}\"\r\n"
        f"Message-Id: <20270108063000.A1B2C3D4E5@mail.dueflow.test>\r\n\r\n"
        f"This is a MIME-encapsulated message.\r\n\r\n"
        f"--{boundary}\r\nContent-Description: Notification\r\n"
        f"Content-Type: text/plain; charset=us-ascii\r\n\r\n{human}\r\n"
        f"--{boundary}\r\nContent-Description: Delivery report\r\n"
        f"Content-Type: message/delivery-status\r\n\r\n"
        f"Reporting-MTA: dns; mail.dueflow.test\r\n"
        f"X-Postfix-Queue-ID: A1B2C3D4E5\r\n"
        f"X-Postfix-Sender: rfc822; {original.sender}\r\n"
        f"Arrival-Date: Thu,  7 Jan 2027 06:00:04 +0000 (UTC)\r\n\r\n"
        f"Final-Recipient: rfc822; {original.recipient}\r\n"
        f"Original-Recipient: rfc822;{original.recipient}\r\n"
        f"Action: {action}\r\n"
        f"Status: {status}\r\n"
        f"Remote-MTA: dns; mx.example.org\r\n"
        f"Diagnostic-Code: smtp; {diagnostic}\r\n"
        + ("Will-Retry-Until: Tue, 12 Jan 2027 06:00:04 +0000 (UTC)\r\n" if delayed else "")
        + f"\r\n--{boundary}\r\n{last}\r\n--{boundary}--\r\n"
    ).encode()


def exim(original: Original, *, when: datetime | None = None) -> bytes:
    """Hand-made: Exim's classic bounce (not RFC 3464): the failure and a copy of the message in text."""
    return (
        f"Return-path: <>\r\n"
        f"Date: {_date(when)}\r\n"
        f"From: Mail Delivery System <Mailer-Daemon@mx.dueflow.test>\r\n"
        f"To: {original.sender}\r\n"
        f"Subject: Mail delivery failed: returning message to sender\r\n"
        f"Message-Id: <E1kXyZa-0004Qw-Ab@mx.dueflow.test>\r\n"
        f"X-Failed-Recipients: {original.recipient}\r\n"
        f"Auto-Submitted: auto-replied\r\n\r\n"
        f"This message was created automatically by mail delivery software.\r\n\r\n"
        f"A message that you sent could not be delivered to one or more of its\r\n"
        f"recipients. This is a permanent error. The following address(es) failed:\r\n\r\n"
        f"  {original.recipient}\r\n"
        f"    SMTP error from remote mail server after RCPT TO:<{original.recipient}>:\r\n"
        f"    host mx.example.org [192.0.2.7]: 550 5.1.1 <{original.recipient}>: mailbox unavailable\r\n\r\n"
        f"------ This is a copy of the message, including all the headers. ------\r\n\r\n"
        f"{original.headers()}\r\n"
        f"Dear client, this is a reminder.\r\n"
    ).encode()


def exchange(original: Original, *, when: datetime | None = None, expired: bool = False) -> bytes:
    """Hand-made: Microsoft Exchange Online's NDR: multipart/report with HTML and text
    explanations, its delivery-status (5.1.10 RESOLVER.ADR.RecipientNotFound; or, `expired`,
    the message that could not be delivered before it expired: `Action: failed`, 4.4.7) and
    the original headers."""
    boundary = "_000_AM0PR01MB1234ABCDEF_"
    diagnostic = ("smtp;550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient "
                  f"{original.recipient} not found by SMTP address lookup")
    status = "5.1.10"
    if expired:
        diagnostic = "smtp;550 4.4.7 QUEUE.Expired; message expired"
        status = "4.4.7"
    return (
        f"From: Microsoft Outlook <postmaster@dueflow.onmicrosoft.com>\r\n"
        f"To: <{original.sender}>\r\n"
        f"Date: {_date(when)}\r\n"
        f"Subject: Undeliverable: {original.subject}\r\n"
        f"Content-Type: multipart/report; report-type=delivery-status;\r\n\tboundary=\"{boundary}\"\r\n"
        f"Content-Language: en-US\r\n"
        f"Message-ID: <5b3e0c1e-2d7b-4f0a-9a5e-1c2d3e4f5a6b@AM0PR01MB1234.eurprd01.prod.exchangelabs.com>\r\n"
        f"In-Reply-To: {original.message_id}\r\n"
        f"MIME-Version: 1.0\r\n"
        f"X-MS-Exchange-Message-Is-Ndr:\r\n\r\n"
        f"--{boundary}\r\nContent-Type: multipart/alternative; boundary=\"_002_alt_\"\r\n\r\n"
        f"--_002_alt_\r\nContent-Type: text/plain; charset=\"us-ascii\"\r\n\r\n"
        f"Your message to {original.recipient} couldn't be delivered.\r\n"
        f"{original.recipient.split('@')[0]} wasn't found at {original.recipient.split('@')[1]}.\r\n"
        f"Remote Server returned '550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient not found"
        f" by SMTP address lookup'\r\n\r\n"
        f"--_002_alt_\r\nContent-Type: text/html; charset=\"us-ascii\"\r\n\r\n"
        f"<html><body><p>Your message to {original.recipient} couldn't be delivered.</p></body></html>\r\n"
        f"--_002_alt_--\r\n\r\n"
        f"--{boundary}\r\nContent-Type: message/delivery-status\r\n\r\n"
        f"Reporting-MTA: dns;AM0PR01MB1234.eurprd01.prod.exchangelabs.com\r\n"
        f"Received-From-MTA: dns;mail.dueflow.test\r\n"
        f"Arrival-Date: Thu, 7 Jan 2027 06:00:04 +0000\r\n\r\n"
        f"Final-Recipient: rfc822;{original.recipient}\r\n"
        f"Action: failed\r\n"
        f"Status: {status}\r\n"
        f"Diagnostic-Code: {diagnostic}\r\n\r\n"
        f"--{boundary}\r\nContent-Type: text/rfc822-headers\r\n\r\n{original.headers()}\r\n"
        f"--{boundary}--\r\n"
    ).encode()


def gmail(original: Original, *, when: datetime | None = None) -> bytes:
    """Hand-made: Gmail's DSN: "Address not found", a delivery-status whose Diagnostic-Code carries the
    multi-line 550-5.1.1 reply, and the whole original message attached."""
    boundary = "000000000000a1b2c3d4e5f60718"
    return (
        f"Delivered-To: {original.sender}\r\n"
        f"Return-Path: <>\r\n"
        f"From: Mail Delivery Subsystem <mailer-daemon@googlemail.com>\r\n"
        f"To: {original.sender}\r\n"
        f"Auto-Submitted: auto-replied\r\n"
        f"Subject: Delivery Status Notification (Failure)\r\n"
        f"References: {original.message_id}\r\n"
        f"In-Reply-To: {original.message_id}\r\n"
        f"X-Failed-Recipients: {original.recipient}\r\n"
        f"Message-ID: <6a1b2c3d.050a0220.1a2b3c.0abcSMTPIN_ADDED_MISSING@mx.google.com>\r\n"
        f"Date: {_date(when)}\r\n"
        f"MIME-Version: 1.0\r\n"
        f"Content-Type: multipart/report; boundary=\"{boundary}\"; report-type=delivery-status\r\n\r\n"
        f"--{boundary}\r\nContent-Type: text/plain; charset=\"UTF-8\"\r\n\r\n"
        f"** Address not found **\r\n\r\n"
        f"Your message wasn't delivered to {original.recipient} because the address couldn't be"
        f" found, or is unable to receive mail.\r\n\r\n"
        f"The response from the remote server was:\r\n"
        f"550 5.1.1 The email account that you tried to reach does not exist.\r\n\r\n"
        f"--{boundary}\r\nContent-Type: message/delivery-status\r\n\r\n"
        f"Reporting-MTA: dns; googlemail.com\r\n"
        f"Received-From-MTA: dns; alerts@dueflow.test\r\n"
        f"Arrival-Date: Thu, 07 Jan 2027 06:00:04 -0800 (PST)\r\n"
        f"X-Original-Message-ID: {original.message_id}\r\n\r\n"
        f"Final-Recipient: rfc822; {original.recipient}\r\n"
        f"Action: failed\r\n"
        f"Status: 5.1.1\r\n"
        f"Remote-MTA: dns; gmail-smtp-in.l.google.com. (2a00:1450:4013:c01::1a, the server for the\r\n"
        f" domain gmail.com.)\r\n"
        f"Diagnostic-Code: smtp; 550-5.1.1 The email account that you tried to reach does not exist.\r\n"
        f" Please try double-checking the recipient's email address for typos or\r\n"
        f" unnecessary spaces. https://support.google.com/mail/?p=NoSuchUser\r\n"
        f"Last-Attempt-Date: Thu, 07 Jan 2027 06:00:05 -0800 (PST)\r\n\r\n"
        f"--{boundary}\r\nContent-Type: message/rfc822\r\n\r\n{original.headers()}\r\n"
        f"Dear client, this is a reminder.\r\n\r\n"
        f"--{boundary}--\r\n"
    ).encode()


def malformed(original: Original, *, when: datetime | None = None) -> bytes:
    """A multipart/report whose boundary never appears: its parts cannot be found."""
    return (
        f"From: MAILER-DAEMON@mail.dueflow.test\r\nTo: {original.sender}\r\n"
        f"Date: {_date(when)}\r\nSubject: Undelivered Mail Returned to Sender\r\n"
        f"MIME-Version: 1.0\r\n"
        f"Content-Type: multipart/report; report-type=delivery-status; boundary=\"missing\"\r\n\r\n"
        f"--other\r\nContent-Type: message/delivery-status\r\n\r\nAction: failed\r\nStatus: 5.1.1\r\n"
        f"--other--\r\n"
    ).encode()


def not_a_bounce(*, when: datetime | None = None) -> bytes:
    """A human's reply that landed in the bounce mailbox."""
    return (f"From: Bob <bob@example.org>\r\nTo: bounces@dueflow.test\r\nDate: {_date(when)}\r\n"
            f"Subject: Re: your reminder\r\n\r\nI paid last week, thanks.\r\n").encode()


def enormous(original: Original, *, when: datetime | None = None, megabytes: int = 24) -> bytes:
    """A Postfix report that returns a whole message of `megabytes` MB (an attachment)."""
    line = "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3h5ejAxMjM0NTY3\r\n"
    return postfix(original, when=when, body=line * (megabytes * 1024 * 1024 // len(line)))


FORMATS = {"postfix": postfix, "exim": exim, "exchange": exchange, "gmail": gmail}
