"""What `dueflow sources init` reads of a company's database (read-only): the tables and
views of a schema with their columns, types and primary keys (sql/catalog_columns), and a
bounded sample of the distinct values of the columns a value map may be needed for. The
drafting itself is pure: tasks/core/mapping_draft.py."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import groupby

from sqlalchemy import Engine, text
from sqlalchemy.exc import DBAPIError

from dueflow.sql import statement
from dueflow.tasks.core.mapping_draft import Column, Relation

SAMPLE_ROWS = 100_000  # rows a sample of distinct values reads at most: a status column of a big table
MAX_VALUES = 20  # more distinct values than this is not a closed vocabulary: no value map drafted


def _dialect(engine: Engine) -> str:
    return "postgresql" if engine.dialect.name == "postgresql" else "sqlite"


def relations(engine: Engine, schema: str | None) -> list[Relation]:
    """The tables and views of `schema` (None: every schema of the search path; SQLite: the
    database), dueflow's own aside, with their columns."""
    dialect = _dialect(engine)
    with engine.connect() as conn:
        if dialect == "postgresql":
            conn.exec_driver_sql("SET TRANSACTION READ ONLY")
        rows = conn.execute(
            text(statement("catalog_columns", dialect)), {"schema": schema} if dialect == "postgresql" else {}
        ).all()
        conn.rollback()
    found = []
    for (where, name, kind), columns in groupby(rows, key=lambda r: (r.schema, r.relation, r.kind)):
        found.append(
            Relation(
                where,
                name,
                kind,
                tuple(Column(c.column_name, c.type_name or "", bool(c.primary_key)) for c in columns),
            )
        )
    return found


def distinct_values(
    engine: Engine, wanted: Iterable[tuple[Relation, str]]
) -> dict[tuple[str, str], list[str]]:
    """Per (relation, column), its distinct values as text among the first SAMPLE_ROWS rows
    (at most MAX_VALUES + 1 of them, NULL aside); a column that cannot be read gives none."""
    seen: dict[tuple[str, str], list[str]] = {}
    with engine.connect() as conn:
        quote = conn.dialect.identifier_preparer.quote
        for relation, column in wanted:
            qualified = ".".join(quote(part) for part in (relation.schema, relation.name) if part)
            sql = (
                f"SELECT DISTINCT v FROM (SELECT CAST({quote(column)} AS TEXT) AS v FROM {qualified}"
                f" LIMIT {SAMPLE_ROWS}) AS s WHERE v IS NOT NULL ORDER BY v LIMIT {MAX_VALUES + 1}"
            )
            try:
                if _dialect(engine) == "postgresql":
                    conn.exec_driver_sql("SET TRANSACTION READ ONLY")
                values = [str(v) for v in conn.execute(text(sql)).scalars()]
            except DBAPIError:
                values = []
            conn.rollback()
            seen[(relation.name, column)] = values if len(values) <= MAX_VALUES else []
    return seen
