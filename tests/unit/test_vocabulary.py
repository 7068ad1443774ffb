"""One vocabulary of outcomes (issue 38, tasks/core/vocabulary.py): each outcome is said in
the same words — its status and what to do — by the CLI, the log, the summary and table
artifacts and `dueflow ledger`; a permanent refusal is called permanent everywhere, and
`resolve --as retry` sends it once more, once, to the same address."""

from __future__ import annotations

from datetime import date, timedelta

from dueflow.flows.cli import attention_lines
from dueflow.tasks.adapters.memory import memory_store
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.report import COUNT_LABELS, count_line, markdown, table_rows, text_table
from dueflow.tasks.core.statuses import RowStatus, SendResult, SendStatus
from dueflow.tasks.core.vocabulary import OUTCOMES, todo
from dueflow.tasks.ledger_export import COLUMNS, TableWriter, typed
from tests.helpers.factories import client, contract, invoice
from tests.helpers.fakes import FakeTransport
from tests.helpers.nights import run

AS_OF = date(2027, 3, 10)
SENT = (AS_OF - timedelta(days=10)).isoformat()
R1 = "dunning/i1/REMINDED_1"
ALERT = f"renewal/c1/{AS_OF + timedelta(days=30)}/30d"
REFUSED = SendResult(SendStatus.FAILED, error="550 5.1.1 no such user", permanent=True)
LATER = SendResult(SendStatus.FAILED, error="451 try later")


def company():
    return memory_store(contracts=[contract("c1", AS_OF + timedelta(days=30))], clients=[client("cl1")],
                        invoices=[invoice("i1", "cl1", SENT)])


def column(table: str, name: str, after: str, row_key: str) -> str:
    """The text of column `name` (the next one is `after`) of a wrapped terminal table
    (tasks/core/text.wrapped_table) for the row that names `row_key`, its lines joined again."""
    lines = table.splitlines()
    header = lines[0]
    start, end = header.index(name), header.index(after)
    first = next(i for i, line in enumerate(lines) if row_key in line)
    parts = []
    for line in lines[first:]:
        if parts and line[:start].strip():  # the next row begins
            break
        parts.append(line[start:end].strip())
    return " ".join(p for p in parts if p)


def ledger_table(store) -> str:
    import io

    frame = pd.DataFrame(list(store.ledger.rows.values())).reindex(columns=list(COLUMNS))
    out = io.StringIO()
    TableWriter(out).write(typed(frame))
    return out.getvalue()


def test_each_outcome_is_said_alike_in_the_cli_the_log_the_artifacts_and_the_ledger():
    store = company()
    summary = run(store, AS_OF, FakeTransport(answers={R1: REFUSED, ALERT: LATER}), retry_backoff_minutes=60)
    rows = summary.rows.set_index("key")
    assert rows.loc[R1, "status"] == "failed permanently" and pd.isna(rows.loc[R1, "retry_after"])
    assert rows.loc[ALERT, "status"] == "failed" and pd.notna(rows.loc[ALERT, "retry_after"])
    assert (summary.failed, summary.failed_permanently) == (2, 1)
    permanent = todo(RowStatus.FAILED_PERMANENTLY, R1)
    later = todo(RowStatus.FAILED, ALERT, rows.loc[ALERT, "retry_after"])
    assert "retries it after 2" in later and "UTC" in later  # says when
    assert "retries" not in permanent and "resolve" in permanent
    # The summary artifact: the outcome's word, then what to do (the first column after it).
    text = markdown(summary).replace("<br>", " ")  # a cell's lines (the UI wraps no cell)
    # The same words; a table cell drops the code marks, which a browser never wraps.
    cell = {todo_: todo_.replace("`", "") for todo_ in (permanent, later)}
    assert f"| failed permanently | {cell[permanent]} |" in text and f"| failed | {cell[later]} |" in text
    assert f"- **1** {COUNT_LABELS['failed_permanently']}" in text
    assert f"- **1** {COUNT_LABELS['failed']}" in text
    assert "a later run retries them" not in text
    # The table artifact.
    table = table_rows(summary, 50).set_index("key")
    assert table.loc[R1, "what to do"] == permanent and table.loc[ALERT, "what to do"] == later
    # The CLI: the run's table and the whole ledger's lines.
    listed = text_table(summary.rows)
    assert column(listed, "what to do", "key", R1) == permanent
    assert column(listed, "what to do", "key", ALERT) == later
    lines = "\n".join(attention_lines(summary))
    assert f"1 failed permanently — {OUTCOMES[RowStatus.FAILED_PERMANENTLY].meaning}:" in lines
    assert todo(RowStatus.FAILED_PERMANENTLY, "KEY") in lines and todo(RowStatus.FAILED, "KEY") in lines
    # The log line of a delivery.
    assert sorted(count_line(summary.rows).split(", ")) == ["1 failed", "1 failed permanently"]
    # `dueflow ledger`: the same words, with Message-ID, permanent and retry_after.
    ledger = ledger_table(store)
    assert ledger.splitlines()[0].split()[:4] == ["as_of", "status", "what", "to"]
    for name in ("message_id", "permanent", "retry_after"):
        assert name in ledger.splitlines()[0]
    [refused] = [line for line in ledger.splitlines() if R1 in line]
    assert "failed permanently" in refused and todo(RowStatus.FAILED_PERMANENTLY, "KEY") in refused


