"""The red-team corpus (see build.py): `load("red_team", "en")` -> [(label, paragraph), ...]."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).parent
KINDS = ("red_team",)
LOCALES = ("en", "es")


def load(kind: str, locale: str) -> list[tuple[str, str]]:
    rows = []
    for line in (HERE / f"{kind}.{locale}.txt").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            label, text = line.split("\t", 1)
            rows.append((label, text.replace("\\n", "\n")))
    return rows
