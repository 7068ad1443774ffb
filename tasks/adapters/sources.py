"""Reading the company's own relations (tables or views, in any schema, read-only).

`resolve_sources` finds each source relation, matches dueflow's columns to the relation's
columns or the mapping's expressions, reads the types they have (a `LIMIT 0` probe: no
row is read) and writes one projection per source that reads every value the way dueflow
compares it: ids as text, dates as dates, flags and statuses as text through their value
maps. Every statement that reads source data gets these projections as common table
expressions named `contracts`, `clients` and `invoices` (`ResolvedSources.statement`), so
the extract, the re-checks of the reservation and the retries read a value one way.

Whatever dueflow cannot read — a relation or a column missing, an expression that does
not run, a type it does not know how to read, a permission — is a `SourceProblem` found
here, before anything is written, and becomes one line for the operator.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Engine, literal, text
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from dueflow.sql import statement as plain_statement
from dueflow.tasks.core.casts import null_safe_reading, quoted_name, safe_cast, toml_string
from dueflow.tasks.core.sources import (
    AMOUNT_MINOR,
    BOOLEAN_STATUSES,
    OPTIONAL_SOURCES,
    SOURCE_NAMES,
    SOURCES,
    Expression,
    Kind,
    Origin,
    SourceMapping,
    SourceSpec,
    flag_word,
)

# PostgreSQL types dueflow reads, per kind (pg_type.typname). Text-like types work for
# every kind read as text; a DATE must be a date (the SQL compares and subtracts dates).
_TEXTUAL = frozenset({"text", "varchar", "bpchar", "name", "citext"})
_INTEGERS = frozenset({"int2", "int4", "int8"})
_FLOATS = frozenset({"float4", "float8"})
PG_TYPES: dict[Kind, frozenset[str]] = {
    Kind.ID: _TEXTUAL | _INTEGERS | {"numeric", "uuid"},
    Kind.TEXT: _TEXTUAL,
    Kind.STATUS: _TEXTUAL,
    Kind.LOCALE: _TEXTUAL,
    Kind.AMOUNT: _TEXTUAL | _INTEGERS | _FLOATS | {"numeric"},
    Kind.DATE: frozenset({"date", "timestamp", "timestamptz"}),
    Kind.TIMESTAMP: frozenset({"timestamptz", "timestamp", "date"}) | _TEXTUAL,
    Kind.FLAG: frozenset({"bool"}) | _INTEGERS | _TEXTUAL,
}
_MINOR_TYPES = _INTEGERS | {"numeric"} | _TEXTUAL
_NULL_TYPE = {Kind.DATE: "date", Kind.TIMESTAMP: "timestamptz"}  # typed NULL of an absent column


class SourceError(Exception):
    """A source cannot be read the way the night needs; `problems` says each, one line."""

    def __init__(self, problems: Sequence[SourceProblem]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(p.line() for p in self.problems))


@dataclass(frozen=True)
class SourceProblem:
    source: str
    detail: str
    fix: str

    def line(self) -> str:
        return f"{self.source}: {self.detail} — fix: {self.fix}"


@dataclass(frozen=True)
class ColumnReading:
    """How one dueflow column is read: from where, and the type found there."""

    column: str  # dueflow's name
    origin: str  # `their_column`, `sql: …`, or `(absent: none for every row)`
    type_seen: str  # the database's type name ('' on SQLite, which has none)
    expression: str  # the SQL in the projection (AS column)
    note: str | None = None  # said by `dueflow check` (timestamps without a zone, floats)


@dataclass(frozen=True)
class ResolvedSource:
    name: str  # contracts | clients | invoices
    schema: str | None
    relation: str
    kind: str  # table, view, materialized view, foreign table
    columns: tuple[ColumnReading, ...]
    select: str  # the projection: SELECT … FROM the relation
    text_ids: bool  # every id column is text already: comparisons can use its indexes

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.relation}" if self.schema else self.relation

    def reading(self, column: str) -> ColumnReading:
        return next(c for c in self.columns if c.column == column)


@dataclass(frozen=True)
class ResolvedSources:
    """The sources as found in the database (an optional one absent: `absent_source`):
    small and picklable (a delivery batch may run on a Dask worker and the flow's context
    travels with it)."""

    dialect: str
    sources: Mapping[str, ResolvedSource]
    mapping_origin: str = "dueflow's own names"
    notes: tuple[str, ...] = field(default=())

    @property
    def text_ids(self) -> bool:
        return all(source.text_ids for source in self.sources.values())

    def statement(self, name: str) -> str:
        """sql/<name> with the source projections it reads as its first common table
        expressions (not materialized: the planner sees through them to the relations)."""
        return with_sources(plain_statement(name, self.dialect), self)

    def typed_start(self, start: str) -> bool:
        """Whether the night's candidates are read by sql/dunning_candidates_typed: on
        PostgreSQL, counting from 'sent' or 'due' ('any' reads every step-less invoice
        anyway), with sent_at (which that statement compares either way) and the start's
        own column read as they are from a timestamptz, timestamp or date column. Text
        columns, expressions and value maps keep the text comparison."""
        if self.dialect != "postgresql" or start not in ("sent", "due"):
            return False
        invoices = self.sources["invoices"]
        wanted = {"sent_at": TYPED_STARTS, "due_date": frozenset({"date"}) if start == "due" else None}
        return all(_as_it_is(invoices.reading(column)) and invoices.reading(column).type_seen in types
                   for column, types in wanted.items() if types)

    def candidates_statement(self, start: str) -> str:
        """The statement that reads the night's dunning candidates (typed_start)."""
        return self.statement("dunning_candidates_typed" if self.typed_start(start) else "dunning_candidates")


