"""The column functions of the nightly path against their one-value references, on random
values (amounts, ids, text with invalid UTF-8), and the decisions' cost in Python function
calls, which must not grow with the rows (counted with sys.setprofile: no clock)."""

from __future__ import annotations

import re
import sys
from datetime import date

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dueflow.tasks.core.dunning_rule import due_dunning_steps
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.keys import id_problem, id_problems
from dueflow.tasks.core.money import amount_problem, amount_problems
from dueflow.tasks.core.renewal_rule import due_renewal_alerts
from dueflow.tasks.core.text import invalid_utf8, lines, search_rows
from tests import examples

digits = st.text(alphabet="0123456789", max_size=35)
amount_texts = st.one_of(
    st.builds(lambda sign, whole, dot, fraction, pad: f"{pad}{sign}{whole}{dot}{fraction}{pad}",
              st.sampled_from(["", "-", "+"]), digits, st.sampled_from(["", ".", "."]), digits,
              st.sampled_from(["", " "])),
    st.sampled_from(["1e3", "1.5E-2", "١٢", "abc", "", " ", ".", "-", "0.000", "-0", "1e99999"]),
    st.text(max_size=6),
)
cells = st.one_of(st.none(), amount_texts, st.integers(-10**6, 10**6),
                  st.floats(allow_nan=True, allow_infinity=True), st.just(pd.NA))
currencies = st.one_of(st.none(), st.sampled_from(["EUR", "JPY", "KWD", "XXX", "usd"]))


@given(st.lists(st.tuples(cells, currencies), max_size=30), st.booleans())
def test_amount_problems_are_the_one_amount_reference_over_columns(rows, positive):
    amounts = pd.Series([a for a, _ in rows], dtype=object)
    currency = pd.Series([c for _, c in rows], dtype=object)
    expected = [amount_problem(None if pd.isna(a) else str(a), c, positive=positive) for a, c in rows]
    got = amount_problems(amounts, currency, positive=positive)
    assert [None if pd.isna(v) else v for v in got] == expected


id_cells = st.one_of(st.none(), st.text(max_size=8), st.text(min_size=199, max_size=202),
                     st.integers(), st.sampled_from(["\ud800x", "a\nb", " ", "\u2028", "ok"]))


@given(st.lists(id_cells, max_size=30))
@example(["\x00", " \x00", "a\x00"])  # CI found it: numpy's fixed-width text drops trailing NULs
def test_id_problems_are_the_one_id_reference_over_columns(values):
    got = id_problems(pd.Series(values, dtype=object))
    assert [None if pd.isna(v) else v for v in got] == [id_problem(v) for v in values]


@given(st.lists(st.one_of(st.none(), st.text(max_size=5), st.sampled_from(["\udcff", "é\ud800"])),
                max_size=30))
def test_invalid_utf8_finds_exactly_the_values_with_surrogates(values):
    got = invalid_utf8(pd.Series(values, dtype=object)).tolist()
    assert got == [isinstance(v, str) and any(0xD800 <= ord(c) <= 0xDFFF for c in v) for v in values]


# Patterns over a column joined by line breaks, some of which can cross a line ([^@], \s):
# the column helpers must still answer value by value.
LINE_PATTERNS = [re.compile(p, re.MULTILINE) for p in
                 (r"^[^@]*\.\.", r"^[^@]{3,}@", r"a\s*b", r"^x$", r"\d+$", r"^(?:[a-z.]+@[a-z.]+)$")]
line_cells = st.one_of(st.none(), st.text(alphabet="ab.@x1 \n\r\x00\x01", max_size=8))


@settings(max_examples=examples(120), deadline=None)
@given(st.lists(line_cells, max_size=20), st.sampled_from(LINE_PATTERNS))
@example(["0@A.aR", "", ".."], LINE_PATTERNS[0])  # CI found it: a match that ate a line break
def test_search_over_a_column_is_the_one_value_answer(values, pattern):
    column = pd.Series(values, dtype=object)

    def one_by_one(pattern: re.Pattern[str]) -> list[bool]:
        single = re.compile(pattern.pattern.replace("$", r"\Z"))  # `$` is a value's end over a column
        return [isinstance(v, str) and single.search(v.replace("\n", " ")) is not None for v in values]

    assert search_rows(column, pattern).tolist() == one_by_one(pattern)
    prepared = lines(column)  # joined once, searched by every pattern
    for other in LINE_PATTERNS:
        assert search_rows(prepared, other).tolist() == one_by_one(other), other


AS_OF = date(2027, 6, 15)


def generated(rows: int) -> dict[str, pd.DataFrame]:
    """Clean rows, a share of them due tonight, as extract_frame gives them (text)."""
    i = np.arange(rows)
    ids = pd.Series(i).astype(str)
    renew = pd.Series(pd.Timestamp(AS_OF) + pd.to_timedelta(i % 90, unit="D")).dt.strftime("%Y-%m-%d")
    contracts = pd.DataFrame({"id": "c" + ids, "vendor": "Vendor", "title": "Service",
                              "amount": (i % 1000 + 10).astype(str) + ".50", "currency": "EUR",
                              "renewal_date": renew, "notify_email": "o@example.com", "status": "active"},
                             dtype=object)
    sent = pd.Series(pd.Timestamp(AS_OF) - pd.to_timedelta(i % 10, unit="D")).dt.strftime(
        "%Y-%m-%d 09:00:00+00")
    invoices = pd.DataFrame({"id": "i" + ids, "client_id": "k" + (pd.Series(i) % 50).astype(str),
                             "number": "F-" + ids, "amount": "120.00", "currency": "EUR", "status": "sent",
                             "sent_at": sent, "due_date": (date(2027, 7, 1)).isoformat(), "paid_at": None},
                            dtype=object)
    clients = pd.DataFrame({"id": "k" + pd.Series(np.arange(50)).astype(str), "name": "Client",
                            "email": "ap@client.example", "locale": "en", "notes": None,
                            "dunning_paused": "false"}, dtype=object)
    return {"contracts": contracts, "invoices": invoices, "clients": clients}


def python_calls(fn) -> int:
    """Python functions called while fn runs (C functions not counted)."""
    count = 0

    def profile(_frame, event, _arg):
        nonlocal count
        if event == "call":
            count += 1

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return count


def deciding(data: dict[str, pd.DataFrame]) -> None:
    renewal_history = pd.DataFrame({"subject_id": pd.Series(dtype=object), "cycle": pd.Series(dtype=object),
                                    "handled_rank": pd.Series(dtype="int64")})
    dunning_history = pd.DataFrame({c: pd.Series(dtype=object) for c in (
        "subject_id", "step", "step_rank", "as_of", "attempt_as_of", "status")})
    due_renewal_alerts(data["contracts"], renewal_history, AS_OF, (15, 30, 60))
    due_dunning_steps(data["invoices"], data["clients"], dunning_history, AS_OF,
                      escalation_to="esc@example.com")


def test_deciding_makes_as_many_python_calls_for_100000_rows_as_for_1000():
    small, large = generated(1_000), generated(100_000)
    deciding(small)  # caches (currencies' minor units, compiled patterns) are warm for both
    calls = [python_calls(lambda d=d: deciding(d)) for d in (small, large)]
    assert calls[1] <= calls[0] + 200, calls
