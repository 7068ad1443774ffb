"""The locales dueflow writes in (a contract fact): each has its templates, its money and
date formats, and its language for the LLM. Any other locale is written in English."""

from __future__ import annotations

LANGUAGES = {"en": "English", "es": "Spanish"}
SUPPORTED_LOCALES = tuple(LANGUAGES)
DEFAULT_LOCALE = "en"


def supported_locale(value: str | None) -> str:
    """The locale to write in for a client's `locale` value."""
    locale = (value or "").strip().lower()
    return locale if locale in LANGUAGES else DEFAULT_LOCALE