# Start columns whose values a bound compares as they are, by an index (typed_start).
TYPED_STARTS = frozenset({"timestamptz", "timestamp", "date"})


def _as_it_is(reading: ColumnReading) -> bool:
    """The projection reads a column of the relation itself: no expression, cast or value map."""
    return not reading.origin.startswith(("sql:", "(")) and reading.expression.strip('"') == reading.origin


_COMMENT = re.compile(r"--[^\n]*")
_LITERAL = re.compile(r"'(?:[^']|'')*'")
_SOURCE_WORD = re.compile(r"\b(" + "|".join(SOURCE_NAMES) + r")\b")
_LEADING_WITH = re.compile(r"\A\s*WITH\s", re.IGNORECASE)


def sources_read(sql: str) -> list[str]:
    """The source relations a statement names (comments and string literals aside)."""
    bare = _LITERAL.sub("''", _COMMENT.sub("", sql))
    named = set(_SOURCE_WORD.findall(bare))
    return [name for name in SOURCE_NAMES if name in named]


def with_sources(sql: str, sources: ResolvedSources) -> str:
    used = sources_read(sql)
    if not used:
        return sql
    ctes = ",\n".join(f"{name} AS NOT MATERIALIZED ({sources.sources[name].select})" for name in used)
    body = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--")).strip()
    if _LEADING_WITH.match(body):
        return _LEADING_WITH.sub(lambda m: f"WITH {ctes},\n", body, count=1)
    return f"WITH {ctes}\n{body}"


# --------------------------------------------------------------------------- resolving


def _dialect(engine_or_conn: Engine | Connection) -> str:
    return "postgresql" if engine_or_conn.dialect.name == "postgresql" else "sqlite"


def _reason(exc: BaseException) -> str:
    message = str(getattr(exc, "orig", None) or exc).strip()
    return (message.splitlines()[0] if message else type(exc).__name__)[:300]


def _find(
    conn: Connection, dialect: str, spec: SourceSpec, schema: str | None, mapped: bool, own_file: bool
) -> tuple[str | None, str, str] | SourceProblem:
    rows = conn.execute(
        text(plain_statement("find_relation", dialect)), {"name": spec.relation, "schema": schema}
    ).all()
    where = f"schema {schema}" if schema else "the search path" if dialect == "postgresql" else "the database"
    if not rows:
        if mapped:  # the mapping file names it: its word is what is wrong
            fix = (f"point the mapping file's [{spec.name}] relation (and schema) at your {spec.name} table"
                   " or view")
        elif own_file:  # a mapping file, silent on this source: no sample tables for this user
            fix = f'map it in the mapping file: [{spec.name}] relation = "your_table" (docs/your-data.md)'
        else:
            fix = (f"point DUEFLOW_SOURCE_SCHEMA at the schema of your {spec.name} table or view, or map your"
                   " own (DUEFLOW_SOURCES_FILE; `dueflow sources init` drafts one from your tables); for"
                   " sample tables: `dueflow init-db --with-sample-tables`")
        return SourceProblem(spec.name, f"no table or view {spec.relation} in {where}", fix)
    exact = [row for row in rows if row.exact] or rows
    row = exact[0]
    schemas = list(dict.fromkeys(r.schema for r in exact))
    if len(schemas) > 1 and row.kind == "table":
        # A view put before the tables it maps is what a search path is for; two tables of
        # one name are ambiguous (empty copies an earlier dueflow's init-db made in the first
        # schema were read every night, and nothing was sent): dueflow does not guess.
        return SourceProblem(
            spec.name,
            f"{spec.relation} exists in schemas {' and '.join(schemas)} of the search path",
            f"set DUEFLOW_SOURCE_SCHEMA (or `schema` in the mapping file) to the schema that holds"
            f" your data ({' or '.join(schemas)}): dueflow does not guess",
        )
    return row.schema, row.relation, row.kind


