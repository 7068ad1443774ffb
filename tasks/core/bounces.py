"""Bounces: what a delivery status notification says, and which ledger row it is about
(docs/bounces.md). Pure: given the bytes of a report and the ledger rows it may name.

A report is read two ways, and per recipient: one report may be about the client and its
Cc at once, and each is decided for itself. RFC 3464 (`multipart/report;
report-type=delivery-status`) is parsed field by field with the standard `email` package:
per recipient its Action, Status and Diagnostic-Code, and the Action decides (`classify`).
Reports that are not RFC 3464 (Exim's, old Exchange's, qmail's…) are classified by
flufl.bounce, Mailman's bounce detectors, which tell a permanent failure from a temporary
one. Either way, the original message is identified by the Message-ID and X-Dueflow-Key it
quotes (an attached message/rfc822 or text/rfc822-headers part, or the headers quoted in
the text) — never by the recipient alone.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from email import message_from_bytes, policy
from email.header import decode_header, make_header
from email.message import Message
from email.utils import parsedate_to_datetime
from enum import StrEnum

from dueflow.tasks.core.defaults import MAX_REPORT_BYTES
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.statuses import BOUNCEABLE

DIAGNOSTIC_CHARS = 300


class BounceKind(StrEnum):
    HARD = "hard"  # Action: failed (whatever the status), or no Action and 5.x.x: the row becomes `bounced`
    SOFT = "soft"  # Action: delayed, or no Action and 4.x.x: recorded, changes nothing


# RFC 3464 §2.3.3: what the reporting MTA did with the message for this recipient. It, not
# the status code, says whether the MTA gave up: Postfix returns a message whose queue
# lifetime expired as `Action: failed` with the last temporary status (4.4.1), Exchange
# as `Action: failed` with 4.4.7.
NOT_FAILURES = frozenset({"delivered", "relayed", "expanded"})


def classify(action: str | None, status: str | None) -> BounceKind | None:
    """What one recipient's entry of a report means for its row: HARD, SOFT, or None (not a
    failure). `Action` decides; the status class only when there is no Action (or one RFC
    3464 does not define)."""
    said = (action or "").strip().lower()
    if said == "failed":
        return BounceKind.HARD
    if said == "delayed":
        return BounceKind.SOFT
    if said in NOT_FAILURES:
        return None
    code = (status or "").strip()[:2]
    return {"5.": BounceKind.HARD, "4.": BounceKind.SOFT}.get(code)


class KeptReason(StrEnum):
    """Why a message of the bounce mailbox was kept aside instead of applied."""

    UNREADABLE = "unreadable"  # not a report dueflow can read (malformed MIME, no failure in it)
    NO_ORIGINAL = "no original"  # a failure report that quotes no Message-ID
    UNMATCHED = "unmatched"  # quotes a Message-ID that is on no ledger row
    MISMATCHED = "mismatched"  # Message-ID of one row, X-Dueflow-Key of another (or none): forged
    NOT_SENT = "not sent"  # the row it names was never handed to SMTP
    COPY = "copy"  # the failed recipient is a copy (the account manager's Cc, the archive Bcc)
    NOT_A_FAILURE = "not a failure"  # Action: delivered, relayed or expanded: a success, never applied


@dataclass(frozen=True)
class Report:
    """One recipient of one message of the bounce mailbox, read (a message that names no
    recipient, or cannot be read, is one Report too). `problem` is why it cannot be used;
    `kind` None without a problem: not a failure (`action` says what happened)."""

    report_id: str  # sha256 of the bytes read (and the size), /n for its n-th recipient: applies once
    source: str  # where it is (mailbox and uid, or file): the raw reference
    kind: BounceKind | None = None
    status_code: str | None = None  # 5.1.1
    diagnostic: str = ""  # one line: the remote server's words
    recipient: str | None = None  # as dueflow addressed it (Original-Recipient), else the final one
    action: str | None = None  # RFC 3464 Action, lower case (flufl.bounce: failed or delayed)
    message_id: str | None = None  # of the original message
    key: str | None = None  # X-Dueflow-Key of the original message
    seen_at: datetime | None = None  # the report's own date (UTC)
    problem: str | None = None


REPORT_COLUMNS = tuple(Report.__dataclass_fields__)

_STATUS = re.compile(r"\b([245])\.(\d{1,3})\.(\d{1,3})\b")
_SMTP_REPLY = re.compile(r"\b([45]\d\d)[ -]")
_QUOTED_ID = re.compile(r"(?im)^[>\s]*Message-ID:\s*(<[^<>\s]+>)")
_QUOTED_KEY = re.compile(r"(?im)^[>\s]*X-Dueflow-Key:\s*([^\r\n]+(?:\r?\n[ \t]+[^\r\n]+)*)")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


def report_id(raw: bytes, size: int | None = None) -> str:
    """The identity of a report: the digest of the bytes read and the full size."""
    digest = hashlib.sha256(raw[:MAX_REPORT_BYTES])
    digest.update(f":{len(raw) if size is None else size}".encode())
    return digest.hexdigest()


def one_line(text: object, limit: int = DIAGNOSTIC_CHARS) -> str:
    """Text from a remote server as one line of printable characters, at most `limit`."""
    cleaned = " ".join(_CONTROL.sub(" ", str(text or "")).split())
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + "…"


def _decoded(value: str) -> str:
    try:
        return str(make_header(decode_header(value)))
    except (ValueError, LookupError, UnicodeError):
        return value


def _unfolded(value: str) -> str:
    return re.sub(r"\r?\n[ \t]+", " ", value).strip()


def _text_of(part: Message) -> str:
    payload = part.get_payload(decode=True)
    if isinstance(payload, bytes):
        return payload.decode(part.get_content_charset() or "utf-8", "replace")
    raw = part.get_payload()
    return raw if isinstance(raw, str) else ""


def _original_headers(msg: Message) -> tuple[str | None, str | None]:
    """Message-ID and X-Dueflow-Key of the message the report is about: from an attached
    message/rfc822 or text/rfc822-headers part first, else from headers quoted in text."""
    for part in msg.walk():
        kind = part.get_content_type()
        if kind in ("message/rfc822", "message/global") and part.is_multipart():
            inner = part.get_payload(0)
            if isinstance(inner, Message) and inner.get("Message-ID"):
                key = inner.get("X-Dueflow-Key")
                return (_unfolded(str(inner["Message-ID"])),
                        _decoded(_unfolded(str(key))) if key is not None else None)
    texts = []
    for part in msg.walk():
        kind = part.get_content_type()
        if kind in ("text/rfc822-headers", "text/plain", "message/rfc822-headers") or (
                kind.startswith("message/") and not part.is_multipart()):
            texts.append(_text_of(part))
    text = "\n".join(texts)
    ids = _QUOTED_ID.findall(text)
    keys = _QUOTED_KEY.findall(text)
    message_id = ids[0] if ids else None
    key = _decoded(_unfolded(keys[0])) if keys else None
    return message_id, key


def _dsn_fields(msg: Message) -> list[dict[str, str]]:
    """The per-recipient field blocks of RFC 3464 message/delivery-status parts."""
    blocks: list[dict[str, str]] = []
    for part in msg.walk():
        if part.get_content_type() != "message/delivery-status":
            continue
        payload = part.get_payload()
        if isinstance(payload, list):
            groups = [dict((k.lower(), _unfolded(str(v))) for k, v in block.items())
                      for block in payload if isinstance(block, Message)]
        else:  # a part the parser left as text: the same fields, blank-line separated
            text = payload if isinstance(payload, str) else ""
            groups = [dict((k.strip().lower(), v.strip()) for k, _, v in
                           (line.partition(":") for line in _unfolded(chunk).splitlines())
                           if _) for chunk in re.split(r"\r?\n\s*\r?\n", text)]
        blocks += [g for g in groups if "action" in g or "status" in g]
    return blocks


def _seen_at(msg: Message, blocks: Sequence[dict[str, str]]) -> datetime | None:
    for value in [msg.get("Date"), *(b.get("arrival-date") for b in blocks)]:
        if not value:
            continue
        with contextlib.suppress(TypeError, ValueError, IndexError):
            moment = parsedate_to_datetime(str(value))
            return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)
    return None


def _flufl(msg: Message) -> tuple[frozenset[bytes], frozenset[bytes]]:
    from flufl.bounce import all_failures

    logging.getLogger("flufl.bounce").setLevel(logging.CRITICAL)  # its detectors log each try
    try:
        return all_failures(msg)
    except Exception:  # a detector that trips on a malformed message: not a report we read
        return frozenset(), frozenset()


def _code_in(text: str) -> str | None:
    found = _STATUS.search(text)
    return ".".join(found.groups()) if found and found.group(1) != "2" else None


def _diagnostic_in(text: str) -> str:
    """The line of a free-text bounce that carries the remote server's reply."""
    for line in text.splitlines():
        if _SMTP_REPLY.search(line) or _STATUS.search(line):
            return one_line(line)
    return ""


