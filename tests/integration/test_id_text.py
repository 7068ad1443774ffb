"""An id is read as the text of its value, whatever type holds it (issue 36, case 2;
docs/design.md, Keys): the same key before and after a company changes its id column's type.
Through the real source projections, on SQLite and a real PostgreSQL."""

from __future__ import annotations

from sqlalchemy import text

from dueflow.tasks.adapters import db
from tests.helpers.factories import sourced

CASES = {  # (type, value as inserted) -> the id's text
    "postgresql": [("integer", "42", "42"), ("bigint", "9007199254740993", "9007199254740993"),
                   ("numeric(10,2)", "42", "42"), ("numeric(10,2)", "42.50", "42.5"),
                   ("numeric(10,2)", "-0.00", "0"),
                   ("numeric", "100000000000000000000.000", "100000000000000000000"),
                   ("uuid", "6F1C2B0E-93A4-4C55-9B1E-0D3C7A8E5F21", "6f1c2b0e-93a4-4c55-9b1e-0d3c7a8e5f21"),
                   ("text", "042", "042"), ("text", "42.0", "42.0"), ("char(6)", "c-7", "c-7")],
    "sqlite": [("integer", "42", "42"), ("real", "42", "42"), ("real", "42.5", "42.5"),
               ("numeric", "42.00", "42"), ("text", "042", "042"), ("text", "42.0", "42.0"),
               ("real", "1e300", "1.0e+300")],
}


def test_ids_of_every_type_read_as_the_text_of_their_value(db_url) -> None:
    engine = db.engine_for(db_url)
    dialect = engine.dialect.name
    expected = {}
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE invoices"))
        columns = ", ".join(f"id_{n} {kind}" for n, (kind, _, _) in enumerate(CASES[dialect]))
        conn.execute(text(f"CREATE TABLE typed ({columns})"))
        for n, (kind, value, read) in enumerate(CASES[dialect]):
            cast = f"CAST(:v AS {kind})" if dialect == "postgresql" else f"CAST(:v AS {kind.upper()})"
            conn.execute(text(f"INSERT INTO typed (id_{n}) VALUES ({cast})"), {"v": value})
            expected[n] = read
    for n, read in expected.items():
        with engine.begin() as conn:
            conn.execute(text("DROP VIEW IF EXISTS invoices"))
            conn.execute(text(f"CREATE VIEW invoices AS SELECT id_{n} AS id, 'c' AS client_id, 'N' AS number,"
                              " 1 AS amount, 'EUR' AS currency, 'sent' AS status, NULL AS sent_at,"
                              " CAST(NULL AS date) AS due_date, NULL AS paid_at"
                              f" FROM typed WHERE id_{n} IS NOT NULL"))
        ids = db.source_ids(sourced(db_url))
        assert list(ids.loc[ids["job"] == "dunning", "id"]) == [read], CASES[dialect][n]