def _columns_of(conn: Connection, qualified: str) -> list[str]:
    result = conn.exec_driver_sql(f"SELECT * FROM {qualified} WHERE 1 = 0")
    names = [d[0] for d in result.cursor.description]
    result.close()
    return names


def _pick_column(wanted: str, have: Sequence[str]) -> str | None:
    if wanted in have:
        return wanted
    folded = [c for c in have if c.lower() == wanted.lower()]
    return folded[0] if len(folded) == 1 else None


def _escape_binds(sql: str) -> str:
    # SQLAlchemy's text() reads `:name` as a parameter; a colon of the operator's
    # expression (outside `::` casts) is theirs.
    return re.sub(r"(?<![:\\]):(?!:)", r"\\:", sql)


def _probe_types(
    conn: Connection, dialect: str, qualified: str, expressions: Mapping[str, str]
) -> dict[str, str]:
    """The database type of each expression, from a LIMIT 0 query (PostgreSQL; SQLite has
    no column types: '')."""
    columns = ", ".join(
        f"{expr} AS {conn.dialect.identifier_preparer.quote_identifier(name)}"
        for name, expr in expressions.items()
    )
    result = conn.execute(text(f"SELECT {columns} FROM {qualified} LIMIT 0"))
    codes: list[Any] = [d[1] for d in result.cursor.description]  # PostgreSQL: type OIDs
    result.close()
    if dialect != "postgresql":
        return dict.fromkeys(expressions, "")
    oids = "{" + ",".join(str(int(c)) for c in codes) + "}"
    found = conn.execute(text(plain_statement("type_names", "postgresql")), {"oids": oids}).all()
    names: dict[Any, str] = dict(found)  # type OID -> type name
    return {name: names.get(code, str(code)) for name, code in zip(expressions, codes, strict=True)}


def _literal(conn: Connection, value: str) -> str:
    return str(literal(value).compile(dialect=conn.dialect, compile_kwargs={"literal_binds": True}))


def _value_map(conn: Connection, expr: str, values: Mapping[str, str] | None, raw: str = "",
               type_seen: str = "") -> str:
    """`expr` (the value's text) through a value map, theirs = ours; a value not in it is
    kept. A key that says true or false (true, 1, yes; false, 0, no) also matches what a
    boolean is where it is one: PostgreSQL's boolean, an integer 1 or 0 (SQLite keeps
    booleans so, `raw`'s own storage class says when). Text matches only as written."""
    if not values:
        return expr
    dialect = _dialect(conn)
    cases = []
    for theirs, ours in values.items():
        matches = [f"{expr} = {_literal(conn, theirs)}"]
        flag = flag_word(theirs)
        if flag and type_seen == "bool":
            matches = [f"{expr} = {_literal(conn, flag)}"]
        elif flag and type_seen in _INTEGERS:
            matches.append(f"{expr} = {_literal(conn, '1' if flag == 'true' else '0')}")
        elif flag and dialect == "sqlite" and raw:
            matches.append(f"(typeof({raw}) = 'integer' AND {raw} = {1 if flag == 'true' else 0})")
        cases.append(f"WHEN {' OR '.join(matches)} THEN {_literal(conn, ours)}")
    return f"CASE {' '.join(cases)} ELSE {expr} END"


def _reading(
    conn: Connection,
    dialect: str,
    spec: SourceSpec,
    column: str,
    kind: Kind,
    raw: str,
    type_seen: str,
    timezone: str,
) -> str | SourceProblem:
    """The projection's expression for one column of a known type, or why it cannot be read."""
    values = spec.values.get(column)
    if values:  # a column with a value map is read as the text of its value, whatever its type
        return _value_map(conn, id_text(raw, dialect, type_seen), values, raw, type_seen)
    if dialect == "sqlite":
        # Dates and timestamps are text there, read by date() and the decide functions;
        # amounts keep their own type so a floating point keeps its shortest repr.
        if kind in (Kind.DATE, Kind.TIMESTAMP, Kind.AMOUNT):
            return raw
        if kind == Kind.ID:
            return id_text(raw, dialect, type_seen)
        return f"CAST({raw} AS TEXT)"
    allowed = _MINOR_TYPES if column == AMOUNT_MINOR else PG_TYPES[kind]
    if type_seen not in allowed:
        return _type_problem(spec, column, kind, type_seen)
    if kind == Kind.DATE:
        if type_seen == "timestamptz":
            return f"CAST(timezone({_literal(conn, timezone)}, {raw}) AS date)"
        return raw if type_seen == "date" else f"CAST({raw} AS date)"
    if kind == Kind.TIMESTAMP:
        return raw  # read as text: an offset when it has a zone, the business zone when not
    if kind == Kind.ID:
        return id_text(raw, dialect, type_seen)
    return f"CAST({raw} AS text)"


