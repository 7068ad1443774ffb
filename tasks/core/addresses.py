"""Email addresses: the strict form dueflow accepts from data and settings."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a Series comes in already made: settings load no pandas
    from dueflow.tasks.core.frames import pd

# Deliberately strict: an RFC 5322 dot-atom addr-spec in ASCII — one @, no spaces, quotes,
# angle brackets or line breaks, no leading, trailing or doubled dot, a local part of at
# most 64 characters (RFC 5321), no encoded word, a dotted domain of LDH labels whose
# IDNA labels (xn--) decode. What a relay accepts without SMTPUTF8, what Python's header
# parser reads without a defect, and what a mail client shows as it is (issue 25).
_ATEXT = r"-A-Za-z0-9!#$%&'*+/=?^_`{|}~"  # '-' first: a literal in a character class
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_LOCAL = rf"[{_ATEXT}]+(?:\.[{_ATEXT}]+)*"
ADDRESS = rf"{_LOCAL}@{_LABEL}(?:\.{_LABEL})+"
MAX_ADDRESS = 254
MAX_LOCAL = 64

# Each rule: a pattern that finds the problem (re.search), and what an operator is told.
# The first that matches is the reason; applied the same way to one value and to a column.
# \Z, not $: `$` also matches before a final line break.
_FORM = (rf"^(?![{_ATEXT}.]+@[A-Za-z0-9.-]+\Z)",
         "is not a plain ASCII address name@domain (one @; no spaces, quotes, brackets or accents)")
_RULES = (
    _FORM,
    (rf"^.{{{MAX_ADDRESS + 1},}}", f"is longer than {MAX_ADDRESS} characters"),
    (rf"^[^@\n]{{{MAX_LOCAL + 1},}}@", f"has a part before the @ longer than {MAX_LOCAL} characters"),
    (r"^\.|\.@", "starts or ends its part before the @ with a dot"),
    (r"^[^@\n]*\.\.", "has two dots in a row before the @"),
    (r"^[^@\n]*=\?[^@\n]*\?=", "looks like an encoded word (=?charset?…?=), which mail clients show decoded"),
    (r"\.[0-9]+\Z", "ends in a number, not a domain name"),
)
_DOMAIN = {True: (rf"@(?!(?:{_LABEL}\.)+{_LABEL}\Z)",
                  "has no dotted domain of letters, digits and hyphens (labels of 1 to 63 characters)"),
           False: (rf"@(?!(?:{_LABEL}\.)*{_LABEL}\Z)",
                   "has no domain of letters, digits and hyphens (labels of 1 to 63 characters)")}
_IDNA = "has a domain label starting with xn-- that is not valid IDNA"
_COMPILED = {dotted: [(re.compile(pattern), reason) for pattern, reason in (*_RULES, _DOMAIN[dotted])]
             for dotted in (True, False)}


def _idna_ok(domain: str) -> bool:
    """Every xn-- label of the domain decodes as punycode and encodes back to itself."""
    for label in domain.lower().split("."):
        if label.startswith("xn--"):
            try:
                if label[4:].encode("ascii").decode("punycode").encode("idna").decode() != label:
                    return False
            except (UnicodeError, ValueError):
                return False
    return True


def address_problem(value: object, dotted: bool = True) -> str | None:
    """Why `value` is not an address dueflow sends to (None when it is one); `dotted=False`
    also takes a bare host name (dueflow@localhost)."""
    if not isinstance(value, str):
        return _FORM[1]
    for pattern, reason in _COMPILED[dotted]:
        if pattern.search(value):
            return reason
    return None if _idna_ok(value.rpartition("@")[2]) else _IDNA


# The same rules for a column, matched over the values joined by line breaks
# (tasks/core/text.search_rows): there `$` is a value's end.
_COLUMN_RULES = [(re.compile(pattern.replace(r"\Z", "$"), re.MULTILINE), reason)
                 for pattern, reason in (*_RULES, _DOMAIN[True])]
_XN = re.compile("xn--", re.IGNORECASE | re.MULTILINE)


def address_problems(values: pd.Series) -> pd.Series:
    """`address_problem` of each value, vectorised: NA where the value is an address. Each
    rule is one regular expression over the whole column, joined once (no Python call per
    value); the IDNA rule only over the few values that hold an xn-- label."""
    import numpy as np

    from dueflow.tasks.core.frames import pd as pandas
    from dueflow.tasks.core.text import lines, search_rows

    text = values.astype("string")
    column = lines(text)
    problems = np.full(len(text), None, dtype=object)
    problems[~column.present] = _FORM[1]
    undecided = column.present.copy()
    for pattern, reason in _COLUMN_RULES:
        found = search_rows(column, pattern) & undecided
        problems[found] = reason
        undecided &= ~found
    idn = np.flatnonzero(undecided & search_rows(column, _XN))
    if len(idn):
        bad = np.asarray([not _idna_ok(str(v).rpartition("@")[2]) for v in text.iloc[idn]], dtype=bool)
        problems[idn[bad]] = _IDNA
    return pandas.Series(problems, index=values.index, dtype="string")


def valid_email(values: pd.Series) -> pd.Series:
    """True where the value is a single plain email address."""
    return address_problems(values).isna()


def is_address(value: object, dotted: bool = True) -> bool:
    """A plain address; `dotted=False` also takes a bare host name (dueflow@localhost)."""
    return address_problem(value, dotted) is None


@dataclass(frozen=True)
class Mailbox:
    """An address with an optional display name: `Finance <alerts@corp.example>`."""

    address: str
    display_name: str = ""

    @property
    def domain(self) -> str:
        return self.address.rpartition("@")[2]


def parse_mailbox(value: str, setting: str, dotted: bool = True) -> Mailbox:
    """`alerts@corp.example`, `Finance <alerts@corp.example>`, `"Finance, Inc" <…>` or
    `Équipe Finanzas, S.A. <…>` (what people write: a name may hold commas, accents and
    quotes). Anything else raises ValueError with one line naming `setting`."""
    text = value.strip()
    name, address = "", text
    if text.endswith(">") and text.count("<") == 1 and text.count(">") == 1:
        name, _, address = text[:-1].partition("<")
        name, address = name.strip(), address.strip()
        if len(name) >= 2 and name[0] == name[-1] == '"':
            name = re.sub(r'\\(.)', r"\1", name[1:-1]).strip()
    problem = address_problem(address, dotted)
    if problem:
        problem = f"is not an email address: it {problem}"
    elif re.search(r"[\x00-\x1f\x7f-\x9f\u2028\u2029<>]", name):
        problem = "has control characters or angle brackets in its name"
    elif len(name) > 200:
        problem = "has a name longer than 200 characters"
    if problem:
        raise ValueError(f"{setting}={value!r} {problem}: write it as alerts@example.com or"
                         " Name <alerts@example.com> (plain ASCII address)")
    return Mailbox(address=address, display_name=name)
