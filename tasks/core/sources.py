"""Source relations (docs/design.md, "Source relations"): the columns each job reads from
the company's own tables or views, what kind of value each holds, and the mapping that
says where each comes from when the company's names are not dueflow's.

Pure: the mapping file's text is parsed here (`parse_mapping`); finding the relations,
reading their column types and writing the SQL that reads them are the adapter's
(`tasks/adapters/sources.py`). Every query dueflow runs on source data reads it through
that one projection, so a value cannot be read one way by the extract and another way by a
re-check.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from dueflow.tasks.core.locales import SUPPORTED_LOCALES
from dueflow.tasks.core.statuses import CONTRACT_STATUSES, INVOICE_STATUSES


class Kind(StrEnum):
    """What a source column holds, which decides how it is read."""

    ID = "id"  # any type a key can carry (text, integer, bigint, uuid, numeric): read as text
    TEXT = "text"
    AMOUNT = "amount"  # numeric, text, integer minor units (amount_minor) or floating point
    DATE = "date"
    TIMESTAMP = "timestamp"  # with a time zone, without one (read in the business zone), or a date
    FLAG = "flag"  # boolean, integer 0/1, or text mapped to true/false
    STATUS = "status"  # a closed vocabulary, mapped when the company spells it otherwise
    LOCALE = "locale"


@dataclass(frozen=True)
class SourceColumn:
    name: str
    kind: Kind
    required: bool = True
    vocabulary: tuple[str, ...] = ()  # what a value map may map to (statuses, locales)


def _columns(*columns: SourceColumn) -> dict[str, SourceColumn]:
    return {column.name: column for column in columns}


# The public contract: the columns of each source relation (docs/design.md, docs/your-data.md).
SOURCES: dict[str, dict[str, SourceColumn]] = {
    "contracts": _columns(
        SourceColumn("id", Kind.ID),
        SourceColumn("vendor", Kind.TEXT),
        SourceColumn("title", Kind.TEXT),
        SourceColumn("amount", Kind.AMOUNT),
        SourceColumn("currency", Kind.TEXT),
        SourceColumn("renewal_date", Kind.DATE),
        SourceColumn("notify_email", Kind.TEXT),
        SourceColumn("status", Kind.STATUS, vocabulary=CONTRACT_STATUSES),
    ),
    "clients": _columns(
        SourceColumn("id", Kind.ID),
        SourceColumn("name", Kind.TEXT),
        SourceColumn("email", Kind.TEXT),
        SourceColumn("locale", Kind.LOCALE, vocabulary=SUPPORTED_LOCALES),
        SourceColumn("notes", Kind.TEXT, required=False),  # only the model reads it (docs/llm.md)
        SourceColumn("dunning_paused", Kind.FLAG, vocabulary=("true", "false")),
        SourceColumn("dunning_paused_until", Kind.DATE, required=False),
        SourceColumn("cc_email", Kind.TEXT, required=False),
        SourceColumn("dunning_profile", Kind.TEXT, required=False),
    ),
    "invoices": _columns(
        SourceColumn("id", Kind.ID),
        SourceColumn("client_id", Kind.ID),
        SourceColumn("number", Kind.TEXT),
        SourceColumn("amount", Kind.AMOUNT),
        SourceColumn("currency", Kind.TEXT),
        SourceColumn("status", Kind.STATUS, vocabulary=INVOICE_STATUSES),
        SourceColumn("sent_at", Kind.TIMESTAMP),
        SourceColumn("due_date", Kind.DATE),
        SourceColumn("paid_at", Kind.TIMESTAMP),
        SourceColumn("dunning_hold_until", Kind.DATE, required=False),
        SourceColumn("pdf_path", Kind.TEXT, required=False),
        # What the client still owes, where the company keeps it on the invoice: the open
        # amount itself, or what was paid (subtracted). At most one; or a payments relation.
        SourceColumn("amount_open", Kind.AMOUNT, required=False),
        SourceColumn("amount_paid", Kind.AMOUNT, required=False),
    ),
    # Optional: the payments received and credit notes (a negative amount) per invoice,
    # summed per invoice by the database in the night's read of the invoices; a database
    # without it (and a mapping silent on it) has none.
    "payments": _columns(
        SourceColumn("invoice_id", Kind.ID),
        SourceColumn("amount", Kind.AMOUNT),
        SourceColumn("currency", Kind.TEXT),
        SourceColumn("received_at", Kind.DATE),
    ),
}
# Sources a database may lack: read as an empty relation unless found or mapped.
OPTIONAL_SOURCES = frozenset({"payments"})
# What a boolean column read as a status most likely says (`check`'s hint, `dueflow sources
# init`'s draft): its value map, theirs = ours.
BOOLEAN_STATUSES: dict[tuple[str, str], dict[str, str]] = {
    ("contracts", "status"): {"true": "active", "false": "cancelled"},
    ("invoices", "status"): {"true": "paid", "false": "sent"},  # a `paid` flag
}
# An amount may instead come as integer minor units of its currency (12345 EUR = 123.45).
AMOUNT_MINOR = "amount_minor"
SOURCE_NAMES = tuple(SOURCES)


@dataclass(frozen=True)
class Expression:
    """An SQL expression over the relation's columns: the operator's trusted configuration,
    checked at start-up by running the extract with LIMIT 0."""

    sql: str


# Where one dueflow column comes from: a column of the relation, by name (quoted, never
# pasted), or an expression.
Origin = str | Expression


@dataclass(frozen=True)
class SourceSpec:
    """One source as the mapping gives it: the relation, where each column comes from, and
    value maps for the closed vocabularies (statuses, booleans, locales)."""

    name: str  # contracts | clients | invoices | payments
    relation: str  # the table or view
    schema: str | None = None  # None: DUEFLOW_SOURCE_SCHEMA, else the search path
    columns: Mapping[str, Origin] = field(default_factory=dict)  # dueflow column -> origin
    values: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # column -> {theirs: ours}

    def origin(self, column: str) -> Origin:
        """Where `column` comes from: the mapping's word, else the column of that name."""
        return self.columns.get(column, column)


