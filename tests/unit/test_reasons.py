"""The reasons of quarantine as tables (tasks/core/reasons.py): the first failing reason in
table order is the row's, NULL never fails a check, words are filled from the facts they
name."""

from __future__ import annotations

import pandas as pd

from dueflow.tasks.core.reasons import Reason, first_failing, is_not, is_true, missing, words


def test_the_first_failing_reason_in_table_order_is_the_rows_and_null_fails_no_check():
    facts = pd.DataFrame({"status": pd.Series(["sent", "Sent", None, "void\n"], dtype="string"),
                          "odd": [False, True, True, False]})
    table = (Reason("status missing", ("status",), missing("status"), "status missing"),
             Reason("odd", ("odd",), is_true("odd"), "odd row"),
             Reason("status unknown", ("status",), is_not("status", "sent"), "unknown status {status!r}"))
    assert first_failing(table, facts).tolist() == [pd.NA, "odd row", "status missing",
                                                    "unknown status 'void\\n'"]
    among = pd.Series([True, True, False, True])
    assert first_failing(table, facts, among).tolist() == [pd.NA, "odd row", pd.NA,
                                                           "unknown status 'void\\n'"]


def test_words_fill_a_fact_as_it_is_or_quoted():
    facts = pd.DataFrame({"id": ["a\x00b", "c"], "copies": [2, 3]})
    said = words("id {id!r} appears {copies} times", facts, pd.Index([0, 1]))
    assert said.tolist() == ["id 'a\\x00b' appears 2 times", "id 'c' appears 3 times"]
