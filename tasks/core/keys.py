"""Idempotency keys, part of the public contract (docs/design.md), built and parsed here only:

    renewal/{contract_id}/{renewal_date:YYYY-MM-DD}/{lead}d
    dunning/{invoice_id}/{STEP}

A key is read from the right: its last parts have fixed forms, so any id (slashes
included) gives one key and one key gives back its id. Ids that cannot be carried
safely in a header (control characters, invalid UTF-8, over MAX_ID_CHARS) are refused
by `id_problems` and quarantined before any key is made from them (G6).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from enum import StrEnum
from typing import NewType

import numpy as np

from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.text import present_texts, rows_matching, text_or_none

Key = NewType("Key", str)
MAX_ID_CHARS = 200


class Job(StrEnum):
    RENEWAL = "renewal"
    DUNNING = "dunning"


class DunningStep(StrEnum):
    """The emails of the dunning state machine, in order; SENT (rank 0) is the invoice itself."""

    REMINDED_1 = "REMINDED_1"
    REMINDED_2 = "REMINDED_2"
    OVERDUE = "OVERDUE"

    @property
    def rank(self) -> int:
        return DUNNING_STEPS.index(self) + 1

    @classmethod
    def of_rank(cls, rank: int) -> DunningStep:
        return DUNNING_STEPS[rank - 1]


DUNNING_STEPS = tuple(DunningStep)
# Reminders go to the client; the last step goes to a person (DUEFLOW_ESCALATION_TO).
CLIENT_STEPS = (DunningStep.REMINDED_1, DunningStep.REMINDED_2)


def renewal_key(contract_id: str, renewal_date: date | str, lead: int) -> Key:
    cycle = renewal_date.isoformat() if isinstance(renewal_date, date) else renewal_date
    return Key(f"{Job.RENEWAL}/{contract_id}/{cycle}/{int(lead)}d")


def dunning_key(invoice_id: str, step: DunningStep | str) -> Key:
    return Key(f"{Job.DUNNING}/{invoice_id}/{DunningStep(step)}")


def renewal_keys(ids: pd.Series, cycles: pd.Series, leads: pd.Series) -> pd.Series:
    """`renewal_key` over columns (ids checked, cycles as YYYY-MM-DD, leads as days)."""
    return f"{Job.RENEWAL}/" + ids + "/" + cycles + "/" + leads.astype("string") + "d"


def dunning_keys(ids: pd.Series, steps: pd.Series) -> pd.Series:
    return f"{Job.DUNNING}/" + ids + "/" + steps.astype("string")


@dataclass(frozen=True)
class ParsedKey:
    job: Job
    subject_id: str
    cycle: str  # renewal: the renewal date; dunning: ''
    step: str  # '30d' | 'REMINDED_1' …
    step_rank: int  # renewal: lead days; dunning: 1, 2, 3


_RENEWAL_TAIL = re.compile(r"/(\d{4}-\d{2}-\d{2})/(\d+)d\Z")


def parse_key(key: str) -> ParsedKey:
    """The parts of a key; ValueError for anything `renewal_key`/`dunning_key` cannot make."""
    job, _, rest = key.partition("/")
    if job == Job.RENEWAL and (tail := _RENEWAL_TAIL.search(rest)) and tail.start() > 0:
        return ParsedKey(Job.RENEWAL, rest[: tail.start()], tail.group(1), f"{tail.group(2)}d",
                         int(tail.group(2)))
    if job == Job.DUNNING:
        subject_id, _, step = rest.rpartition("/")
        if subject_id and step in DUNNING_STEPS:
            parsed = DunningStep(step)
            return ParsedKey(Job.DUNNING, subject_id, "", parsed.value, parsed.rank)
    raise ValueError(f"not a dueflow key: {key[:80]!r}")


_PARTS = re.compile(  # parse_key's reading, for pandas' str.extract (named groups)
    r"(?s)\A(?:renewal/(?P<renewal_id>.+)/(?P<cycle>\d{4}-\d{2}-\d{2})/(?P<lead>\d+)d"
    r"|dunning/(?P<dunning_id>.+)/(?P<step>" + "|".join(DUNNING_STEPS) + r"))\Z")


def parse_keys(keys: pd.Series) -> pd.DataFrame:
    """`parse_key` over a column, without a loop: job, subject_id, cycle, step, step_rank
    for each key (all NA where a key is not one `renewal_key`/`dunning_key` can make)."""
    parts = keys.astype("string").str.extract(_PARTS)
    renewal = parts["renewal_id"].notna()
    dunning = parts["dunning_id"].notna()
    job = pd.Series(pd.NA, index=keys.index, dtype="string")
    job[renewal], job[dunning] = Job.RENEWAL.value, Job.DUNNING.value
    ranks = {step.value: step.rank for step in DUNNING_STEPS}
    return pd.DataFrame({
        "job": job,
        "subject_id": parts["renewal_id"].fillna(parts["dunning_id"]),
        "cycle": parts["cycle"].where(renewal, pd.NA).mask(dunning, ""),
        "step": (parts["lead"] + "d").fillna(parts["step"]),
        "step_rank": pd.to_numeric(parts["lead"]).fillna(parts["step"].map(ranks)).astype("Int64"),
    }, index=keys.index)


# An id's form apart from its spelling (`id_forms`): a number by its value, a uuid by its
# 32 hex digits, anything else trimmed and case-folded.
_NUMBER = re.compile(r"\A(?P<sign>[+-]?)0*(?P<whole>[0-9]*?)(?:\.(?P<fraction>[0-9]*?)0*)?\Z")
_UUID_SPELLING = re.compile(r"[{}\-]")
_UUID_DIGITS = re.compile(r"\A[0-9a-f]{32}\Z")


def id_forms(ids: pd.Series) -> pd.Series:
    """Each id without its spelling, over a column: two ids of one form are the same id
    written two ways — `1`, `01`, `1.00`, ` 1 ` and `+1` are `1`; a uuid in capitals, with
    braces or without hyphens is its 32 lowercase hex digits; any other text is trimmed and
    case-folded (`INV-7 ` is `inv-7`). Keys are never made from a form (two distinct text
    ids may share one: `A7` and `a7`); the ledger keeps each row's form so that a source
    whose ids changed spelling between nights is noticed before anything is sent."""
    text = ids.astype("string").str.strip().str.casefold()
    number = text.str.extract(_NUMBER)
    is_number = number["whole"].notna() & (text.str.contains("[0-9]", regex=True) == True)  # noqa: E712
    whole = number["whole"].mask(number["whole"].eq(""), "0")
    fraction = number["fraction"].fillna("")
    value = whole + ("." + fraction).where(fraction.ne(""), "")
    negative = number["sign"].eq("-") & value.ne("0")
    value = ("-" + value).where(negative, value)
    bare = text.str.replace(_UUID_SPELLING, "", regex=True)
    is_uuid = bare.str.match(_UUID_DIGITS) == True  # noqa: E712 - NA is not a uuid
    return text.mask(is_uuid, bare).mask(is_number, value)


def source_row_keys(source: str, ids: pd.Series) -> pd.Series:
    """How a source row is named where it has no idempotency key (a quarantined row):
    `{source}/{id}`, e.g. contracts/C-1."""
    return f"{source}/" + ids


# Characters no id may hold: C0/C1 controls (CR, LF, NUL, TAB …), the Unicode line and
# paragraph separators, and lone surrogates (how invalid UTF-8 arrives from SQLite).
_UNSAFE_ID = r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]"
_UNSAFE = re.compile(_UNSAFE_ID)
_SURROGATES = re.compile(r"[\ud800-\udfff]")


def id_problem(value: object, what: str = "id") -> str | None:
    """Why one id cannot make a key, or None when it can."""
    text = text_or_none(value)
    if text is None or not text.strip():
        return f"{what} missing"
    if _SURROGATES.search(text):
        return f"{what} is not valid UTF-8"
    if _UNSAFE.search(text):
        return f"{what} contains control characters"
    if len(text) > MAX_ID_CHARS:
        return f"{what} longer than {MAX_ID_CHARS} characters"
    return None


def id_problems(ids: pd.Series, what: str = "id") -> pd.Series:
    """Why each id cannot make a key (NA where it can): missing or blank, invalid UTF-8,
    control characters, or longer than MAX_ID_CHARS. `id_problem` over whole columns."""
    present, texts = present_texts(ids)
    lengths = np.zeros(len(ids), dtype=np.int64)
    blank = ~present
    if texts:  # not through numpy's fixed-width text, which drops trailing NULs ("\x00" is no blank)
        lengths[present] = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
        blank[present] = np.fromiter(map(len, map(str.strip, texts)), dtype=np.int64, count=len(texts)) == 0
    reasons = pd.Series(pd.NA, index=ids.index, dtype="string")
    undecided = np.ones(len(ids), dtype=bool)
    for failed, reason in ((blank, f"{what} missing"),
                           (rows_matching(ids, _SURROGATES), f"{what} is not valid UTF-8"),
                           (rows_matching(ids, _UNSAFE), f"{what} contains control characters"),
                           (lengths > MAX_ID_CHARS, f"{what} longer than {MAX_ID_CHARS} characters")):
        hit = failed & undecided
        if hit.any():
            reasons[hit] = reason
            undecided &= ~hit
    return reasons


def printable_id(value: object) -> str:
    """An id as an operator can read and a database can store it, whatever it holds:
    invalid UTF-8 and control characters escaped, long ids cut, missing ones named."""
    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return "(missing id)"
    text = str(value)
    if not text.strip():
        return f"(blank id {text!r})"
    try:  # SQLite hands invalid UTF-8 over as surrogate escapes: show the bytes
        text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    text = re.sub(_UNSAFE_ID, lambda m: repr(m.group())[1:-1], text)
    text = text if len(text) <= MAX_ID_CHARS else text[:MAX_ID_CHARS] + "…"
    return f"'{text}'" if text != text.strip() else text  # a space that tells two ids apart shows


def printable_ids(ids: pd.Series) -> pd.Series:
    """`printable_id` over a column (for the few rows a person is shown: quarantined, held)."""
    return ids.astype(object).map(printable_id).astype("string")