@dataclass(frozen=True)
class SourceMapping:
    """The three sources as configured (a mapping file, or dueflow's own names)."""

    specs: Mapping[str, SourceSpec]
    origin: str = "dueflow's own names"  # where it came from, for messages

    def spec(self, name: str) -> SourceSpec:
        return self.specs.get(name) or SourceSpec(name, name)

    @property
    def given(self) -> bool:
        """A mapping file (or block) says where the sources are, not dueflow's own names."""
        return self != DEFAULT_MAPPING


DEFAULT_MAPPING = SourceMapping({})


class MappingError(ValueError):
    """The mapping file cannot be used; the message names the file, source and column."""


_IDENTIFIER_LIMIT = 63  # PostgreSQL's; SQLite has none, but a longer name is a typo
_TRUE = ("true", "1", "yes")
_FALSE = ("false", "0", "no")


def flag_word(value: Any) -> str | None:
    """'true' or 'false' for a value that says one (true, 1, yes; false, 0, no: any case),
    else None."""
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value).strip().lower()
    return "true" if text in _TRUE else "false" if text in _FALSE else None


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise MappingError(f"{where}: expected a name, got {value!r}")
    if len(value) > _IDENTIFIER_LIMIT or re.search(r"[\x00-\x1f\x7f]", value):
        raise MappingError(f"{where}: {value[:80]!r} is not a usable name")
    return value


