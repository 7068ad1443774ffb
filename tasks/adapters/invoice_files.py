"""Invoice PDFs on disk: the one place dueflow reads them (docs/emails.md, "The invoice").

At compose time, each reminder's file (`tasks/core/invoice_pdf.py` names it) is checked and
hashed: it must resolve, links followed, inside the invoice directory, be a regular file of
at most DUEFLOW_INVOICE_PDF_MAX_BYTES bytes, and start like a PDF. What is found is stored
on the ledger row with the message — path, size, SHA-256 — and the bytes are not: when the
email is sent, the file is read again and must have that size and hash, or the email is not
sent (`tasks/core/message.check_attachment`). A file that is missing, too large or not a PDF
is not attached, and the row says why (`attachment_note`).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat

from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.invoice_pdf import PDF_MAGIC, PdfTemplate, invoice_pdf_paths
from dueflow.tasks.core.message import AttachmentChanged, OutgoingEmail

ATTACHMENT_COLUMNS = ("attachment_path", "attachment_name", "attachment_sha256", "attachment_size",
                      "attachment_note")
_CHUNK = 1 << 20


class NotAttached(Exception):
    """Why a file is not attached (one line, for the ledger row and the summary)."""


class TooLarge(NotAttached):
    """The file is over the limit: never read, never attached in part."""


def _read_bounded(path: str, limit: int, setting_limit: bool = True) -> bytes:
    """The bytes of a regular file, at most `limit` of them: NotAttached otherwise. Opened
    without blocking (a FIFO never stalls a night) and without following a final link."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise NotAttached(f"{path} does not exist") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotAttached(f"{path} became a symbolic link") from None
        raise NotAttached(f"{path} cannot be read: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotAttached(f"{path} is not a regular file")
        if info.st_size > limit:
            raise TooLarge(f"{path} is {info.st_size:,} bytes, over " + (
                f"DUEFLOW_INVOICE_PDF_MAX_BYTES={limit:,}" if setting_limit else f"the {limit:,} stored"))
        chunks, size = [], 0
        while size <= limit:
            try:
                chunk = os.read(fd, min(_CHUNK, limit + 1 - size))
            except OSError as exc:
                raise NotAttached(f"{path} cannot be read: {exc.strerror or exc}") from None
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:  # it grew while being read: never a part of it
            raise TooLarge(f"{path} is over {limit:,} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def inside(path: str, directory: str) -> str:
    """The real path of `path` (every link resolved), which must be in the real
    `directory`; NotAttached otherwise."""
    real_directory = os.path.realpath(directory)
    real = os.path.realpath(path)
    with contextlib.suppress(ValueError):
        if real != real_directory and os.path.commonpath([real_directory, real]) == real_directory:
            return real
    raise NotAttached(f"{path} resolves outside the invoice directory {directory}")


def read_invoice_pdf(path: str, template: PdfTemplate) -> bytes:
    """The PDF at `path` as it may be attached: inside the invoice directory once its links
    are resolved, a regular file of at most the template's max_bytes, starting with %PDF-.
    NotAttached, with why, otherwise."""
    real = inside(path, template.directory)
    data = _read_bounded(real, template.max_bytes)
    if not data:
        raise NotAttached(f"{path} is empty")
    if not data.startswith(PDF_MAGIC):
        raise NotAttached(f"{path} is not a PDF (it does not start with %PDF-)")
    return data


def with_invoice_pdfs(rows: pd.DataFrame, template: PdfTemplate | None,
                      reminders: pd.Series | None = None) -> pd.DataFrame:
    """`rows` (number, subject_id, client_id[, pdf_path]) with ATTACHMENT_COLUMNS: for each
    of the `reminders` rows (all, when None), its invoice PDF checked and hashed, or why
    none is attached. Without a template, nothing is attached and nothing is said."""
    out = rows.copy()
    for column in ATTACHMENT_COLUMNS:
        out[column] = pd.Series(pd.NA, index=rows.index, dtype="object")
    if template is None or rows.empty:
        return out
    chosen = rows.index if reminders is None else rows.index[reminders.to_numpy(dtype=bool)]
    if not len(chosen):
        return out
    named = invoice_pdf_paths(template, rows.loc[chosen])
    for index, path, name, note in zip(named.index, named["path"], named["name"], named["note"],
                                       strict=True):
        if pd.isna(path):
            out.at[index, "attachment_note"] = note
            continue
        try:
            data = read_invoice_pdf(str(path), template)
        except NotAttached as why:
            out.at[index, "attachment_note"] = f"not attached: {why}"
            continue
        out.at[index, "attachment_path"] = os.path.realpath(str(path))
        out.at[index, "attachment_name"] = str(name)
        out.at[index, "attachment_sha256"] = hashlib.sha256(data).hexdigest()
        out.at[index, "attachment_size"] = len(data)
    return out


def attached_bytes(email: OutgoingEmail) -> bytes | None:
    """The bytes of the file the email's ledger row names, read now — at most the size it
    had when stored, so a file that grew is refused without being read whole — for
    `message_bytes`, which refuses bytes whose size or SHA-256 differ from the row's.
    None for an email without an attachment; AttachmentChanged when the file is gone,
    unreadable or larger than it was (the email is then not sent: `failed`)."""
    named = email.attachment
    if named is None:
        return None
    try:
        return _read_bounded(named.path, named.size, setting_limit=False)
    except NotAttached as why:
        raise AttachmentChanged(f"the invoice PDF changed or vanished since the message was stored:"
                                f" {why} (stored: {named.size:,} bytes, sha256 {named.sha256[:16]}…)"
                                ) from None
