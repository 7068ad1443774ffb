"""The reasons of quarantine as data (G6): each reason is a name, the source columns it
reads, its check and its words; a rule's reasons are a table whose order is their priority,
and a row is quarantined with the first one it fails.

Checks and words work on a rule's *facts*: one frame, a row per source row, holding the
source columns as they are ("clients.<column>" for an invoice's client's) and what the rule
read from them (dates, counts, the problem an address or amount has). Every check is a whole
column at once and NULL-safe: NA never fails a check, so "missing" is always a check of its
own. Words are templates: `{fact}` is the fact as it is, `{fact!r}` the fact quoted
(`validate.quote`: control characters escaped, long values cut); they are filled in only
for the rows that fail.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from string import Formatter

import numpy as np

from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.text import VALID_UTF8, invalid_utf8
from dueflow.tasks.core.validate import quote

Check = Callable[[pd.DataFrame], pd.Series]  # facts -> the rows that fail (True), aligned


@dataclass(frozen=True)
class Reason:
    """One reason a source row is quarantined."""

    name: str
    reads: tuple[str, ...]  # the source columns whose values decide it
    fails: Check
    says: str  # the words recorded: a template over the facts (module docstring)


def first_failing(reasons: Sequence[Reason], facts: pd.DataFrame, among: pd.Series | None = None
                  ) -> pd.Series:
    """Per row, the words of the first reason (in table order) it fails; NA where it fails
    none or is not `among` the rows to check (the rows a night can act on)."""
    said = pd.Series(pd.NA, index=facts.index, dtype="string")
    undecided = np.ones(len(facts), dtype=bool) if among is None else among.to_numpy(dtype=bool, copy=True)
    for reason in reasons:
        if not undecided.any():
            break
        hit = reason.fails(facts).to_numpy(dtype=bool, na_value=False) & undecided
        if hit.any():
            rows = facts.index[hit]
            said[rows] = words(reason.says, facts, rows)
            undecided &= ~hit
    return said


def words(template: str, facts: pd.DataFrame, rows: pd.Index) -> pd.Series:
    """`template` filled in from the facts of `rows` (only the facts it names are read)."""
    said = pd.Series("", index=rows, dtype="string")
    for literal, fact, _spec, conversion in Formatter().parse(template):
        said = said + literal
        if fact is not None:
            value = facts.loc[rows, fact]
            said = said + (quote(value) if conversion == "r" else value.astype("string"))
    return said


# The checks a table is written with: each names the facts it looks at.

def missing(fact: str) -> Check:
    """The fact is NULL (or could not be read: a date that is not one is NaT)."""
    def check(facts: pd.DataFrame) -> pd.Series:
        return facts[fact].isna()
    return check


def holds_a_problem(fact: str) -> Check:
    """The fact is the problem a value has (NA: none), e.g. an id's or an address's."""
    def check(facts: pd.DataFrame) -> pd.Series:
        return facts[fact].notna()
    return check


def is_true(fact: str) -> Check:
    def check(facts: pd.DataFrame) -> pd.Series:
        return facts[fact].astype("boolean")
    return check


def is_false(fact: str) -> Check:
    def check(facts: pd.DataFrame) -> pd.Series:
        return ~facts[fact].astype("boolean")
    return check


def is_not(fact: str, value: str) -> Check:
    """The fact holds something other than `value` (NULL is not "other": see `missing`)."""
    def check(facts: pd.DataFrame) -> pd.Series:
        return facts[fact] != value
    return check


def repeated(fact: str) -> Check:
    """The fact, a count of the rows sharing a key, is more than one."""
    def check(facts: pd.DataFrame) -> pd.Series:
        return facts[fact] > 1
    return check


def blank(fact: str) -> Check:
    """The fact, as shown (text.one_line, which shows NULL as ''), is empty."""
    def check(facts: pd.DataFrame) -> pd.Series:
        return facts[fact] == ""
    return check


def both(first: Check, second: Check) -> Check:
    def check(facts: pd.DataFrame) -> pd.Series:
        return first(facts).fillna(False).astype(bool) & second(facts).fillna(False).astype(bool)
    return check


def not_utf8(column: str) -> Check:
    """A source column holds text that is not valid UTF-8 (never, for facts read from a
    database that cannot store it: VALID_UTF8; an absent column holds nothing)."""
    def check(facts: pd.DataFrame) -> pd.Series:
        if facts.attrs.get(VALID_UTF8) or column not in facts:
            return pd.Series(False, index=facts.index)
        return invalid_utf8(facts[column])
    return check


def utf8_reasons(table: str, columns: Sequence[str], prefix: str = "") -> list[Reason]:
    """One reason per text column of `table`: its values must be valid UTF-8 (a value that
    is not cannot be written into an email, nor into PostgreSQL's ledger)."""
    return [Reason(f"{table}.{column} not UTF-8", (prefix + column,), not_utf8(prefix + column),
                   f"{table}.{column} is not valid UTF-8") for column in columns]
