"""`summary.rows` as a notebook uses it (docs/operations.md, "The run's rows in a notebook"):
one typed frame — party, amount as a number with its currency, dates as dates — filtered and
summed by currency; and quarantined rows that say what the source row is. Pure: no Prefect."""

from __future__ import annotations

from datetime import date

import pandas as pd

from dueflow.tasks.core.renewal_rule import due_renewal_alerts
from dueflow.tasks.core.report import (
    SUMMARY_COLUMNS,
    concat_rows,
    facts_of,
    key_rows,
    summarize,
    table_rows,
)
from dueflow.tasks.core.statuses import RowStatus

AS_OF = date(2027, 1, 1)


def night() -> pd.DataFrame:
    """The rows a run returns: renewals in EUR and GBP, reminders in USD, one failed, one
    already handled by an earlier run, two quarantined contracts."""
    contracts = pd.DataFrame({
        "id": ["c-1", "c-2", "c-3", "c-11", "c-14"],
        "vendor": ["Acme Cloud", "Umbrella", "Hooli", "Oscorp", "Prestige Worldwide"],
        "title": ["Hosting plan", "Cleaning services", "Analytics suite", "Lab equipment", "Event hosting"],
        "amount": ["12500.00", "2100.00", "15999.99", "9800.00", "1800.00"],
        "currency": ["EUR", "GBP", "EUR", "EUR", "XYZ"],
        "renewal_date": ["2027-01-31", "2027-01-31", "2027-01-16", None, "2027-01-31"],
        "notify_email": ["f@example.com", "o@example.com", "c@example.com", "l@example.com", "e@example.com"],
        "status": "active"})
    decision = due_renewal_alerts(contracts, pd.DataFrame(columns=["subject_id", "cycle", "handled_rank"]),
                                  AS_OF, (30, 15))
    due = decision.to_reserve
    statuses = [RowStatus.FAILED if v == "Umbrella" else RowStatus.SENT for v in due["vendor"]]
    renewals = key_rows("renewal", due, pd.Series(statuses, dtype=object), "250 OK")
    quarantined = key_rows("renewal", pd.DataFrame({"key": "contracts/" + decision.quarantined["source_id"],
                                                    "recipient": pd.NA}),
                           RowStatus.QUARANTINED, decision.quarantined["reason"].tolist())
    reminders = pd.DataFrame({"key": ["dunning/inv-1/REMINDED_1", "dunning/inv-2/REMINDED_2"],
                              "recipient": "ap@contoso.example", "client_name": "Contoso Retail",
                              "number": ["2026-0101", "2026-0102"], "amount": ["1450.00", "980.40"],
                              "currency": "USD", "due_date": [date(2026, 12, 20), date(2026, 12, 1)]})
    earlier = pd.DataFrame({"key": ["dunning/inv-0/REMINDED_1"], "recipient": ["x@y.example"]})
    handled = key_rows("dunning", earlier, RowStatus.ALREADY_HANDLED, "already in the ledger")
    sent = key_rows("dunning", reminders, RowStatus.SENT, "250 OK")
    rows = concat_rows([quarantined, renewals, sent, handled])
    facts = pd.concat([facts_of("renewal", due, dict.fromkeys(due["key"], "Contract renews"),
                                decision.quarantined, "contracts"),
                       facts_of("dunning", reminders, {})], ignore_index=True)
    return summarize(AS_OF, False, None, rows, {}, facts=facts).rows


def test_a_notebook_sums_the_run_by_currency():
    rows = night()
    assert tuple(rows.columns) == SUMMARY_COLUMNS
    assert str(rows["amount"].dtype) == "Float64" and str(rows["currency"].dtype) == "string"
    assert pd.api.types.is_datetime64_any_dtype(rows["date"]) and rows["retry"].dtype == bool

    # What a notebook does: the emails that went out, summed by currency.
    sent = rows[rows["status"] == "sent"]
    by_currency = sent.groupby("currency")["amount"].sum()
    assert by_currency.to_dict() == {"EUR": 12500.00 + 15999.99, "USD": 1450.00 + 980.40}
    # Filtered by date, and by party.
    assert set(sent[sent["date"] < pd.Timestamp("2027-01-20")]["party"]) == {"Hooli", "Contoso Retail"}
    assert rows.loc[rows["status"] == "failed", "party"].tolist() == ["Umbrella"]
    # Rows with nothing to sum (quarantined, handled by an earlier run) are missing, not zero.
    assert rows.loc[rows["status"] != "sent", "amount"].isna().sum() >= 3


def test_quarantined_rows_say_what_the_source_row_is():
    rows = night()
    bad = rows[rows["status"] == "quarantined"].set_index("key")
    assert bad.loc["contracts/c-11", "reference"] == "contract c-11: Lab equipment"
    assert bad.loc["contracts/c-11", "party"] == "Oscorp"
    assert bad.loc["contracts/c-14", "reference"] == "contract c-14: Event hosting"


def test_the_table_artifact_reads_status_who_what_amount_date():
    from dueflow.tasks.core.report import RunSummary

    table = table_rows(RunSummary(as_of=AS_OF, dry_run=False, flow_run_id=None, rows=night()), 100)
    assert list(table.columns[:6]) == ["status", "what to do", "who", "what", "amount", "date"]
    by_key = table.set_index("key")
    assert by_key.loc["contracts/c-11", "what"] == "contract c-11: Lab equipment"  # not a bare key
    umbrella = table[table["who"] == "Umbrella"].iloc[0]
    assert (umbrella["status"], umbrella["amount"], umbrella["date"]) == ("failed", "£2,100.00", "2027-01-31")
    assert (umbrella["what"], umbrella["subject"]) == ("Cleaning services", "Contract renews")
    assert table["status"].iloc[0] == "failed"  # what needs a person first
    assert "already handled" not in set(table["status"])


def test_terminal_tables_wrap_whole_words_within_their_caps():
    from dueflow.tasks.core.text import wrapped_table

    subject = "Payment reminder: invoice 2026-0101 (€1,450.00) is 2 days overdue"
    lines = wrapped_table(["status", "subject"], [["sent", subject], ["failed", "short"]], [None, 20])
    assert all(len(line) <= len("failed") + 2 + 20 for line in lines), lines
    assert " ".join(" ".join(lines).split()).count("overdue") == 1  # no 'overd' + 'ue'
    assert set(subject.split()) <= set(" ".join(lines).split())
    assert lines[0].startswith("status") and lines[1].startswith("sent    Payment reminder:")


def test_money_is_written_from_the_decimal_text_exactly_as_the_email_writes_it():
    from dueflow.tasks.core.money import format_money, money_texts

    amounts = pd.Series(["12345678901234567.89", "980.40", None], dtype="string")
    shown = money_texts(amounts, pd.Series(["EUR", "GBP", "EUR"], dtype="string"))
    assert shown.tolist() == [format_money("12345678901234567.89", "EUR", "en"), "£980.40", ""]
    assert shown[0] == "€12,345,678,901,234,567.89"  # a float would have rounded the cents away
