"""The words sql/ compares or writes a status column with are the enums' (tasks/core/statuses.py,
and the bounce kinds, jobs and steps beside them): a status renamed in Python and not in a
statement — or a typo in one — fails here, not as a row no statement ever matches again.

Every statement is parsed (sqlglot) as each dialect runs it, its fragments included; every
string literal that a status column is compared with (=, <>, IN, IS [NOT] DISTINCT FROM,
CASE column WHEN), assigned (SET, INSERT) or that a bind parameter standing for one is
compared with is checked against that column's enum. A column is traced to its table through
aliases, derived tables and CTEs; one that cannot be traced fails the test, so a new statement
cannot slip past it. tests/integration/test_status_checks.py holds the enums to the CHECK
constraints the migrations make.

A test rather than statements generated from the enums: the files stay plain SQL that runs
as it reads (docs, psql, EXPLAIN), and the partial indexes and their queries keep literal
statuses, which is what lets PostgreSQL's planner match them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

from dueflow.sql import with_fragments
from dueflow.tasks.core.bounces import BounceKind
from dueflow.tasks.core.keys import DunningStep, Job
from dueflow.tasks.core.statuses import CONTRACT_STATUSES, INVOICE_STATUSES, LedgerStatus

SQL = Path(__file__).resolve().parents[2] / "sql"
# Each column that holds a status word, by table, and the words it may hold.
DOMAINS: dict[tuple[str, str], frozenset[str]] = {
    ("dueflow_ledger", "status"): frozenset(LedgerStatus),
    ("invoices", "status"): frozenset(INVOICE_STATUSES),
    ("contracts", "status"): frozenset(CONTRACT_STATUSES),
    ("dueflow_bounces", "kind"): frozenset(BounceKind),
    ("dueflow_ledger", "job"): frozenset(Job),
    ("dueflow_ledger", "step"): frozenset(DunningStep),  # a renewal's steps are its leads: no word
}
# Tables that hold rows of another: SQLite's staging of the rows a reservation inserts.
HOLDS_ROWS_OF = {"candidate": "dueflow_ledger"}
COLUMNS = {column for _, column in DOMAINS}
QUERIES = (exp.Select, exp.Update, exp.Delete, exp.Insert)
READ = {"postgresql": "postgres", "sqlite": "sqlite"}


def statements() -> Iterator[tuple[str, exp.Expression]]:
    """Every statement under sql/ as each dialect it runs on reads it, fragments included (a
    fragment is checked where it is used: its aliases are the statement's)."""
    for path in sorted(SQL.glob("*.sql")):
        own = next((d for d in READ if f".{d}." in path.name), None)
        for dialect in [own] if own else list(READ):
            text = with_fragments(path.read_text(encoding="utf-8"), dialect)
            if "'" not in "\n".join(line.split("--")[0] for line in text.splitlines()):
                continue  # no literal at all (and some use a type sqlglot cannot read: oid[])
            for tree in sqlglot.parse(text, read=READ[dialect]):
                if tree is not None:
                    yield f"{path.name} ({dialect})", tree


def sources(query: exp.Expression) -> dict[str, exp.Expression]:
    """What `query` reads or writes directly, by alias (or name)."""
    found = {}
    if isinstance(query, exp.Update | exp.Delete | exp.Insert):
        target = query.this.this if isinstance(query.this, exp.Schema) else query.this
        found[target.alias_or_name] = target
    for part in (query.args.get("from_"), *(query.args.get("joins") or [])):
        if part is not None:
            found[part.this.alias_or_name] = part.this
    return found


def named(known: dict[str, exp.Expression], qualifier: str) -> exp.Expression | None:
    """The source a qualifier names; unqualified, the query's only source."""
    if qualifier:
        return known.get(qualifier)
    return next(iter(known.values())) if len(known) == 1 else None


def cte(node: exp.Expression, name: str) -> exp.Expression | None:
    """The query of the CTE `name` that `node` can see, if any."""
    while node is not None:
        for defined in getattr(node.args.get("with_"), "expressions", None) or []:
            if defined.alias == name:
                return defined.this
        node = node.parent
    return None


def origin(source: exp.Expression, column: str) -> str | None:
    """The table `column` of `source` (a table, derived table or CTE) comes from."""
    if isinstance(source, exp.Unnest):  # PostgreSQL's arrays of the rows a statement inserts or updates
        write = source.find_ancestor(exp.Insert, exp.Update)
        return origin(write.this.this if isinstance(write.this, exp.Schema) else write.this, column) \
            if write is not None else None
    if isinstance(source, exp.Table):
        query = cte(source, source.name)
        if query is None:
            return HOLDS_ROWS_OF.get(source.name, source.name)
    elif isinstance(source, exp.Subquery):
        query = source.this
    else:
        return None
    found = {through_projection(branch, column) for branch in branches(query)}
    return found.pop() if len(found) == 1 else None


def branches(query: exp.Expression) -> list[exp.Expression]:
    """The SELECTs of a UNION (the query itself otherwise)."""
    if isinstance(query, exp.SetOperation):
        return branches(query.left) + branches(query.right)
    return [query]


def through_projection(select: exp.Expression, column: str) -> str | None:
    for projection in select.expressions:
        if isinstance(projection, exp.Star) or isinstance(projection.this, exp.Star):  # *, p.*
            source = named(sources(select), projection.table if isinstance(projection, exp.Column) else "")
            return origin(source, column) if source is not None else None
        if projection.alias_or_name == column:
            inner = projection.unalias()
            return table_of(inner) if isinstance(inner, exp.Column) else None
    return None


def table_of(column: exp.Column) -> str | None:
    """The table a column reference reads, through the queries around it (a correlated
    reference is the outer query's)."""
    node = column.parent
    while node is not None:
        if isinstance(node, QUERIES):
            source = named(sources(node), column.table)
            if source is not None:
                return origin(source, column.name)
        node = node.parent
    return None


def domain(side: exp.Expression, parameters: dict[str, frozenset[str]]) -> tuple[str, frozenset[str]] | None:
    """The status column (or the bind parameter standing for one) a side of a comparison
    is, and its words; None for anything else."""
    if isinstance(side, exp.Placeholder) and side.name in parameters:
        return f":{side.name}", parameters[side.name]
    if isinstance(side, exp.Column) and side.name in COLUMNS:
        table = table_of(side)
        if table is None:
            return side.sql(), frozenset()  # untraceable: reported
        # A column of this name in a table of no known domain is reported too: say its words.
        return f"{table}.{side.name}", DOMAINS.get((table, side.name), frozenset())
    return None


def literals(node: exp.Expression | None) -> list[str]:
    if isinstance(node, exp.Literal) and node.is_string:
        return [node.this]
    if isinstance(node, exp.Tuple | exp.Array):
        return [v for e in node.expressions for v in literals(e)]
    return []


def compared(tree: exp.Expression) -> Iterator[tuple[exp.Expression, list[str]]]:
    """(a side, the literals set against it) for every comparison and assignment."""
    for node in tree.walk():
        if isinstance(node, exp.EQ | exp.NEQ | exp.NullSafeEQ | exp.NullSafeNEQ):
            yield node.this, literals(node.expression)
            yield node.expression, literals(node.this)
        elif isinstance(node, exp.In):
            yield node.this, [v for e in node.expressions for v in literals(e)]
        elif isinstance(node, exp.Case) and node.this is not None:
            yield node.this, [v for case in node.args.get("ifs") or [] for v in literals(case.this)]
        elif isinstance(node, exp.Insert) and isinstance(node.this, exp.Schema):
            target = node.this.this.alias_or_name
            columns = [exp.column(c.name, table=target) for c in node.this.expressions]
            values = node.expression
            rows = values.expressions if isinstance(values, exp.Values) else [values] if isinstance(
                values, exp.Select) else []  # INSERT … VALUES (…), or INSERT … SELECT …
            for row in rows:
                for column, value in zip(columns, row.expressions, strict=False):
                    column.parent = node  # resolved as the statement's own column
                    yield column, literals(value.unalias())


def parameter_domains(tree: exp.Expression) -> dict[str, frozenset[str]]:
    """Bind parameters a status column is set to or compared with: they stand for its words."""
    found: dict[str, frozenset[str]] = {}
    for side, _ in compared(tree):
        pair = side.parent
        if isinstance(pair, exp.EQ) and isinstance(side, exp.Column):
            other = pair.expression if pair.this is side else pair.this
            known = domain(side, {})
            if isinstance(other, exp.Placeholder) and known and known[1]:
                found[other.name] = known[1]
    return found


def status_literals() -> Iterator[tuple[str, str, str, frozenset[str]]]:
    """(statement, column, literal, the column's words) for every status literal in sql/."""
    for name, tree in statements():
        parameters = parameter_domains(tree)
        for side, words in compared(tree):
            if words and (known := domain(side, parameters)) is not None:
                for word in words:
                    yield name, known[0], word, known[1]


FOUND = list(status_literals())


def test_every_status_word_in_sql_is_a_member_of_its_columns_enum():
    strays = sorted({(name, column, word) for name, column, word, words in FOUND if word not in words})
    assert not strays, "status words not in the column's enum (or a column not traced to its table):\n" + \
        "\n".join(f"  {n}: {c} = {w!r}" for n, c, w in strays)


def test_the_scan_sees_the_status_words_of_every_kind_of_statement():
    # Counted over both dialects: the words of the ledger, the sources, the bounces, the
    # jobs and steps, compared, assigned (UPDATE … SET, INSERT … VALUES) and through a
    # bind parameter; read through CTEs, derived tables and correlated subqueries.
    columns = {column for _, column, _, _ in FOUND}
    assert {"dueflow_ledger.status", "invoices.status", "contracts.status", "dueflow_bounces.kind",
            "dueflow_ledger.job", "dueflow_ledger.step", ":outcome", ":status"} <= columns
    seen = {(name.split(" ")[0], column, word) for name, column, word, _ in FOUND}
    for expected in [("bounce_rows.sql", "dueflow_ledger.status", "bounced"),  # SET status = …
                     ("sample_ledger.sql", "dueflow_ledger.status", "adopted"),  # INSERT … VALUES
                     ("resolve_pending.sql", ":outcome", "failed"),  # a parameter set to a status
                     ("extract_contracts.postgresql.sql", "contracts.status", "active"),  # CTE, p.*
                     ("extract_contracts.sqlite.sql", "contracts.status", "cancelled"),  # IS NOT
                     ("withdraw_unsent.sql", "invoices.status", "sent"),  # a fragment's correlated alias
                     ("extract_clients.sql", "invoices.status", "paid")]:  # NOT IN, unqualified
        assert expected in seen, expected
    assert len({(n, c, w) for n, c, w, _ in FOUND}) > 100


@pytest.mark.parametrize(("sql", "stray"), [
    ("UPDATE dueflow_ledger SET status = 'sended' WHERE key = :key", "sended"),
    ("SELECT 1 FROM dueflow_ledger l WHERE l.status IN ('pending', 'falied')", "falied"),
    ("WITH p AS (SELECT c.* FROM contracts c) SELECT 1 FROM p WHERE p.status = 'actve'", "actve"),
    ("UPDATE dueflow_ledger SET status = :outcome WHERE :outcome = 'snet'", "snet"),
])
def test_the_scan_finds_a_word_that_is_not_a_status(sql, stray):
    tree = sqlglot.parse_one(sql, read="postgres")
    parameters = parameter_domains(tree)
    words = [(w, known[1]) for side, ws in compared(tree) if (known := domain(side, parameters)) for w in ws]
    assert (stray, False) in [(w, w in d) for w, d in words]


def test_every_fragment_is_checked_where_a_statement_includes_it():
    included = re.compile(r"/\*(?:include|insert) (\w+)\*/")
    used = {name for path in SQL.rglob("*.sql") for name in included.findall(path.read_text())}
    assert {path.name.split(".")[0] for path in (SQL / "fragments").glob("*.sql")} <= used