def _entry_id(ident: str, n: int) -> str:
    """The identity of a report's n-th recipient: the report's own for the first (so a
    report of one recipient keeps the identity it always had), `/n` after it."""
    return ident if n == 0 else f"{ident}/{n + 1}"


def _address(field_value: str) -> str:
    """`rfc822; client@example.org` → `client@example.org`."""
    kind, sep, address = field_value.partition(";")
    return one_line(address if sep else kind, 200).strip("<> ")


def _segment(body: str, address: str) -> str:
    """The lines of a free-text bounce about one address: from the line that names it to
    the next blank line (Exim's layout); the whole text when no line names it."""
    lines = body.splitlines()
    for i, line in enumerate(lines):
        if address.lower() in line.lower():
            block = [line]
            for after in lines[i + 1:]:
                if not after.strip():
                    break
                block.append(after)
            return "\n".join(block)
    return body


def parse_report(raw: bytes, source: str, size: int | None = None) -> list[Report]:
    """Read one message of the bounce mailbox: for each recipient it names, what happened
    (`classify`), why, and for which message. A message that cannot be used is one Report
    with its `problem`."""
    ident = report_id(raw, size)
    try:
        msg = message_from_bytes(raw[:MAX_REPORT_BYTES], policy=policy.compat32)
    except Exception as exc:  # the parser is lenient; a report it still cannot read is kept
        return [Report(ident, source, problem=one_line(f"cannot parse the message: {exc}"))]
    if msg.defects and not msg.is_multipart() and msg.get_content_maintype() == "multipart":
        return [Report(ident, source, problem="malformed MIME: a multipart message without its parts")]
    blocks = _dsn_fields(msg)
    message_id, key = _original_headers(msg)
    seen = _seen_at(msg, blocks)
    if blocks:
        entries = []
        for n, block in enumerate(blocks):
            action = block.get("action", "").strip().lower() or None
            found = _STATUS.search(block.get("status", ""))
            status = ".".join(found.groups()) if found else None
            kind = classify(action, status)
            diagnostic = block.get("diagnostic-code", "")
            diagnostic = diagnostic.partition(";")[2].strip() if ";" in diagnostic else diagnostic
            named = block.get("original-recipient") or block.get("final-recipient") or ""
            problem = None
            if kind is None and action not in NOT_FAILURES and not (status or "").startswith("2."):
                problem = ("a delivery status notification whose Action and Status say nothing dueflow"
                           f" can read (Action: {one_line(action or '-', 40)},"
                           f" Status: {one_line(block.get('status') or '-', 40)})")
            entries.append(Report(_entry_id(ident, n), source, kind=kind,
                                  status_code=status if kind else None,
                                  diagnostic=one_line(diagnostic or f"Action: {action or '-'}"),
                                  recipient=_address(named) or None, action=action, message_id=message_id,
                                  key=key, seen_at=seen, problem=problem))
        return entries
    temporary, permanent = _flufl(msg)
    if not (temporary or permanent):
        problem = ("malformed MIME: " + one_line(type(msg.defects[0]).__name__, 80)) if msg.defects \
            else "not a bounce dueflow can read (no delivery status, no failed recipient)"
        return [Report(ident, source, message_id=message_id, key=key, seen_at=seen, problem=problem)]
    body = "\n".join(_text_of(p) for p in msg.walk() if p.get_content_type() == "text/plain")
    # flufl.bounce's "permanent" is the MTA saying it gave up (Exim's "This is a permanent
    # error", its "retry timeout exceeded"): hard whatever code the text quotes, as Action: failed.
    failures = [(a, BounceKind.HARD, "failed") for a in sorted(permanent)] + \
        [(a, BounceKind.SOFT, "delayed") for a in sorted(temporary - permanent)]
    entries = []
    for n, (address, kind, action) in enumerate(failures):
        recipient = address.decode("ascii", "replace")
        about = _segment(body, recipient)
        entries.append(Report(_entry_id(ident, n), source, kind=kind,
                              status_code=_code_in(about) or _code_in(body),
                              diagnostic=_diagnostic_in(about) or _diagnostic_in(body), recipient=recipient,
                              action=action, message_id=message_id, key=key, seen_at=seen))
    return entries


