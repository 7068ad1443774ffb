"""The locales dueflow writes in (a contract fact): each has its templates, its money and
date formats, and its language for the LLM. Any other locale is written in English."""

from __future__ import annotations

from typing import Literal, get_args

Locale = Literal["en", "es"]  # a closed set: the run form offers exactly these
LANGUAGES: dict[str, str] = {"en": "English", "es": "Spanish"}
SUPPORTED_LOCALES: tuple[str, ...] = get_args(Locale)
assert set(SUPPORTED_LOCALES) == set(LANGUAGES)  # one list of locales, two views of it
DEFAULT_LOCALE = "en"


def supported_locale(value: str | None) -> str:
    """The locale to write in for a client's `locale` value."""
    locale = (value or "").strip().lower()
    return locale if locale in LANGUAGES else DEFAULT_LOCALE
