"""How a setting's text is read: one parser a kind of value, each refusing a bad value with
one ConfigError line that names the setting and what it accepts. The settings' table
(blocks/table.py) names one for each variable; the URL settings' options use `on_off` too.

A parser is given the value stripped and not empty (an empty value is the default)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from dueflow.blocks.errors import ConfigError

Parser = Callable[[str, str], Any]  # (text, the setting's name) -> value

ON = ("on", "true", "yes", "1")
OFF = ("off", "false", "no", "0")
_SCHEMA_NAME = re.compile(r"[^\x00-\x1f\x7f]{1,63}")


def _shown(text: str) -> str:
    return repr(text[:40]) + ("…" if len(text) > 40 else "")


def on_off(text: str, name: str) -> bool:
    """The one reading of a switch, for every variable and URL option: on, true, yes, 1 or
    off, false, no, 0 (any case); anything else is refused, never read as either."""
    word = text.strip().lower()
    if word in ON or word in OFF:
        return word in ON
    raise ConfigError(f"{name}={_shown(text)} is not on or off: write one of {', '.join(ON + OFF)}")


def text(value: str, name: str) -> str:
    return value


def multiline(value: str, name: str) -> str:
    """A value that may span lines: real line breaks, or `\\n` written in one line."""
    return value.replace("\\n", "\n").strip()


def seconds(value: str, name: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise ConfigError(f"{name}={value!r} is not a number of seconds") from None
    if not number > 0:
        raise ConfigError(f"{name}={value!r} must be a positive number of seconds")
    return number


def times(value: str, name: str) -> float:
    """A factor greater than 1 (`5`, `2.5`)."""
    try:
        number = float(value)
    except ValueError:
        number = 0.0
    if not 1 < number < 1e6:
        raise ConfigError(f"{name}={_shown(value)} must be a number greater than 1, e.g. 5")
    return number


def share(value: str, name: str) -> float:
    """A share of a whole, as a percentage (`50%`) or a fraction (`0.5`)."""
    written = value.removesuffix("%")
    try:
        number = float(written) / (100 if written != value else 1)
    except ValueError:
        number = -1.0
    if not 0 < number <= 1:
        raise ConfigError(f"{name}={_shown(value)} must be a share such as 50% or 0.5")
    return number


def whole(low: int, high: int) -> Parser:
    """A whole number from `low` to `high`."""
    def parse(value: str, name: str) -> int:
        if not re.fullmatch(r"[0-9]+", value) or not low <= int(value) <= high:
            raise ConfigError(f"{name}={_shown(value)} must be a whole number from {low} to {high}")
        return int(value)
    return parse


def language(value: str, name: str) -> str:
    """A language code as CLDR writes it (`es`, `en_GB`), checked against Babel's data."""
    from dueflow.tasks.core.locales import parse_language

    try:
        return parse_language(value, value, name)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def one_of(choices: tuple[str, ...]) -> Parser:
    """One of `choices`, in any case."""
    def parse(value: str, name: str) -> str:
        if value.lower() not in choices:
            raise ConfigError(f"{name}={value!r} is not one of {', '.join(choices)}")
        return value.lower()
    return parse


def schema_name(value: str, name: str) -> str:
    if not _SCHEMA_NAME.fullmatch(value):
        raise ConfigError(f"{name}={value[:80]!r} is not a schema name (1 to 63 characters, no"
                          " control characters)")
    return value
