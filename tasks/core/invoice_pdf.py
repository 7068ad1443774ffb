"""Which invoice PDF a reminder carries (DUEFLOW_INVOICE_PDF, `invoices.pdf_path`).

Pure: the template is parsed, and each invoice's path is built and checked, as text.
Reading the file — resolving its links, its size, its SHA-256 — is the adapter's
(`tasks/adapters/invoice_files.py`).

The template is an absolute path with fields, `/srv/invoices/{number}.pdf`; the directory
before its first field is the **invoice directory**, and no file outside it is ever
attached. Each field's value must be one file name (no separator, no `.` or `..`, no
control character), so that data can name a file in that directory and nothing else. A
template that is a directory (`/srv/invoices/`) attaches only what `invoices.pdf_path`
names; a row's `pdf_path`, when it has one, wins over the template either way: a path
inside the invoice directory, absolute or relative to it, without `..`.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from string import Formatter

from dueflow.tasks.core.defaults import INVOICE_PDF_MAX_BYTES, INVOICE_PDF_MAX_BYTES_LIMIT
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.text import CONTROL, one_line

FIELDS = {"number": "number", "invoice_id": "subject_id", "client_id": "client_id"}  # field -> column
MAX_NAME = 200  # characters of one field's value, or of the attachment's file name
DEFAULT_MAX_BYTES = INVOICE_PDF_MAX_BYTES
MAX_MAX_BYTES = INVOICE_PDF_MAX_BYTES_LIMIT
PDF_MAGIC = b"%PDF-"
_CONTROL = re.compile(CONTROL)


class TemplateError(ValueError):
    """DUEFLOW_INVOICE_PDF cannot be used; the message is one line for the operator."""


@dataclass(frozen=True)
class PdfTemplate:
    """DUEFLOW_INVOICE_PDF parsed: the template, its invoice directory, its literal parts
    and fields in order, and the largest file it attaches."""

    template: str
    directory: str  # normalised, without a trailing slash
    parts: tuple[tuple[str, str | None], ...]  # (literal text, field after it or None)
    max_bytes: int = DEFAULT_MAX_BYTES

    @property
    def by_pdf_path_only(self) -> bool:
        return all(field is None for _, field in self.parts)


def parse_pdf_template(value: str, max_bytes: int = DEFAULT_MAX_BYTES,
                       setting: str = "DUEFLOW_INVOICE_PDF") -> PdfTemplate:
    """The template, checked; TemplateError with one line naming `setting` otherwise."""
    def refuse(problem: str) -> TemplateError:
        return TemplateError(f"{setting}={value[:120]!r} {problem}: write it as /srv/invoices/{{number}}.pdf"
                             f" (fields {', '.join('{' + f + '}' for f in FIELDS)}) or as the directory"
                             " of invoices.pdf_path, /srv/invoices/")

    text = value.strip()
    if _CONTROL.search(text):
        raise refuse("has control characters")
    if not text.startswith("/"):
        raise refuse("is not an absolute path")
    try:
        parsed = list(Formatter().parse(text))
    except ValueError as exc:
        raise refuse(f"has a malformed field ({exc})") from None
    parts: list[tuple[str, str | None]] = []
    for literal, field, spec, conversion in parsed:
        if field is not None and (field not in FIELDS or spec or conversion):
            raise refuse(f"has an unknown field {{{field}}}")
        parts.append((literal, field))
    if any(".." in literal.split("/") for literal, _ in parts):
        raise refuse("has a .. in its path")
    fields = [field for _, field in parts if field is not None]
    if not fields:
        if not text.endswith("/"):
            raise refuse("names one file for every invoice")
        directory = _normal(text)
    else:
        directory = _normal(posixpath.dirname(parts[0][0]))
        if directory == "/":
            raise refuse("has no directory before its first field")
    if directory == "/":
        raise refuse("is the root directory")
    if not 1 <= max_bytes <= MAX_MAX_BYTES:
        raise TemplateError(f"DUEFLOW_INVOICE_PDF_MAX_BYTES={max_bytes} must be from 1 to {MAX_MAX_BYTES}")
    return PdfTemplate(text, directory, tuple(parts), max_bytes)


def _normal(path: str) -> str:
    """An absolute path without `.`, doubled or trailing slashes (POSIX keeps a leading
    `//` apart; dueflow does not)."""
    return "/" + posixpath.normpath(path).lstrip("/")


def name_problems(values: pd.Series) -> pd.Series:
    """Why each value cannot be one file name of the invoice directory (NA where it can):
    missing or empty, a path separator, `.` or `..`, a control character (NUL included),
    text that is not UTF-8, or over MAX_NAME characters."""
    text = values.astype("string")
    problems = pd.Series(pd.NA, index=values.index, dtype="string")
    checks = [
        (text.isna() | (text.str.strip() == ""), "is missing"),
        (text.str.contains(r"[\ud800-\udfff]", regex=True), "is not valid UTF-8"),
        (text.str.contains(CONTROL, regex=True), "has control characters"),
        (text.str.contains(r"[/\\]", regex=True), "has a path separator"),
        (text.isin([".", ".."]), "is . or .."),
        (text.str.len() > MAX_NAME, f"is longer than {MAX_NAME} characters"),
    ]
    for hit, reason in checks:
        problems[hit.fillna(False).astype(bool) & problems.isna()] = reason
    return problems


def _pdf_path_problems(paths: pd.Series, directory: str) -> tuple[pd.Series, pd.Series]:
    """pdf_path values as paths in the invoice directory (absolute inside it, or relative
    to it), and why a value cannot be one (NA where it can)."""
    text = paths.astype("string").str.strip()
    problems = pd.Series(pd.NA, index=paths.index, dtype="string")
    inside = directory + "/"
    absolute = text.str.startswith("/").fillna(False).astype(bool)
    joined = text.where(absolute, inside + text)
    normal = joined.map(lambda p: posixpath.normpath(p) if isinstance(p, str) else p, na_action="ignore")
    checks = [
        (text.str.contains(r"[\ud800-\udfff]", regex=True), "is not valid UTF-8"),
        (text.str.contains(CONTROL, regex=True), "has control characters"),
        (text.str.contains(r"(?:^|/)\.\.(?:/|$)", regex=True), "has a .. in it"),
        (text.str.len() > 4 * MAX_NAME, f"is longer than {4 * MAX_NAME} characters"),
        (~normal.astype("string").str.startswith(inside), f"is not inside the invoice directory {directory}"),
        (text.str.endswith("/"), "names a directory"),
    ]
    for hit, reason in checks:
        problems[hit.fillna(False).astype(bool) & problems.isna()] = reason
    return normal.astype("string"), problems


def invoice_pdf_paths(template: PdfTemplate, rows: pd.DataFrame) -> pd.DataFrame:
    """Per reminder (`rows`: number, subject_id, client_id[, pdf_path]), the path of its
    invoice PDF and the name its reader sees (the file's name), or why it has none
    (`note`). Columns: path, name, note; NA where not applicable."""
    index = rows.index
    path = pd.Series(pd.NA, index=index, dtype="string")
    note = pd.Series(pd.NA, index=index, dtype="string")
    own = rows["pdf_path"].astype("string") if "pdf_path" in rows else pd.Series(pd.NA, index=index,
                                                                                  dtype="string")
    has_own = (own.notna() & (own.str.strip() != "")).fillna(False).astype(bool)
    if has_own.any():
        built, problems = _pdf_path_problems(own[has_own], template.directory)
        path[has_own] = built.where(problems.isna())
        note[has_own] = ("not attached: its pdf_path " + _quoted(own[has_own]) + " " + problems).where(
            problems.notna())
    rest = ~has_own
    if rest.any():
        if template.by_pdf_path_only:
            note[rest] = "not attached: the invoice has no pdf_path"
        else:
            built = pd.Series("", index=index[rest], dtype="string")
            bad = pd.Series(pd.NA, index=index[rest], dtype="string")
            for literal, field in template.parts:
                built = built + literal
                if field is None:
                    continue
                values = rows.loc[rest, FIELDS[field]].astype("string")
                problems = name_problems(values)
                bad = bad.where(bad.notna(), ("not attached: its " + field + " " + _quoted(values) + " "
                                              + problems).where(problems.notna()))
                built = built + values.fillna("")
            path[rest] = built.where(bad.isna())
            note[rest] = bad
    # The name the reader sees: the file's, on one line (tasks/core/message.file_name_parameter).
    name = one_line(path.str.rsplit("/", n=1).str[-1], MAX_NAME).where(path.notna())
    blank = (path.notna() & (name == "")).fillna(False).astype(bool)
    note[blank] = "not attached: its file name " + _quoted(path[blank]) + " shows nothing"
    path, name = path.mask(blank), name.mask(blank)
    return pd.DataFrame({"path": path, "name": name, "note": note}, index=index)


def _quoted(values: pd.Series) -> pd.Series:
    """A value as a quarantine reason quotes it: shown safely, cut short."""
    shown = values.astype("string").fillna("").str.slice(0, 80)
    shown = shown.str.replace(CONTROL, "?", regex=True)
    return "'" + shown + "'"
