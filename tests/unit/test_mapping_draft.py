"""The guesses of `dueflow sources init` (tasks/core/mapping_draft.py), on catalogs written
out: names as companies spell them, amounts in cents, status words, and what is left to a
person. tests/integration/test_sources_init.py drafts from real databases."""

from __future__ import annotations

import tomllib

from dueflow.tasks.core.mapping_draft import Column, Relation, draft_sources, family, mapping_text
from dueflow.tasks.core.sources import parse_mapping


def relation(name: str, *columns: str, pk: str = "") -> Relation:
    typed = [c.split(":") for c in columns]
    return Relation("billing", name, "table", tuple(Column(n, t, n == pk) for n, t in typed))


CATALOG = [
    relation("Customers", "CustomerNo:int4", "CompanyName:text", "InvoiceEmail:varchar", "Lang:text",
             "DoNotDun:bool", "Remarks:text", pk="CustomerNo"),
    relation("CustomerInvoices", "DocNo:int8", "CustomerNo:int4", "Reference:text", "AmountCents:int8",
             "Currency:bpchar", "Status:text", "InvoiceDate:date", "PaymentDue:date", "PaidOn:date",
             pk="DocNo"),
    relation("audit_log", "id:int8", "what:text"),
]


def test_names_as_companies_spell_them_amounts_in_cents_and_the_words_seen():
    samples = {("CustomerInvoices", "Status"): ["Open", "Paid", "Disputed"],
               ("Customers", "Lang"): ["EN", "Deutsch"]}
    drafts = draft_sources(CATALOG, "postgresql", samples)
    text = mapping_text(drafts, "schema billing", "postgresql", CATALOG)
    data = tomllib.loads(text)
    parse_mapping(text, "the draft")  # what the check reads
    assert data["invoices"]["relation"] == "CustomerInvoices" and data["clients"]["relation"] == "Customers"
    assert data["invoices"]["columns"] == {
        "id": "DocNo", "client_id": "CustomerNo", "number": "Reference", "amount_minor": "AmountCents",
        "currency": "Currency", "status": "Status", "sent_at": "InvoiceDate", "due_date": "PaymentDue",
        "paid_at": "PaidOn"}
    assert data["clients"]["columns"] == {"id": "CustomerNo", "name": "CompanyName", "email": "InvoiceEmail",
                                          "locale": "Lang", "notes": "Remarks", "dunning_paused": "DoNotDun"}
    assert data["invoices"]["values"]["status"] == {"Open": "sent", "Paid": "paid"}
    assert '# TODO "Disputed" = "…"' in text.splitlines()
    assert data["clients"]["values"]["locale"] == {"Deutsch": "de"}  # EN is read as it is
    assert "contracts" not in data and text.count("# TODO") == 2  # no contracts here; one status word


def test_a_column_of_another_type_is_drafted_with_its_reading_and_sqlite_by_its_declared_type():
    dated = [relation("invoice", "id:int8", "client_id:int8", "number:text", "amount:numeric",
                      "currency:text", "status:text", "sent_at:timestamptz", "due_date:text", "paid_at:date")]
    (_, _, invoices) = draft_sources(dated, "postgresql")
    assert invoices.columns["due_date"].expression is not None
    assert "read NULL-safe as date" in invoices.columns["due_date"].why
    declared = ("INTEGER", "BOOLEAN", "DATE", "varchar(20)", "", "DECIMAL(10,2)")
    assert [family(t, "sqlite") for t in declared] == ["integer", "bool", "date", "text", "other", "numeric"]
    (_, _, on_sqlite) = draft_sources(dated, "sqlite")
    assert on_sqlite.columns["due_date"].expression is None  # SQLite reads a date from text