def test_every_outcome_has_one_wording_and_the_counts_use_it():
    for status, wording in OUTCOMES.items():
        assert wording.status == str(status) and wording.meaning
        assert bool(wording.todo) == (status != RowStatus.SENT)  # sent asks nothing of anyone
    for name, status in (("sent", RowStatus.SENT), ("failed", RowStatus.FAILED),
                         ("failed_permanently", RowStatus.FAILED_PERMANENTLY), ("pending", RowStatus.PENDING),
                         ("not_sent", RowStatus.NOT_SENT), ("quarantined", RowStatus.QUARANTINED),
                         ("bounced", RowStatus.BOUNCED)):
        assert COUNT_LABELS[name].startswith(f"{OUTCOMES[status].status} — {OUTCOMES[status].meaning}")


def test_the_next_night_says_why_a_failed_email_is_not_retried():
    store = company()
    run(store, AS_OF, FakeTransport(answers={ALERT: REFUSED}))
    later = run(store, AS_OF + timedelta(days=1), FakeTransport())
    row = later.rows.set_index("key").loc[ALERT]
    assert row["status"] == "failed earlier"
    assert row["detail"].startswith("failed permanently in an earlier run (550 5.1.1 no such user)")
    assert todo(RowStatus.FAILED_PERMANENTLY, ALERT) in row["detail"]


def test_resolve_as_retry_sends_a_refused_email_once_more_to_the_same_address_once():
    store = company()
    run(store, AS_OF, FakeTransport(answers={R1: REFUSED}))
    transport = FakeTransport()
    run(store, AS_OF + timedelta(days=1), transport)
    assert R1 not in transport.handed  # the same address: not retried by itself
    assert store.ledger.resolve_retry(R1, "resolved by alice as retry: mailbox fixed", "alice")  # type: ignore[attr-defined]
    for offset in range(2, 6):  # the next night sends it; no later night again
        run(store, AS_OF + timedelta(days=offset), transport)
        run(store, AS_OF + timedelta(days=offset), transport)  # a second run the same night
    assert transport.handed.count(R1) == 1
    row = store.ledger.rows[R1]  # type: ignore[attr-defined]
    assert (row["status"], row["recipient"], row["resolved_by"]) == ("sent", "cl1@clients.example", "alice")
    assert row["resolved_at"] is not None


def test_ledger_rows_are_said_in_the_vocabulary_and_no_row_has_no_outcome():
    from dueflow.tasks.core.vocabulary import ledger_outcomes

    status = pd.Series(["failed", "failed", "pending", "pending", "sent", None], dtype="string")
    permanent = pd.Series([True, False, False, False, False, None], dtype="boolean")
    sending_at = pd.Series([None, None, "2027-01-01 06:00:00+00:00", None, None, None], dtype=object)
    assert ledger_outcomes(status, permanent, sending_at).tolist() == [
        "failed permanently", "failed", "pending", "not sent", "sent", pd.NA]


def test_the_column_form_says_what_the_one_row_form_says():
    from dueflow.tasks.core.vocabulary import todos

    status = pd.Series(["failed", "failed", "failed permanently", "pending", "sent", "not sent", "bounced",
                        "quarantined", "already handled", None], dtype="string")
    key = pd.Series([f"renewal/c{i}/2027-03-01/30d" for i in range(len(status))])
    when = pd.Series([pd.Timestamp("2027-03-01 06:00", tz="UTC"), None, *[None] * 8], dtype=object)
    expected = [todo(s, k, w) if s is not pd.NA else "" for s, k, w in zip(status, key, when, strict=True)]
    assert todos(status, key, when).tolist() == expected
    assert expected[0].endswith("retries it after 2027-03-01 06:00 UTC")
    assert expected[1].endswith("retries it")