_WANTS = {
    Kind.DATE: "a date (or a timestamp)",
    Kind.ID: "text, an integer, numeric or uuid",
    Kind.AMOUNT: "numeric, an integer, floating point or text",
    Kind.TIMESTAMP: "a timestamp (with or without time zone) or a date",
    Kind.FLAG: "boolean, an integer or text",
}


def _type_problem(spec: SourceSpec, column: str, kind: Kind, type_seen: str) -> SourceProblem:
    """A column of a type dueflow does not read as `kind`, and the right way to read it: a
    value map for a boolean status, else the mapping's expression that reads it NULL-safe
    (a value it cannot read quarantines its row; every other row goes)."""
    detail = f"{column} is {type_seen} in {spec.relation}; dueflow reads {_WANTS.get(kind, 'text')}"
    origin = spec.origin(column)
    if isinstance(origin, Expression):
        return SourceProblem(spec.name, detail, f"make the mapping's expression for {column} give that type")
    guess = BOOLEAN_STATUSES.get((spec.name, column))
    if type_seen == "bool":
        pairs = ", ".join(f"{theirs} = {toml_string(ours)}" for theirs, ours in (guess or {}).items())
        choices = ", ".join(SOURCES[spec.name][column].vocabulary)
        return SourceProblem(spec.name, detail, f"map its values in the mapping file: [{spec.name}.values]"
                             f" {column} = {{ {pairs or 'true = …, false = …'} }} (each one of {choices})")
    reading = null_safe_reading(quoted_name(origin), kind, type_seen)
    if reading is None:
        return SourceProblem(spec.name, detail, f"give {column} that type in a view, or read it with an"
                             " expression in the mapping file that gives NULL for a value it cannot read")
    return SourceProblem(spec.name, detail, f"read it in the mapping file as [{spec.name}.columns] {column} ="
                         f" {{ sql = {toml_string(reading)} }} (NULL for a value it cannot read: that row is"
                         " quarantined with the reason, every other row goes)")


def id_text(raw: str, dialect: str, type_seen: str) -> str:
    """The SQL that reads an id as the text of its value, the same whatever type holds it
    (docs/design.md, Keys): an integral number is its integer text — numeric 42.00, a
    SQLite REAL 42.0 and an integer 42 are all `42` —, another number its shortest decimal
    (trim_scale: 42.50 is `42.5`), a uuid its lowercase form (PostgreSQL's own text), text
    as written. So a view recreated with another numeric type for its ids keeps every key."""
    if dialect == "sqlite":  # a value's own storage class decides, not the column's
        return (f"CASE WHEN typeof({raw}) = 'real' AND {raw} = CAST({raw} AS INTEGER)"
                f" THEN CAST(CAST({raw} AS INTEGER) AS TEXT) ELSE CAST({raw} AS TEXT) END")
    if type_seen == "numeric":
        return f"CAST(trim_scale({raw}) AS text)"
    return f"CAST({raw} AS text)"


def _note(source: str, column: str, kind: Kind, type_seen: str, timezone: str) -> str | None:
    if kind == Kind.TIMESTAMP and type_seen in ("timestamp", "date"):
        return (
            f"{source}.{column} is {'a date' if type_seen == 'date' else 'a timestamp without time zone'}:"
            f" read in the business time zone {timezone}"
        )
    if kind == Kind.AMOUNT and type_seen in _FLOATS:
        return (
            f"{source}.{column} is floating point ({type_seen}): amounts are read through their"
            " shortest decimal form; a numeric column keeps every digit"
        )
    return None


def _origin_text(origin: Origin | None) -> str:
    if origin is None:
        return "(absent: none for every row)"
    return f"sql: {origin.sql}" if isinstance(origin, Expression) else origin