def reports_frame(reports: Iterable[Report]) -> pd.DataFrame:
    return pd.DataFrame([asdict(r) for r in reports], columns=list(REPORT_COLUMNS))


@dataclass(frozen=True)
class Matched:
    """Reports matched to ledger rows (`bounces`: one row each for dueflow_bounces) and the
    ones kept aside with their reason (`kept`)."""

    bounces: pd.DataFrame
    kept: pd.DataFrame


def address_digest(address: str) -> str:
    """What retention keeps of a copy's address (`copy_digests`): its SHA-256, never the
    address; compared case-insensitively, as mail systems compare addresses."""
    return hashlib.sha256(address.strip().lower().encode("utf-8", "surrogatepass")).hexdigest()


def copy_digests(recipient: str | None, cc: str | None, bcc: str | None) -> str | None:
    """The digests of a row's copies that were sent apart from its recipient (a copy to
    the recipient itself never was), space-separated; None without any."""
    to = (recipient or "").strip().lower()
    digests = [address_digest(c) for c in (cc, bcc) if c and c.strip() and c.strip().lower() != to]
    return " ".join(dict.fromkeys(digests)) or None


BOUNCE_COLUMNS = ("report_id", "key", "message_id", "kind", "status_code", "diagnostic", "recipient",
                  "seen_at", "source")