def _origin(value: Any, where: str) -> Origin:
    if isinstance(value, str):
        return _name(value, where)
    if isinstance(value, dict) and set(value) == {"sql"} and isinstance(value["sql"], str):
        sql = value["sql"].strip()
        if not sql:
            raise MappingError(f"{where}: the expression is empty")
        if ";" in sql or "--" in sql or "/*" in sql:
            # One expression, not statements: a `;` or a comment would change what the
            # statements dueflow wraps around it mean.
            raise MappingError(f"{where}: an expression may not contain ';' or comments")
        return Expression(sql)
    raise MappingError(
        f'{where}: expected a column name ("their_column") or'
        ' {{ sql = "an expression" }}, got ' + repr(value)[:80]
    )


def _spec(name: str, table: Any, origin: str) -> SourceSpec:
    where = f"{origin}: [{name}]"
    if not isinstance(table, dict):
        raise MappingError(f"{where}: expected a table of settings")
    unknown = sorted(set(table) - {"relation", "schema", "columns", "values"})
    if unknown:
        raise MappingError(
            f"{where}: unknown setting(s) {', '.join(unknown)} (relation, schema, columns, values)"
        )
    relation = _name(table.get("relation", name), f"{where} relation")
    schema = _name(table["schema"], f"{where} schema") if "schema" in table else None
    known = SOURCES[name]
    columns: dict[str, Origin] = {}
    for column, value in (table.get("columns") or {}).items():
        if column not in known and not (column == AMOUNT_MINOR and "amount" in known):
            raise MappingError(
                f"{origin}: [{name}.columns] {column}: not a column of {name} ({', '.join(known)})"
            )
        columns[column] = _origin(value, f"{origin}: {name}.{column}")
    if AMOUNT_MINOR in columns and "amount" in columns:
        raise MappingError(f"{origin}: {name}: map either amount or amount_minor, not both")
    if "amount_open" in columns and "amount_paid" in columns:
        raise MappingError(f"{origin}: {name}: map either amount_open or amount_paid, not both (what the"
                           " client still owes, or what was paid)")
    values: dict[str, dict[str, str]] = {}
    for column, mapping in (table.get("values") or {}).items():
        target = known.get(column)
        if target is None or not target.vocabulary:
            mappable = ", ".join(c.name for c in known.values() if c.vocabulary)
            raise MappingError(f"{origin}: [{name}.values] {column}: only {mappable} take value maps")
        if not isinstance(mapping, dict) or not mapping:
            raise MappingError(f"{origin}: [{name}.values.{column}]: expected their = ours pairs")
        values[column] = {}
        for theirs, ours in mapping.items():
            mapped = (
                flag_word(ours) if target.kind == Kind.FLAG else (ours if isinstance(ours, str) else None)
            )
            if mapped is None or mapped not in target.vocabulary:
                raise MappingError(
                    f"{origin}: {name}.values.{column}: {theirs!r} maps to {ours!r},"
                    f" which is not one of {', '.join(target.vocabulary)}"
                )
            values[column][str(theirs)] = mapped
    return SourceSpec(name, relation, schema, columns, values)


def parse_mapping(text: str, origin: str) -> SourceMapping:
    """The mapping file (TOML, DUEFLOW_SOURCES_FILE): a table per source, e.g.

        [invoices]
        relation = "invoice"          # a table or view
        schema = "billing"            # optional
        [invoices.columns]
        number = "invoice_no"         # a column of the relation
        client_id = "customer_id"
        amount_minor = "total_cents"  # integer minor units instead of `amount`
        sent_at = { sql = "issued_on + interval '9 hours'" }
        [invoices.values.status]
        issued = "sent"

    Anything it cannot use raises MappingError with one line naming `origin`, the source
    and the column."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise MappingError(f"{origin}: not valid TOML: {exc}") from None
    unknown = sorted(set(data) - set(SOURCES))
    if unknown:
        raise MappingError(f"{origin}: unknown source(s) {', '.join(unknown)} ({', '.join(SOURCES)})")
    return SourceMapping({name: _spec(name, table, origin) for name, table in data.items()}, origin)