def _resolve_one(
    conn: Connection, dialect: str, spec: SourceSpec, source_schema: str | None, timezone: str, mapped: bool,
    own_file: bool = False,
) -> ResolvedSource | list[SourceProblem]:
    found = _find(conn, dialect, spec, spec.schema or source_schema, mapped, own_file)
    if isinstance(found, SourceProblem) and spec.name in OPTIONAL_SOURCES and not mapped:
        return absent_source(spec.name, dialect)
    if isinstance(found, SourceProblem):
        return [found]
    schema, relation, kind = found
    quote = conn.dialect.identifier_preparer.quote_identifier
    # Always qualified: the projection is named like the relation it reads (`contracts`),
    # and a qualified name is never the common table expression itself.
    qualified = f"{quote(schema or 'main')}.{quote(relation)}"
    try:
        have = _columns_of(conn, qualified)
    except DBAPIError as exc:
        return [
            SourceProblem(
                spec.name, f"cannot read {relation}: {_reason(exc)}", "grant this database user SELECT on it"
            )
        ]
    problems: list[SourceProblem] = []
    missing: list[str] = []
    raw: dict[str, str] = {}  # dueflow column -> SQL of its origin
    origins: dict[str, Origin | None] = {}
    wanted = dict(SOURCES[spec.name])
    minor = AMOUNT_MINOR in spec.columns or (
        "amount" in wanted
        and "amount" not in spec.columns
        and _pick_column("amount", have) is None
        and _pick_column(AMOUNT_MINOR, have) is not None
    )
    for column, info in wanted.items():
        name = AMOUNT_MINOR if column == "amount" and minor else column
        origin = spec.columns.get(name, name)
        if isinstance(origin, Expression):
            raw[name], origins[name] = f"({_escape_binds(origin.sql)})", origin
            continue
        picked = _pick_column(origin, have)
        if picked is not None:
            raw[name], origins[name] = quote(picked), picked
        elif name in spec.columns:
            problems.append(
                SourceProblem(
                    spec.name,
                    f"the mapping ({spec.name}.{name} = {origin!r})"
                    f" names a column {relation} does not have (it has:"
                    f" {', '.join(have[:30])})",
                    "correct the mapping file",
                )
            )
        elif info.required:
            missing.append(name)
        else:
            origins[name] = None
    if missing:
        problems.append(
            SourceProblem(
                spec.name,
                f"{relation} has no column(s) {', '.join(missing)}",
                f'map each: [{spec.name}.columns] {missing[0]} = "your_column" (or'
                f' {{ sql = "an expression" }}) in DUEFLOW_SOURCES_FILE, or give them these names in a'
                " view (docs/your-data.md)",
            )
        )
    if problems:
        return problems
    try:
        types = _probe_types(conn, dialect, qualified, raw)
    except DBAPIError as exc:
        expressions = [n for n, o in origins.items() if isinstance(o, Expression)]
        culprit = f" (an expression of the mapping: {', '.join(expressions)})" if expressions else ""
        return [
            SourceProblem(
                spec.name,
                f"reading {relation} fails{culprit}: {_reason(exc)}",
                "correct the mapping file's expression, or grant SELECT on the relation",
            )
        ]
    readings: list[ColumnReading] = []
    for name, column_origin in origins.items():
        kind_ = Kind.AMOUNT if name == AMOUNT_MINOR else wanted[name].kind
        if column_origin is None:
            null = "NULL" if dialect == "sqlite" else f"CAST(NULL AS {_NULL_TYPE.get(kind_, 'text')})"
            readings.append(ColumnReading(name, _origin_text(None), "", null))
            continue
        expr = _reading(conn, dialect, spec, name, kind_, raw[name], types[name], timezone)
        if isinstance(expr, SourceProblem):
            problems.append(expr)
            continue
        readings.append(
            ColumnReading(
                name,
                _origin_text(column_origin),
                types[name],
                expr,
                _note(spec.name, name, kind_, types[name], timezone),
            )
        )
    if problems:
        return problems
    if "amount" in wanted:  # one of amount and amount_minor; the other is NULL
        other = "amount" if minor else AMOUNT_MINOR
        readings.append(
            ColumnReading(
                other,
                "(from amount_minor and currency)" if minor else "(not used)",
                "",
                "NULL" if dialect == "sqlite" else "CAST(NULL AS text)",
            )
        )
    select = (
        "SELECT " + ", ".join(f"{r.expression} AS {quote(r.column)}" for r in readings) + f" FROM {qualified}"
    )
    ids = [r for r in readings if wanted.get(r.column) and wanted[r.column].kind == Kind.ID]
    text_ids = dialect != "postgresql" or all(r.type_seen in _TEXTUAL for r in ids)
    return ResolvedSource(spec.name, schema, relation, kind, tuple(readings), select, text_ids)


ABSENT = "absent"  # a ResolvedSource's kind when an optional source is not there


