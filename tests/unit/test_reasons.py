"""The reasons of quarantine as tables (tasks/core/reasons.py): the first failing reason in
table order is the row's, NULL never fails a check, words are filled from the facts they
name — and every fact a table's words or checks name is one its rule provides, every column
it reads is a source column."""

from __future__ import annotations

from datetime import date
from string import Formatter

import pandas as pd
import pytest

from dueflow.tasks.core.invoices import INVOICE_REASONS, read_invoices, reason_facts
from dueflow.tasks.core.profiles import default_profile
from dueflow.tasks.core.reasons import Reason, first_failing, is_not, is_true, missing, words
from dueflow.tasks.core.renewal_rule import CONTRACT_REASONS
from dueflow.tasks.core.renewal_rule import reason_facts as contract_reason_facts
from dueflow.tasks.core.validate import business_dates

CONTRACTS = pd.DataFrame({"id": ["c-1"], "vendor": ["Acme"], "title": ["Hosting"], "amount": ["10.00"],
                          "currency": ["EUR"], "renewal_date": ["2027-02-01"],
                          "notify_email": ["o@example.com"], "status": ["active"]})
INVOICES = pd.DataFrame({"id": ["i-1"], "client_id": ["k-1"], "number": ["F-1"], "amount": ["10.00"],
                         "currency": ["EUR"], "status": ["sent"], "sent_at": ["2027-01-01 09:00:00+00"],
                         "due_date": ["2027-01-31"], "paid_at": [None], "dunning_hold_until": [None]})
CLIENTS = pd.DataFrame({"id": ["k-1"], "name": ["Client"], "email": ["ap@client.example"], "locale": ["en"],
                        "notes": [None], "dunning_paused": ["false"], "cc_email": [None],
                        "dunning_paused_until": [None], "dunning_profile": [None]})


def named_facts(reason: Reason) -> set[str]:
    return {fact for _, fact, _, _ in Formatter().parse(reason.says) if fact is not None}


def contract_facts() -> pd.DataFrame:
    renewal = business_dates(CONTRACTS["renewal_date"], "UTC")
    return contract_reason_facts(CONTRACTS, renewal, pd.Series(True, index=CONTRACTS.index))


def invoice_facts() -> pd.DataFrame:
    inv = read_invoices(INVOICES, CLIENTS, "UTC", default_profile((7, 5, 7), "sent"), date(2027, 1, 10))
    return reason_facts(inv, pd.Series(True, index=inv.rows.index))


@pytest.mark.parametrize(("table", "facts", "sources"), [
    (CONTRACT_REASONS, contract_facts, set(CONTRACTS)),
    (INVOICE_REASONS, invoice_facts, set(INVOICES) | {f"clients.{c}" for c in CLIENTS}),
], ids=["contracts", "invoices"])
def test_a_table_names_only_facts_its_rule_provides_and_reads_only_source_columns(table, facts, sources):
    known = facts()
    assert len({r.name for r in table}) == len(table) > 15
    for reason in table:
        assert reason.reads and set(reason.reads) <= sources, reason.name
        assert named_facts(reason) <= set(known), reason.name
        failing = reason.fails(known)  # a clean row fails no reason
        assert failing.index.equals(known.index) and not failing.fillna(False).astype(bool).any(), reason.name


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
