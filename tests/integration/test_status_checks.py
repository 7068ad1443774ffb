"""The status words the migrations let the ledger hold (its CHECK constraints, as each
database keeps them after every migration) are the enums' (tasks/core/statuses.py,
tasks/core/bounces.py): a status added or renamed in Python and not in a migration — or the
other way round — fails here. tests/unit/test_sql_statuses.py holds the statements to the
same enums."""

from __future__ import annotations

import sqlglot
from sqlalchemy import text
from sqlglot import exp

from dueflow.tasks.adapters import db
from dueflow.tasks.core.bounces import BounceKind
from dueflow.tasks.core.statuses import LedgerStatus


def checked_words(checks: list[exp.Expression]) -> dict[str, set[str]]:
    """Per column, the words of each CHECK that names one column and lists words."""
    found: dict[str, set[str]] = {}
    for check in checks:
        columns = {c.name for c in check.find_all(exp.Column)}
        words = {w.this for w in check.find_all(exp.Literal) if w.is_string}
        if words and len(columns) == 1:
            found.setdefault(columns.pop(), set()).update(words)
    return found


def check_constraints(url: str) -> dict[tuple[str, str], set[str]]:
    engine = db.engine_for(url)
    found: dict[tuple[str, str], set[str]] = {}
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            tables = conn.execute(text("SELECT name, sql FROM sqlite_master WHERE type = 'table'"
                                       " AND name LIKE 'dueflow%'")).all()
            for table, create in tables:  # CREATE TABLE … status text … CHECK (status IN (…))
                checks = list(sqlglot.parse_one(create, read="sqlite").find_all(exp.CheckColumnConstraint,
                                                                                exp.Check))
                for column, words in checked_words(checks).items():
                    found[(table, column)] = words
        else:
            checks = conn.execute(text(
                "SELECT cl.relname, pg_get_constraintdef(c.oid) FROM pg_constraint c"
                " JOIN pg_class cl ON cl.oid = c.conrelid WHERE c.contype = 'c'"
                " AND cl.relnamespace = current_schema()::regnamespace AND cl.relname LIKE 'dueflow%'")).all()
            for table, definition in checks:  # CHECK ((status = ANY (ARRAY['pending'::text, …])))
                condition = sqlglot.parse_one("SELECT 1 WHERE " + definition.removeprefix("CHECK "),
                                              read="postgres").args["where"]
                for column, words in checked_words([condition]).items():
                    found.setdefault((table, column), set()).update(words)
    return found


def test_the_ledgers_checks_allow_exactly_the_enums_words(db_url):
    checks = check_constraints(db_url)
    assert checks[("dueflow_ledger", "status")] == set(LedgerStatus)
    assert checks[("dueflow_bounces", "kind")] == set(BounceKind)
