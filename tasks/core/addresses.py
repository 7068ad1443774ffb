"""Email addresses: the strict form dueflow accepts from data and settings."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a Series comes in already made: settings load no pandas
    from dueflow.tasks.core.frames import pd

# Deliberately strict: one @, ASCII, no spaces, quotes, angle brackets or line breaks, a
# dotted domain. What a relay accepts without SMTPUTF8, and what no header can be built around.
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_LOCAL = r"[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+"
ADDRESS = rf"{_LOCAL}@{_LABEL}(?:\.{_LABEL})+"
MAX_ADDRESS = 254
_ADDRESS = re.compile(ADDRESS)
_HOST_ADDRESS = re.compile(rf"{_LOCAL}@{_LABEL}(?:\.{_LABEL})*")  # dueflow@localhost, for a sender


_ADDRESS_LINES = re.compile(rf"^(?:{ADDRESS})$", re.MULTILINE)


def valid_email(values: pd.Series) -> pd.Series:
    """True where the value is a single plain email address (over the column: one
    substitution, no Python function per value)."""
    import numpy as np

    from dueflow.tasks.core.frames import pd
    from dueflow.tasks.core.text import fullmatch_rows, strings

    array, _present = strings(values)
    short = np.strings.str_len(array) <= MAX_ADDRESS if len(array) else np.zeros(0, dtype=bool)
    return pd.Series(fullmatch_rows(values, _ADDRESS_LINES) & short, index=values.index, dtype=bool)


def is_address(value: object, dotted: bool = True) -> bool:
    """A plain address; `dotted=False` also takes a bare host name (dueflow@localhost)."""
    pattern = _ADDRESS if dotted else _HOST_ADDRESS
    return isinstance(value, str) and len(value) <= MAX_ADDRESS and bool(pattern.fullmatch(value))


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
    problem = None
    if not is_address(address, dotted):
        problem = "is not an email address"
    elif re.search(r"[\x00-\x1f\x7f-\x9f\u2028\u2029<>]", name):
        problem = "has control characters or angle brackets in its name"
    elif len(name) > 200:
        problem = "has a name longer than 200 characters"
    if problem:
        raise ValueError(f"{setting}={value!r} {problem}: write it as alerts@example.com or"
                         " Name <alerts@example.com> (plain ASCII address)")
    return Mailbox(address=address, display_name=name)
