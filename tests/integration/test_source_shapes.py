"""The company's data as it is (docs/your-data.md): generated source shapes — every supported
type of each column, names mapped through a view or through the mapping file, sources in a
schema of their own, statuses and flags spelled the company's way, amounts in minor units —
read through the real extract and rules decide exactly what the same data decides in
dueflow's own sample tables, on PostgreSQL and SQLite. A shape dueflow cannot read is one
line before anything is read."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import ROUND_DOWN, Decimal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine, text

from dueflow.tasks.adapters import db
from dueflow.tasks.adapters.sources import SourceError
from dueflow.tasks.adapters.sql_store import sql_store
from dueflow.tasks.core.addresses import Mailbox
from dueflow.tasks.core.sources import parse_mapping
from dueflow.tasks.jobs import DunningJob, RenewalJob
from tests import examples
from tests.conftest import PG_URL, require_pg
from tests.helpers.factories import without_keys

AS_OF = date(2027, 1, 10)
LEADS = (15, 30, 60)
DELAYS = (7, 5, 7)
ID_TYPES = ("text", "integer", "bigint", "numeric", "uuid")
AMOUNT_TYPES = ("numeric", "text", "float8", "minor")
STAMP_TYPES = ("timestamptz", "timestamp", "date")
FLAG_TYPES = ("boolean", "integer", "yn")


def as_id(n: int, kind: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_OID, str(n))) if kind == "uuid" else str(n)


@dataclass(frozen=True)
class Shape:
    """How the company keeps one source: column types, names, and how dueflow reaches it."""

    id_type: str
    amount_type: str
    stamp_type: str
    flag_type: str
    renamed: bool  # their own column names
    exposure: str  # "mapping": the mapping file maps the names; "view": a view renames them
    statuses: bool  # their own status words (issued, settled…), mapped by value maps


def shapes(dialect: str) -> st.SearchStrategy[Shape]:
    typed = dialect == "postgresql"
    return st.builds(
        Shape,
        id_type=st.sampled_from(ID_TYPES if typed else ("text", "integer")),
        amount_type=st.sampled_from(AMOUNT_TYPES if typed else ("text", "float8", "minor")),
        stamp_type=st.sampled_from(STAMP_TYPES if typed else ("timestamptz", "timestamp")),
        flag_type=st.sampled_from(FLAG_TYPES),
        renamed=st.booleans(),
        exposure=st.sampled_from(["mapping", "view"]),
        statuses=st.booleans(),
    )


amounts = st.sampled_from(["100.00", "980.40", "12.50", "1450.00", "-5.00", None])
days = st.integers(-5, 70)


@st.composite
def data(draw: st.DrawFn) -> dict[str, list[dict]]:
    """Canonical rows (dueflow's names and spellings), with ids as numbers."""
    contracts = draw(
        st.lists(
            st.fixed_dictionaries(
                {
                    "id": st.integers(1, 12),
                    "amount": amounts,
                    "currency": st.sampled_from(["EUR", "JPY", "USD"]),
                    "renewal_date": st.one_of(st.none(), days.map(lambda d: AS_OF + timedelta(days=d))),
                    "notify_email": st.sampled_from(["owner@example.com", "not-an-address"]),
                    "status": st.sampled_from(["active", "active", "cancelled"]),
                }
            ),
            max_size=10,
        )
    )
    clients = draw(
        st.lists(
            st.fixed_dictionaries(
                {
                    "id": st.integers(1, 5),
                    "email": st.sampled_from(["ap@client.example", "broken"]),
                    "locale": st.sampled_from(["en", "es"]),
                    "dunning_paused": st.sampled_from([True, False, False, None]),
                }
            ),
            max_size=5,
            unique_by=lambda r: r["id"],
        )
    )
    invoices = draw(
        st.lists(
            st.fixed_dictionaries(
                {
                    "id": st.integers(1, 12),
                    "client_id": st.integers(1, 6),
                    "amount": amounts,
                    "currency": st.sampled_from(["EUR", "USD"]),
                    "status": st.sampled_from(["sent", "sent", "sent", "paid", "void", "draft"]),
                    "sent_at": st.one_of(
                        st.none(),
                        st.integers(3, 40).map(lambda d: datetime(2027, 1, 10, 9, 30) - timedelta(days=d)),
                    ),
                    "due_date": days.map(lambda d: AS_OF - timedelta(days=d)),
                    "paid": st.booleans(),
                }
            ),
            max_size=10,
        )
    )
    return {"contracts": contracts, "clients": clients, "invoices": invoices}


STATUS_WORDS = {
    "sent": "issued",
    "paid": "settled",
    "void": "cancelled",
    "draft": "draft",
    "active": "live",
    "cancelled": "ended",
}


def _name(column: str, shape: Shape) -> str:
    return f"x_{column}" if shape.renamed and column != "id" else column


def _pg_type(column: str, shape: Shape) -> str:
    if column in ("id", "client_id"):
        return shape.id_type
    if column == "amount":
        return {"numeric": "numeric", "text": "text", "float8": "float8", "minor": "bigint"}[
            shape.amount_type
        ]
    if column in ("sent_at", "paid_at"):
        return shape.stamp_type
    if column == "dunning_paused":
        return {"boolean": "boolean", "integer": "integer", "yn": "text"}[shape.flag_type]
    return "date" if column in ("renewal_date", "due_date") else "text"


COLUMNS = {
    "contracts": ("id", "vendor", "title", "amount", "currency", "renewal_date", "notify_email", "status"),
    "clients": ("id", "name", "email", "locale", "notes", "dunning_paused"),
    "invoices": (
        "id",
        "client_id",
        "number",
        "amount",
        "currency",
        "status",
        "sent_at",
        "due_date",
        "paid_at",
    ),
}


def _canonical_rows(name: str, rows: list[dict], id_kind: str) -> list[dict]:
    """The rows as dueflow's sample tables hold them."""
    out = []
    for n, r in enumerate(rows):
        if name == "contracts":
            out.append(
                {
                    "id": as_id(r["id"], id_kind),
                    "vendor": f"V{n}",
                    "title": "T",
                    "amount": r["amount"],
                    "currency": r["currency"],
                    "renewal_date": r["renewal_date"] and r["renewal_date"].isoformat(),
                    "notify_email": r["notify_email"],
                    "status": r["status"],
                }
            )
        elif name == "clients":
            out.append(
                {
                    "id": as_id(r["id"], id_kind),
                    "name": f"C{r['id']}",
                    "email": r["email"],
                    "locale": r["locale"],
                    "notes": None,
                    "dunning_paused": r["dunning_paused"],
                }
            )
        else:
            sent = r["sent_at"] and r["sent_at"].isoformat() + "+00:00"
            out.append(
                {
                    "id": as_id(r["id"], id_kind),
                    "client_id": as_id(r["client_id"], id_kind),
                    "number": f"N{n}",
                    "amount": r["amount"],
                    "currency": r["currency"],
                    "status": r["status"],
                    "sent_at": sent,
                    "due_date": r["due_date"].isoformat(),
                    "paid_at": (r["due_date"].isoformat() + " 12:00:00+00:00") if r["paid"] else None,
                }
            )
    return out


_AMOUNT_WRITTEN = re.compile(r"amount (-?[0-9]+(?:\.[0-9]+)?) ")


def expressible(tables: dict[str, list[dict]], shape: Shape) -> dict[str, list[dict]]:
    """The tables with every amount the shape can hold: integer minor units cannot hold
    980.40 JPY, so in that shape both sides hold what they can (980)."""
    if shape.amount_type != "minor":
        return tables
    return {name: [_whole_units(row) for row in rows] for name, rows in tables.items()}


def _whole_units(row: dict) -> dict:
    if row.get("amount") is None:
        return row
    minor = Decimal(str(row["amount"])).scaleb(_units(row))
    if minor == minor.to_integral_value():
        return row
    return row | {"amount": format(minor.to_integral_value(rounding=ROUND_DOWN).scaleb(-_units(row)), "f")}


def _units(row: dict) -> int:
    return 0 if row["currency"] == "JPY" else 2


def _shaped_value(column: str, value: object, row: dict, shape: Shape, dialect: str) -> object:
    """A canonical value as the company's shape holds it."""
    if value is None:
        return None
    if column == "amount" and shape.amount_type == "minor":
        return int(Decimal(str(value)).scaleb(_units(row)))
    if column == "amount" and shape.amount_type == "float8":
        return float(value)
    if column in ("sent_at", "paid_at"):
        moment = datetime.fromisoformat(str(value))
        if shape.stamp_type == "timestamp":  # their wall clock, in the business zone (UTC here)
            return moment.replace(tzinfo=None).isoformat(sep=" ")
        if shape.stamp_type == "date":
            return moment.date().isoformat()
        return moment.isoformat()
    if column == "dunning_paused":
        return {"boolean": value, "integer": int(bool(value)), "yn": "Y" if value else "N"}[shape.flag_type]
    if column == "status" and shape.statuses:
        return STATUS_WORDS[str(value)]
    if column in ("id", "client_id") and shape.id_type in ("integer", "bigint", "numeric"):
        return int(str(value))
    return value


def build(url: str, schema: str | None, tables: dict[str, list[dict]], shape: Shape, tmp: Path) -> Path:
    """The company's relations for `tables` in `schema` (PostgreSQL) or the file (SQLite), and
    the mapping file that points dueflow at them."""
    engine = db.engine_for(url)
    dialect = engine.dialect.name
    prefix = f'"{schema}".' if schema else ""
    mapping: dict[str, dict] = {}
    with engine.begin() as conn:
        for name, columns in COLUMNS.items():
            relation = f"their_{name}"
            conn.execute(text(f"DROP VIEW IF EXISTS {prefix}{relation}_v"))
            conn.execute(text(f"DROP TABLE IF EXISTS {prefix}{relation}"))
            typed = ", ".join(
                f"{_name(c, shape)} {_pg_type(c, shape) if dialect == 'postgresql' else ''}" for c in columns
            )
            conn.execute(text(f"CREATE TABLE {prefix}{relation} ({typed})"))
            canonical = _canonical_rows(name, tables[name], shape.id_type)
            rows = [
                {_name(c, shape): _shaped_value(c, row.get(c), row, shape, dialect) for c in columns}
                for row in canonical
            ]
            if rows:
                names = list(rows[0])
                conn.execute(
                    text(
                        f"INSERT INTO {prefix}{relation} ({', '.join(names)}) VALUES "
                        f"({', '.join(':' + n for n in names)})"
                    ),
                    rows,
                )
            spec: dict = {"relation": relation}
            columns_map = {c: _name(c, shape) for c in columns if _name(c, shape) != c}
            if shape.amount_type == "minor" and "amount" in columns:
                columns_map.pop("amount", None)
                columns_map["amount_minor"] = _name("amount", shape)
            if shape.exposure == "view" and shape.amount_type != "minor":
                # A view that gives dueflow its own names: the mapping names the view only.
                selected = ", ".join(f"{_name(c, shape)} AS {c}" for c in columns)
                conn.execute(
                    text(f"CREATE VIEW {prefix}{relation}_v AS SELECT {selected} FROM {prefix}{relation}")
                )
                spec = {"relation": f"{relation}_v"}
            elif columns_map:
                spec["columns"] = columns_map
            if shape.statuses and name != "clients":
                spec.setdefault("values", {})["status"] = {
                    theirs: ours
                    for ours, theirs in STATUS_WORDS.items()
                    if ours
                    in (("active", "cancelled") if name == "contracts" else ("sent", "paid", "void", "draft"))
                }
            if name == "clients" and shape.flag_type == "yn":
                spec.setdefault("values", {})["dunning_paused"] = {"Y": True, "N": False}
            mapping[name] = spec
    path = tmp / "sources.toml"
    path.write_text(_toml(mapping), encoding="utf-8")
    return path


def _toml(mapping: dict[str, dict]) -> str:
    lines = []
    for name, spec in mapping.items():
        lines += [f"[{name}]", f"relation = {json.dumps(spec['relation'])}"]
        for section in ("columns",):
            if spec.get(section):
                lines.append(f"[{name}.{section}]")
                lines += [f"{k} = {json.dumps(v)}" for k, v in spec[section].items()]
        for column, values in spec.get("values", {}).items():
            lines.append(f"[{name}.values.{column}]")
            lines += [f"{json.dumps(k)} = {json.dumps(v)}" for k, v in values.items()]
    return "\n".join(lines) + "\n"


def decided(database: db.Database) -> dict[str, object]:
    """What tonight's real extract and rules make of a database's sources."""
    sender = Mailbox("alerts@dueflow.test")
    renewal_job = RenewalJob(LEADS, "en", sender)
    renewals = renewal_job.extract(sql_store(database), AS_OF)
    renewal = renewal_job.decide(renewals, AS_OF)
    dunning = DunningJob.extract_all(sql_store(database))
    reminders = DunningJob(DELAYS, "sent", "UTC", "collections@corp.example", sender).decide(dunning, AS_OF)
    due = {}
    for decision in (renewal, reminders):
        for row in decision.due.itertuples(index=False):
            amount = getattr(row, "amount", None)
            due[row.key] = (row.recipient, None if amount is None else Decimal(str(amount)), row.handled)
    source_ids = list(renewal.quarantined["source_id"]) + list(reminders.quarantined["source_id"])
    # A reason quotes the amount as the source holds it: 12.5 in a float column is 12.50.
    reasons = [_AMOUNT_WRITTEN.sub(lambda m: f"amount {Decimal(m.group(1)).normalize()} ", reason)
               for reason in list(renewal.quarantined["reason"]) + list(reminders.quarantined["reason"])]
    quarantined = sorted(zip(source_ids, reasons, strict=True))
    return {"due": due, "quarantined": quarantined}


def reload_canonical(url: str, tables: dict[str, list[dict]], id_kind: str) -> None:
    engine = db.engine_for(url)
    with engine.begin() as conn:
        for name in COLUMNS:
            conn.execute(text(f"DELETE FROM {name}"))
            rows = _canonical_rows(name, tables[name], id_kind)
            if rows:
                conn.execute(
                    text(
                        f"INSERT INTO {name} ({', '.join(rows[0])}) VALUES "
                        f"({', '.join(':' + c for c in rows[0])})"
                    ),
                    rows,
                )


@pytest.fixture(scope="module")
def pg_places(tmp_path_factory) -> Iterator[dict[str, str]]:
    """A canonical schema (sample tables and a ledger), a ledger schema and a schema of the
    company's own relations, reused by every example."""
    require_pg()
    suffix = uuid.uuid4().hex[:10]
    names = {
        "canonical": f"dueflow_can_{suffix}",
        "ledger": f"dueflow_led_{suffix}",
        "source": f"their_src_{suffix}",
    }
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        for schema in names.values():
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    urls = {
        "canonical": f"{PG_URL}?options=-csearch_path%3D{names['canonical']}",
        "ledger": f"{PG_URL}?options=-csearch_path%3D{names['ledger']}",
    }
    db.init_db(db.engine_for(urls["canonical"]), sample_tables=True)
    without_keys(urls["canonical"], "contracts", "clients", "invoices")  # duplicated ids are data too
    db.init_db(db.engine_for(urls["ledger"]))
    try:
        yield urls | {"source_schema": names["source"]}
    finally:
        for url in (urls["canonical"], urls["ledger"]):
            db.engine_for(url).dispose()
        with admin.connect() as conn:
            for schema in names.values():
                conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture(scope="module")
def sqlite_places(tmp_path_factory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("shapes")
    urls = {
        "canonical": f"sqlite:///{folder / 'canonical.db'}",
        "ledger": f"sqlite:///{folder / 'theirs.db'}",
    }
    db.init_db(db.engine_for(urls["canonical"]), sample_tables=True)
    without_keys(urls["canonical"], "contracts", "clients", "invoices")
    db.init_db(db.engine_for(urls["ledger"]))
    return urls


SETTINGS = settings(
    max_examples=examples(15),
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.mark.pg
@SETTINGS
@given(tables=data(), shape=shapes("postgresql"))
def test_any_supported_postgresql_shape_decides_what_the_canonical_tables_decide(
    pg_places, tmp_path_factory, tables, shape
):
    tmp = tmp_path_factory.mktemp("mapping")
    tables = expressible(tables, shape)
    reload_canonical(pg_places["canonical"], tables, shape.id_type)
    mapping_file = build(pg_places["ledger"], pg_places["source_schema"], tables, shape, tmp)
    mapping = parse_mapping(mapping_file.read_text(), str(mapping_file))
    theirs = db.Database(pg_places["ledger"]).with_sources(mapping, pg_places["source_schema"], "UTC")
    ours = db.Database(pg_places["canonical"]).with_sources()
    assert decided(theirs) == decided(ours)


@SETTINGS
@given(tables=data(), shape=shapes("sqlite"))
def test_any_supported_sqlite_shape_decides_what_the_canonical_tables_decide(
    sqlite_places, tmp_path_factory, tables, shape
):
    tmp = tmp_path_factory.mktemp("mapping")
    tables = expressible(tables, shape)
    reload_canonical(sqlite_places["canonical"], tables, "text")
    mapping_file = build(sqlite_places["ledger"], None, tables, shape, tmp)
    mapping = parse_mapping(mapping_file.read_text(), str(mapping_file))
    theirs = db.Database(sqlite_places["ledger"]).with_sources(mapping, None, "UTC")
    ours = db.Database(sqlite_places["canonical"]).with_sources()
    assert decided(theirs) == decided(ours)


@pytest.mark.pg
def test_ids_that_collide_as_text_are_one_duplicated_id(pg_places):
    """`1` (an integer) and '1' (text) in a view over a union are the same id to dueflow:
    both rows are quarantined, as two rows of one id are in the canonical tables."""
    schema = pg_places["source_schema"]
    engine = db.engine_for(pg_places["ledger"])
    with engine.begin() as conn:
        conn.execute(text(f'DROP VIEW IF EXISTS "{schema}".all_contracts'))
        conn.execute(text(f'DROP TABLE IF EXISTS "{schema}".old_contracts, "{schema}".new_contracts'))
        for table, kind in (("old_contracts", "integer"), ("new_contracts", "text")):
            conn.execute(
                text(
                    f'CREATE TABLE "{schema}".{table} (id {kind}, vendor text, title text,'
                    " amount numeric, currency text, renewal_date date, notify_email text, status text)"
                )
            )
            conn.execute(
                text(
                    f"INSERT INTO \"{schema}\".{table} VALUES (:id, 'V', 'T', 10, 'EUR', :d,"
                    " 'o@example.com', 'active')"
                ),
                {"id": 1 if kind == "integer" else "1", "d": AS_OF + timedelta(days=10)},
            )
        conn.execute(
            text(
                f'CREATE VIEW "{schema}".all_contracts AS SELECT CAST(id AS text) AS id, vendor, title,'
                f' amount, currency, renewal_date, notify_email, status FROM "{schema}".old_contracts'
                f' UNION ALL SELECT * FROM "{schema}".new_contracts'
            )
        )
    canonical_schema = pg_places["canonical"].rpartition("%3D")[2]  # its empty invoices and clients
    mapping = parse_mapping(
        f'[contracts]\nrelation = "all_contracts"\n[invoices]\nschema = "{canonical_schema}"\n'
        f'[clients]\nschema = "{canonical_schema}"\n',
        "test",
    )
    reload_canonical(pg_places["canonical"], {"contracts": [], "clients": [], "invoices": []}, "text")
    theirs = db.Database(pg_places["ledger"]).with_sources(mapping, schema, "UTC")
    assert [source_id for source_id, _ in decided(theirs)["quarantined"]] == ["1", "1"]


@pytest.mark.pg
def test_a_shape_dueflow_cannot_read_is_one_line_per_problem_before_any_row_is_read(pg_places):
    schema = pg_places["source_schema"]
    with db.engine_for(pg_places["ledger"]).begin() as conn:
        conn.execute(text(f'DROP TABLE IF EXISTS "{schema}".odd_contracts'))
        conn.execute(
            text(
                f'CREATE TABLE "{schema}".odd_contracts (id jsonb, vendor text, amount text, currency text,'
                " renewal_date text, notify_email text, status text)"
            )
        )
    mapping = parse_mapping(
        '[contracts]\nrelation = "odd_contracts"\n[contracts.columns]\n'
        "title = { sql = \"no_such_column || 'x'\" }\n",
        "sources.toml",
    )
    with pytest.raises(SourceError) as refused:
        db.Database(pg_places["ledger"]).with_sources(mapping, schema, "UTC")
    lines = [problem.line() for problem in refused.value.problems]
    assert any(
        line.startswith("contracts: reading odd_contracts fails (an expression of the mapping: title)")
        and "no_such_column" in line
        for line in lines
    ), lines
    mapping = parse_mapping(
        '[contracts]\nrelation = "odd_contracts"\n[contracts.columns]\ntitle = "vendor"\n', "sources.toml"
    )
    with pytest.raises(SourceError) as refused:
        db.Database(pg_places["ledger"]).with_sources(mapping, schema, "UTC")
    lines = [problem.line() for problem in refused.value.problems]
    assert any(
        "id is jsonb in odd_contracts; dueflow reads text, an integer, numeric or uuid" in line
        for line in lines
    ), lines
    assert any("renewal_date is text in odd_contracts; dueflow reads a date" in line for line in lines), lines
    assert all("\n" not in line and "— fix: " in line for line in lines)