def absent_source(name: str, dialect: str) -> ResolvedSource:
    """An optional source the database does not have (payments): a relation of no rows, so
    that the statements that read it need no second form."""
    readings = []
    for column, info in SOURCES[name].items():
        sql_type = "date" if info.kind == Kind.DATE else "text"
        null = "NULL" if dialect == "sqlite" else f"CAST(NULL AS {sql_type})"
        readings.append(ColumnReading(column, _origin_text(None), "", null))
    select = "SELECT " + ", ".join(f"{r.expression} AS {r.column}" for r in readings) + " WHERE 1 = 0"
    return ResolvedSource(name, None, f"(no {name})", ABSENT, tuple(readings), select, True)


def resolve_sources(
    engine: Engine, mapping: SourceMapping, source_schema: str | None = None, timezone: str = "UTC"
) -> ResolvedSources:
    """The three sources found and checked (no row read); SourceError lists every problem."""
    dialect = _dialect(engine)
    if dialect == "sqlite" and (source_schema or any(s.schema for s in mapping.specs.values())):
        raise SourceError(
            [
                SourceProblem(
                    "sources",
                    "SQLite has no schemas",
                    "leave DUEFLOW_SOURCE_SCHEMA and the mapping's `schema` unset",
                )
            ]
        )
    resolved: dict[str, ResolvedSource] = {}
    problems: list[SourceProblem] = []
    try:
        with engine.connect() as conn:
            for name in SOURCE_NAMES:
                if dialect == "postgresql":  # probes read (value maps run the expressions): never write
                    conn.exec_driver_sql("SET TRANSACTION READ ONLY")
                outcome = _resolve_one(
                    conn, dialect, mapping.spec(name), source_schema, timezone, name in mapping.specs,
                    mapping.given,
                )
                if isinstance(outcome, list):
                    problems += outcome
                else:
                    resolved[name] = outcome
                conn.rollback()  # a failed probe ends PostgreSQL's transaction; each source its own
    except SQLAlchemyError as exc:
        if isinstance(exc, DBAPIError) and exc.connection_invalidated:
            raise
        raise SourceError(
            [
                SourceProblem(
                    "sources",
                    f"cannot look at the sources: {_reason(exc)}",
                    "check DUEFLOW_DATABASE_URL and the user's rights",
                )
            ]
        ) from None
    if problems:
        raise SourceError(problems)
    notes = tuple(c.note for s in resolved.values() for c in s.columns if c.note)
    return ResolvedSources(dialect, resolved, mapping.origin, notes)


# --------------------------------------------------------------------------- checks


# The statements a night runs on source data; every one is planned (EXPLAIN) before the
# first write, so a shape the SQL cannot read is one line at start-up, not at the third step.
NIGHT_STATEMENTS = (
    "extract_contracts",
    "extract_invoices",
    "extract_clients",
    "dunning_history",
    "dunning_candidates",
    "dunning_candidates_typed",
    "dunning_history_of",
    "client_payment_history_of",
    "contracts_by_id",
    "invoices_by_id",
    "clients_by_id",
    "reserve_dunning",
    "retry_candidates",
    "withdraw_unsent",
)


# A value of the right type for each parameter of NIGHT_STATEMENTS (EXPLAIN needs one to
# plan with); a statement with a parameter not named here fails its test loudly.
_SAMPLE_VALUES: dict[str, Any] = {
    "as_of": "2000-01-01",
    "window_start": "2000-01-01",
    "window_end": "2000-01-01",
    "now": "2000-01-01 00:00:00+00:00",
    "leads": "[15]",
    "pairs": "[]",
    "max_attempts": 1,
    "flow_run_id": None,
    "status": "pending",
    "start": "sent",
    "start_by": "2000-01-01",
    "start_by_text": "2000-01-01",
    "after_first_by": "2000-01-01",
    "after_second_by": "2000-01-01",
    "hold_as_of": "2000-01-01",
}
_ARRAYS = ("keys", "subject_ids", "subject_forms", "cycles", "steps", "step_ranks", "recipients",
           "previous_by", "payment_states", "ids")


def _sample(name: str, dialect: str) -> Any:
    if name in _ARRAYS:
        return "{}" if dialect == "postgresql" else "[]"
    return _SAMPLE_VALUES[name]


def explain_night(
    engine: Engine, sources: ResolvedSources, names: Iterable[str] = NIGHT_STATEMENTS
) -> list[SourceProblem]:
    """Plan every statement a night runs on the sources (nothing executed, nothing written):
    what the database refuses to plan is a problem to say before the night starts."""
    problems = []
    with engine.connect() as conn:
        for name in names:
            if sources.dialect == "sqlite":  # what the reservation reads its candidates from
                conn.execute(text(plain_statement("candidates_table", "sqlite")))
            if name == "dunning_candidates_typed" and not sources.typed_start("sent"):
                continue  # the night reads by it only where sent_at is typed
            sql = sources.statement(name)
            clause = text(sql)
            params = {key: _sample(key, sources.dialect) for key in clause.compile().params}
            prefix = "EXPLAIN " if sources.dialect == "postgresql" else "EXPLAIN QUERY PLAN "
            try:
                conn.execute(text(prefix + sql), params).all()
            except DBAPIError as exc:
                conn.rollback()
                problems.append(
                    SourceProblem(
                        f"query {name}",
                        f"cannot run on the sources as mapped: {_reason(exc)}",
                        "check the mapping's expressions and types (`dueflow check --sources`)",
                    )
                )
        conn.rollback()
    return problems


