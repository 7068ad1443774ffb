"""The expressions dueflow proposes for a column of another type (tasks/core/casts.py): the
pattern admits exactly the days that exist, and each proposal is the CAST it guards.
tests/integration/test_mapping_friction.py runs them on PostgreSQL."""

from __future__ import annotations

import re
from datetime import date

from hypothesis import given
from hypothesis import strategies as st

from dueflow.tasks.core.casts import DECIMAL, DIGITS_DATE, ISO_DATE, null_safe_reading, safe_cast
from dueflow.tasks.core.sources import Kind


def exists(year: int, month: int, day: int) -> bool:
    try:
        date(year, month, day)
    except ValueError:
        return False
    return True


@given(st.integers(0, 9999), st.integers(0, 13), st.integers(0, 32))
def test_the_date_pattern_admits_exactly_the_days_that_exist(year, month, day):
    written = f"{year:04d}-{month:02d}-{day:02d}"
    assert bool(re.fullmatch(ISO_DATE, written)) == exists(year, month, day), written
    assert bool(re.fullmatch(DIGITS_DATE, written.replace("-", ""))) == exists(year, month, day), written


def test_leap_days_and_month_ends():
    for written, ok in (("2024-02-29", True), ("2023-02-29", False), ("2000-02-29", True),
                        ("1900-02-29", False), ("2027-04-31", False), ("2027-12-31", True),
                        ("0000-01-01", False), ("2027-1-05", False), ("2027-01-05 ", False)):
        assert bool(re.search(ISO_DATE, written)) is ok, written
    assert all(re.search(DECIMAL, t) for t in ("12", "-1.50", ".5", "+3."))
    assert not any(re.search(DECIMAL, t) for t in ("1e999", "NaN", "1,50", "", "."))


def test_a_cast_of_the_mapping_becomes_its_guarded_form_and_nothing_else_does():
    assert safe_cast("CAST(due_on AS date)") == (
        f"CASE WHEN btrim(CAST(due_on AS text)) ~ '{ISO_DATE}' THEN CAST(btrim(CAST(due_on AS text)) AS date)"
        " END")
    assert safe_cast(" due_on::DATE ") == safe_cast("CAST(due_on AS date)")
    whole = safe_cast("cast(total_cents as bigint)")
    assert whole is not None and whole.endswith("AS numeric) END")  # never overflows
    for other in ("due_on + 1", "CAST(x AS text)", "COALESCE(CAST(a AS date), b)", "CAST(x AS json)"):
        assert safe_cast(other) is None, other


def test_a_reading_for_each_kind_of_column_of_another_type():
    assert null_safe_reading("due_on", Kind.DATE, "text") == (
        f"CASE WHEN btrim(due_on) ~ '{ISO_DATE}' THEN CAST(btrim(due_on) AS date) END")
    assert null_safe_reading("due_on", Kind.DATE, "int4") == (
        f"CASE WHEN CAST(due_on AS text) ~ '{DIGITS_DATE}' THEN to_date(CAST(due_on AS text), 'YYYYMMDD')"
        " END")
    assert null_safe_reading("total", Kind.AMOUNT, "money") == "CAST(total AS numeric)"
    assert null_safe_reading("no", Kind.TEXT, "int8") == "CAST(no AS text)"
    assert null_safe_reading("active", Kind.STATUS, "bool") is None  # a value map, not an expression
    assert null_safe_reading("at", Kind.TIMESTAMP, "int8") is None  # seconds or milliseconds: not guessed
