"""The SQL that carries dueflow's guarantees, kept as plain files readable on their own.

A condition that several statements share lives once in `fragments/` and is pulled in
with a `/*include NAME*/` marker, so the two dialects and every statement that re-checks
it cannot drift apart; a part of a statement that several share (not a condition: no
parentheses around it) with `/*insert NAME*/`.
"""

import re
from functools import cache
from importlib.resources import files

if __name__ != "dueflow.sql":  # one import name per module (dueflow/__init__.py)
    raise ImportError(f"import dueflow.sql, not {__name__}: one import name per module")

_INCLUDE = re.compile(r"/\*(include|insert) (\w+)\*/")


def _read(path: str, name: str, dialect: str | None) -> str:
    folder = files(__package__).joinpath(path) if path else files(__package__)
    if dialect and (specific := folder.joinpath(f"{name}.{dialect}.sql")).is_file():
        return specific.read_text(encoding="utf-8")
    return folder.joinpath(f"{name}.sql").read_text(encoding="utf-8")


def with_fragments(text: str, dialect: str | None) -> str:
    """`text` with each `/*include NAME*/` replaced by the fragment, in parentheses, and each
    `/*insert NAME*/` by the fragment as it is."""
    def fragment(match: re.Match[str]) -> str:
        body = _read("fragments", match.group(2), dialect)
        lines = [line for line in body.splitlines() if not line.lstrip().startswith("--")]
        text = with_fragments("\n".join(lines).strip(), dialect)
        return "(" + text + ")" if match.group(1) == "include" else text

    return _INCLUDE.sub(fragment, text)


@cache
def statement(name: str, dialect: str | None = None) -> str:
    """Text of `sql/<name>.<dialect>.sql` (or `sql/<name>.sql` when there is no dialect
    flavour), with its fragments included."""
    return with_fragments(_read("", name, dialect), dialect)