def failing_expressions(engine: Engine, sources: ResolvedSources) -> list[SourceProblem]:
    """The mapping's expressions that fail on a value of their relation (a CAST of a text
    that is not a number, a date that does not exist): each evaluated over every row, in a
    read-only transaction of its own — only after a read of the night failed, to say which
    expression did and how to make it safe. The database does not say which row."""
    problems = []
    with engine.connect() as conn:
        for source in sources.sources.values():
            if source.kind == ABSENT:
                continue
            qualified = ".".join(conn.dialect.identifier_preparer.quote_identifier(part)
                                 for part in (source.schema or "main", source.relation))
            for reading in source.columns:
                if not reading.origin.startswith("sql:"):
                    continue
                try:
                    if sources.dialect == "postgresql":
                        conn.exec_driver_sql("SET TRANSACTION READ ONLY")
                    conn.execute(text(f"SELECT count({reading.expression}) FROM {qualified}")).all()
                except DBAPIError as exc:
                    safe = safe_cast(reading.origin.removeprefix("sql: "))
                    how = (f"read it as {source.name}.{reading.column} = {{ sql = {toml_string(safe)} }}"
                           if safe else "make the expression give NULL for a value it cannot read (CASE WHEN"
                           " … ~ '…' THEN CAST(… AS …) END), or map the column itself where dueflow reads its"
                           " type")
                    problems.append(SourceProblem(
                        source.name, f"the mapping's {reading.column} ({reading.origin}) fails on a value of"
                        f" {source.relation}: {_reason(exc)}",
                        f"{how}: a row whose {reading.column} cannot be read is then quarantined with the"
                        " reason, and every other row goes"))
                conn.rollback()
    return problems


# --------------------------------------------------------------------------- indexes


@dataclass(frozen=True)
class IndexAdvice:
    source: str
    purpose: str  # what the night does with it
    statement: str | None  # CREATE INDEX … to run (None: the source has one)
    note: str = ""


# What the night looks up in each source, by dueflow column, and the rows it filters.
_LOOKUPS: dict[str, tuple[tuple[str, str], ...]] = {
    "contracts": (
        ("renewal_date", "the renewal window of each night"),
        ("id", "re-checks and duplicated ids, by id"),
    ),
    "invoices": (("id", "re-checks of the reservation and retries, by id"),
                 ("client_id", "the payment history of tonight's reminders' clients, by client")),
    "clients": (("id", "the clients of open invoices, by id"),),
    "payments": (("invoice_id", "the payments of tonight's invoices, summed per invoice"),),
}
# Lookups served by a partial index: (source, column of the predicate, indexed column,
# purpose). sql/dunning_candidates reads the open invoices (paid_at IS NULL) and no others.
_PARTIAL_LOOKUPS = (
    ("invoices", "paid_at", "status", "the open invoices of each night (dunning candidates)"),
)
_BARE = re.compile(r'["()\s]')


def _normalised(expression: str) -> str:
    return _BARE.sub("", expression).lower()