KEPT_COLUMNS = ("report_id", "reason", "detail", "message_id", "key", "seen_at", "source")


def match_reports(reports: pd.DataFrame, ledger: pd.DataFrame) -> Matched:
    """Match reports (REPORT_COLUMNS) to ledger rows (key, message_id, status, sending_at)
    by the original Message-ID; the key the report quotes, when it quotes one, must be that
    row's. Everything that does not match is kept aside with its reason, never dropped."""
    rows = ledger.assign(message_id=ledger["message_id"].astype("string")).drop_duplicates("message_id")
    by_id = rows.set_index("message_id")
    found = reports["message_id"].astype("string").map(by_id["key"])
    status = reports["message_id"].astype("string").map(by_id["status"]).astype("string")
    claimed = reports["message_id"].astype("string").map(by_id["sending_at"].notna())
    quoted = reports["key"].astype("string")
    handed = status.isin([str(s) for s in BOUNCEABLE]) & ~((status == "pending") & (claimed != True))  # noqa: E712
    problem = reports["problem"].astype("string")
    failed = reports["recipient"].astype("string").str.strip().str.lower()
    copy_failed = pd.Series(False, index=reports.index)
    for column in ("cc_recipient", "bcc_recipient"):
        if column in by_id:
            copies = reports["message_id"].astype("string").map(by_id[column]).astype("string").str.lower()
            copy_failed = copy_failed | (failed.notna() & (failed == copies)).fillna(False).astype(bool)
    if "recipient" in by_id:  # a copy to the recipient itself was never sent apart
        to = reports["message_id"].astype("string").map(by_id["recipient"]).astype("string").str.lower()
        copy_failed = copy_failed & ~(failed == to).fillna(False).astype(bool)
    if "copy_digests" in by_id:  # a pruned row: its copies' digests, kept when the addresses went
        digests = reports["message_id"].astype("string").map(by_id["copy_digests"]).astype("string")
        pruned_copy = [isinstance(f, str) and isinstance(d, str) and address_digest(f) in d.split()
                       for f, d in zip(failed.astype(object), digests.astype(object), strict=True)]
        copy_failed = copy_failed | pd.Series(pruned_copy, index=reports.index, dtype=bool)
    reason = pd.Series(pd.NA, index=reports.index, dtype="string")
    detail = pd.Series(pd.NA, index=reports.index, dtype="string")
    checks = [
        (problem.notna(), KeptReason.UNREADABLE, problem),
        # Delivered, relayed, expanded: a success notification (NOTIFY=SUCCESS, a relay
        # without DSN), about the client or a copy: never applied to any row.
        (reports["kind"].isna(), KeptReason.NOT_A_FAILURE,
         "Action: " + reports["action"].astype("string").fillna("-") + " for "
         + reports["recipient"].astype("string").fillna("(no recipient)") + ": not a failure"),
        (reports["message_id"].isna(), KeptReason.NO_ORIGINAL,
         "the report quotes no Message-ID of the original message"),
        (found.isna(), KeptReason.UNMATCHED,
         "no ledger row has Message-ID " + reports["message_id"].astype("string").fillna("")),
        (quoted.isna() | (quoted != found), KeptReason.MISMATCHED,
         "Message-ID of " + found.astype("string").fillna("") + " but X-Dueflow-Key "
         + quoted.fillna("(none)")),
        (~handed.fillna(False).astype(bool), KeptReason.NOT_SENT,
         found.astype("string").fillna("") + " was never handed to SMTP (" + status.fillna("") + ")"),
        # A copy that bounced says nothing of the recipient: the row is not marked bounced.
        (copy_failed, KeptReason.COPY,
         "the failed recipient " + failed.fillna("") + " is a copy of " + found.astype("string").fillna("")
         + ", not its recipient"),
    ]
    for when, why, text in checks:
        hit = when.fillna(True).astype(bool) & reason.isna()
        reason[hit] = str(why)
        detail[hit] = (text[hit] if isinstance(text, pd.Series) else text)
    good = reason.isna()
    bounces = reports[good].assign(key=found[good], kind=reports.loc[good, "kind"].astype(str))
    kept = reports[~good].assign(reason=reason[~good], detail=detail[~good].map(one_line))
    return Matched(bounces.reindex(columns=list(BOUNCE_COLUMNS)).reset_index(drop=True),
                   kept.reindex(columns=list(KEPT_COLUMNS)).reset_index(drop=True))


def bounce_reason(status_code: object, diagnostic: object) -> str:
    """What the ledger row's `error` says of a hard bounce."""
    code = "" if status_code is None or pd.isna(status_code) else f"{status_code} "  # type: ignore[call-overload]
    return one_line(f"bounced: {code}{diagnostic or ''}".rstrip())
