"""The run's report as a person reads it: the markdown summary and the table artifact,
from generated summary rows (pure; no Prefect)."""

from __future__ import annotations

from datetime import date

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from dueflow.tasks.core.report import (
    COUNT_LABELS,
    TABLE_COLUMNS,
    facts_of,
    key_rows,
    markdown,
    needs_person,
    summarize,
    table_rows,
)
from dueflow.tasks.core.statuses import RowStatus
from tests import examples

AS_OF = date(2027, 1, 1)
STATUSES = [s for s in RowStatus if s != RowStatus.WOULD_SEND]
TEXT = st.text(min_size=0, max_size=30)


@st.composite
def runs(draw) -> tuple[pd.DataFrame, pd.DataFrame]:
    n = draw(st.integers(0, 12))
    keys = [f"renewal/c{i}/2027-02-01/30d" for i in range(n)]
    statuses = [draw(st.sampled_from(STATUSES)) for _ in keys]
    rows = key_rows("renewal", pd.DataFrame({"key": keys, "recipient": "o@example.com"}),
                    pd.Series(statuses, dtype=object), pd.Series([draw(TEXT) for _ in keys], dtype=object))
    due = pd.DataFrame({"key": keys, "vendor": [draw(TEXT) for _ in keys], "title": "Hosting",
                        "amount": "10.00", "currency": "EUR", "renewal_date": date(2027, 2, 1)})
    facts = facts_of("renewal", due, {k: f"Subject {k}" for k in keys})
    return rows, facts


@settings(max_examples=examples(60), deadline=None)
@given(runs())
def test_the_summary_says_its_headline_once_and_no_zero_count(run):
    rows, facts = run
    summary = summarize(AS_OF, False, None, rows, {}, facts=facts)
    text = markdown(summary)
    assert text.count(summary.headline()) == 1
    for name, value in summary.counts().items():
        line = f"- **{value}** {COUNT_LABELS[name]}"
        assert (line in text.splitlines()) == bool(value)
    attention = rows["status"].isin([RowStatus.PENDING, RowStatus.FAILED, RowStatus.NOT_SENT,
                                     RowStatus.QUARANTINED])
    assert ("## Needs attention" in text) == bool(attention.any())
    assert needs_person(summary) == bool(attention.any())
    # Every table line has its five cells: no cell text (pipes, newlines) breaks the table.
    for line in text.split("## Needs attention")[-1].splitlines():
        if line.startswith("| ") and "## Needs attention" in text:
            assert line.replace("\\|", "").count("|") in (3, 6)


@settings(max_examples=examples(60), deadline=None)
@given(runs())
def test_the_table_lists_problems_first_with_human_columns_and_no_handled_keys(run):
    rows, facts = run
    table = table_rows(summarize(AS_OF, False, None, rows, {}, facts=facts), 1000)
    assert tuple(table.columns) == TABLE_COLUMNS
    assert RowStatus.ALREADY_HANDLED not in set(table["status"])
    assert len(table) == int((rows["status"] != RowStatus.ALREADY_HANDLED).sum())
    problems = table["status"].isin([RowStatus.PENDING, RowStatus.FAILED, RowStatus.NOT_SENT,
                                     RowStatus.QUARANTINED]).tolist()
    assert problems == sorted(problems, reverse=True)  # every problem before any other row
    assert (table["subject"] == "Subject " + table["key"]).all()  # every key here has an email


def test_a_pending_email_says_which_command_settles_it():
    key = "dunning/inv-1/REMINDED_1"
    rows = key_rows("dunning", pd.DataFrame({"key": [key], "recipient": ["ap@example.com"]}),
                    RowStatus.PENDING, "connection lost after DATA")
    text = markdown(summarize(AS_OF, False, None, rows, {}))
    assert f"`dueflow resolve {key} --as sent`" in text and "connection lost after DATA" in text