def index_advice(engine: Engine, sources: ResolvedSources, start: str = "sent") -> list[IndexAdvice]:
    """For each lookup a night makes in a source, whether an index serves it, and the
    statement that creates one when none does. dueflow creates indexes only on its own
    tables: these are for the source's owner to run (PostgreSQL tables; a view's base
    tables are the owner's to index). `start`: what the night's dunning counts from (the
    candidates' range on its column, where typed: ResolvedSources.typed_start)."""
    if sources.dialect != "postgresql":
        return []
    advice: list[IndexAdvice] = []
    with engine.connect() as conn:
        quote = conn.dialect.identifier_preparer.quote_identifier
        for name, lookups in _LOOKUPS.items():
            source = sources.sources[name]
            if source.kind == ABSENT:
                continue
            qualified = (
                f"{quote(source.schema)}.{quote(source.relation)}"
                if source.schema
                else quote(source.relation)
            )
            if source.kind != "table":
                advice.append(
                    IndexAdvice(
                        name,
                        "every lookup",
                        None,
                        f"{source.qualified} is a {source.kind}:"
                        " index its base tables on the columns behind "
                        + ", ".join(column for column, _ in lookups),
                    )
                )
                continue
            existing = (
                conn.execute(
                    text(
                        "SELECT pg_get_indexdef(indexrelid) FROM pg_catalog.pg_index"
                        " WHERE indrelid = CAST(:rel AS regclass)"
                    ),
                    {"rel": qualified},
                )
                .scalars()
                .all()
            )
            keys = {
                _normalised(re.sub(r"^.*? USING \w+ \((.*)\)(?: WHERE .*)?$", r"\1", d)).split(",")[0]
                for d in existing
            }
            for column, purpose in lookups:
                reading = source.reading(column)
                if reading.origin.startswith(("sql:", "(")):
                    advice.append(
                        IndexAdvice(
                            name,
                            purpose,
                            None,
                            f"{column} is an expression: an index on ({reading.expression}) would serve it",
                        )
                    )
                    continue
                wanted = reading.expression if reading.expression != quote(reading.origin) else reading.origin
                plain = reading.type_seen in _TEXTUAL or (
                    column == "renewal_date" and reading.type_seen == "date"
                )
                expected = _normalised(
                    reading.origin
                    if plain
                    else f"trim_scale({reading.origin})::text" if reading.type_seen == "numeric"
                    and column != "renewal_date"
                    else f"{reading.origin}::{'date' if column == 'renewal_date' else 'text'}"
                )
                if expected in keys:
                    advice.append(IndexAdvice(name, purpose, None))
                    continue
                key = f"({quote(reading.origin)})" if plain else f"(({wanted}))"
                advice.append(IndexAdvice(name, purpose, f"CREATE INDEX ON {qualified} {key};"))
            advice += _partial_advice(name, source, qualified, existing, quote)
            if name == "invoices" and sources.typed_start(start):
                advice.append(_start_advice(source, qualified, existing, quote, start))
    return advice


def _leading_key(definition: str) -> str:
    """An index definition's (pg_get_indexdef) first key, its predicate aside."""
    keys = re.sub(r"^.*? USING \w+ \((.*)\)$", r"\1", definition.partition(" WHERE ")[0])
    return _normalised(keys).split(",")[0]


def _start_advice(source: Any, qualified: str, existing: Sequence[str], quote: Callable[[str], str],
                  start: str) -> IndexAdvice:
    """The index on the start column that serves sql/dunning_candidates_typed's range over
    the step-less open invoices: one that starts with the column, over every row or only the
    open ones (`paid_at IS NULL`, as the statement says it; an index on other rows cannot)."""
    column = source.reading("sent_at" if start == "sent" else "due_date").origin
    paid = source.reading("paid_at")
    purpose = f"the dunning candidates without a step, by {column}"
    null = _normalised(f"{paid.origin} IS NULL")
    served = any(_leading_key(d) == _normalised(column) and (
        " WHERE " not in d or _normalised(d.partition(" WHERE ")[2]) == null) for d in existing)
    if served:
        return IndexAdvice("invoices", purpose, None)
    where = "" if paid.origin.startswith(("sql:", "(")) else f" WHERE {quote(paid.origin)} IS NULL"
    return IndexAdvice("invoices", purpose, f"CREATE INDEX ON {qualified} ({quote(column)}){where};")


def _partial_advice(name: str, source: Any, qualified: str, existing: Sequence[str],
                    quote: Callable[[str], str]) -> list[IndexAdvice]:
    """Advice on the partial indexes of _PARTIAL_LOOKUPS: an index whose predicate is
    `column IS NULL`, or that starts with the column, serves the lookup."""
    advice = []
    for source_name, column, indexed, purpose in _PARTIAL_LOOKUPS:
        if source_name != name:
            continue
        predicate, key = source.reading(column), source.reading(indexed)
        if predicate.origin.startswith(("sql:", "(")) or key.origin.startswith(("sql:", "(")):
            advice.append(IndexAdvice(name, purpose, None, f"{column} or {indexed} is an expression:"
                                      f" an index on ({key.expression}) WHERE {predicate.expression} IS NULL"
                                      " would serve it"))
            continue
        null = _normalised(f"{predicate.origin} IS NULL")
        served = any(null in _normalised(d.partition(" WHERE ")[2]) or _normalised(
            re.sub(r"^.*? USING \w+ \((.*)\)(?: WHERE .*)?$", r"\1", d)).split(",")[0] == _normalised(
            predicate.origin) for d in existing)
        advice.append(IndexAdvice(name, purpose, None if served else (
            f"CREATE INDEX ON {qualified} ({quote(key.origin)}) WHERE {quote(predicate.origin)} IS NULL;")))
    return advice
