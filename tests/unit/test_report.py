"""The run's report as a person reads it: the markdown summary and the table artifact,
from generated summary rows (pure; no Prefect)."""

from __future__ import annotations

from datetime import date

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from dueflow.tasks.core.report import (
    COUNT_LABELS,
    ROW_COLUMNS,
    TABLE_COLUMNS,
    facts_of,
    key_rows,
    markdown,
    needs_person,
    shown_counts,
    summarize,
    table_rows,
)
from dueflow.tasks.core.statuses import NEEDS_ATTENTION, RowStatus
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


@settings(max_examples=examples(30), deadline=None)
@given(runs())
def test_the_summary_says_its_headline_once_and_no_zero_count(run):
    rows, facts = run
    summary = summarize(AS_OF, False, None, rows, {}, facts=facts)
    text = markdown(summary)
    assert text.count(summary.headline()) == 1
    for name, value in shown_counts(summary).items():  # failed: those retried later; then permanently
        line = f"- **{value}** {COUNT_LABELS[name]}"
        assert (line in text.splitlines()) == bool(value)
    attention = rows["status"].isin(NEEDS_ATTENTION)
    assert ("## Needs attention" in text) == bool(attention.any())
    assert needs_person(summary) == bool(attention.any())
    # Every table line has its cells: no cell text (pipes, newlines) breaks the table.
    for line in text.split("## Needs attention")[-1].splitlines():
        if line.startswith("| ") and "## Needs attention" in text:
            assert line.replace("\\|", "").count("|") in (3, 6, 7)  # attention 5 cells, sent 6


@settings(max_examples=examples(30), deadline=None)
@given(runs())
def test_the_table_lists_problems_first_with_human_columns_and_no_handled_keys(run):
    rows, facts = run
    table = table_rows(summarize(AS_OF, False, None, rows, {}, facts=facts), 1000)
    assert tuple(table.columns) == TABLE_COLUMNS
    assert RowStatus.ALREADY_HANDLED not in set(table["status"])
    assert len(table) == int((rows["status"] != RowStatus.ALREADY_HANDLED).sum())
    problems = table["status"].isin(NEEDS_ATTENTION).tolist()
    assert problems == sorted(problems, reverse=True)  # every problem before any other row
    assert (table["subject"] == "Subject " + table["key"]).all()  # every key here has an email
    assert (table["what"] == "Hosting").all()  # the contract, in a short column
    assert set(table["amount"]) <= {"€10.00"} and set(table["date"]) <= {"2027-02-01"}  # as the emails say


def test_a_pending_email_says_which_command_settles_it():
    key = "dunning/inv-1/REMINDED_1"
    rows = key_rows("dunning", pd.DataFrame({"key": [key], "recipient": ["ap@example.com"]}),
                    RowStatus.PENDING, "connection lost after DATA")
    text = markdown(summarize(AS_OF, False, None, rows, {})).replace("<br>", " ")
    assert f"dueflow resolve {key} --as sent" in text and "connection lost after DATA" in text


@settings(max_examples=examples(20), deadline=None)
@given(run=runs(), tokens=st.lists(st.integers(0, 2**40), max_size=3) | st.integers(9_000, 20_000),
       warning=TEXT)
def test_the_summary_survives_pickling_as_prefect_persists_it(run, tokens, warning):
    """Prefect persists the summary as the flow run's result (cloudpickle); a notebook reads it
    back. Large numeric columns reach the pickler as out-of-band buffers (protocol 5)."""
    import pickle

    import cloudpickle

    rows, facts = run
    counts = list(range(tokens)) if isinstance(tokens, int) else tokens
    drafts = pd.DataFrame({"key": [f"dunning/i{i}/REMINDED_1" for i in range(len(counts))],
                           "prompt_tokens": pd.Series(counts, dtype="int64")})
    summary = summarize(AS_OF, False, "run-1", rows, {"pending": 2}, drafts=drafts,
                        warnings=[warning], facts=facts)
    for dumps in (cloudpickle.dumps, pickle.dumps):
        back = pickle.loads(dumps(summary))
        assert back.counts() == summary.counts() and back.headline() == summary.headline()
        assert (back.as_of, back.flow_run_id, back.warnings) == (AS_OF, "run-1", [warning])
        assert back.ledger_pending == 2
        for name in ("rows", "drafts", "unsettled"):
            pd.testing.assert_frame_equal(getattr(back, name), getattr(summary, name))


def test_a_large_summary_is_persisted_compressed():
    """A first night's summary (tens of thousands of reminder paragraphs) is persisted by
    Prefect: it pickles to a fraction of its text."""
    import pickle

    drafts = pd.DataFrame({"key": [f"dunning/i{i}/REMINDED_1" for i in range(20_000)],
                           "paragraph": "Your invoice is overdue; please pay it when you can."})
    summary = summarize(AS_OF, False, None, pd.DataFrame(columns=list(ROW_COLUMNS)), {}, drafts=drafts)
    assert len(pickle.dumps(summary)) < len(pickle.dumps(drafts)) / 4
