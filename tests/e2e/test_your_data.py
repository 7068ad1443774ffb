"""Issue 23's findings, each as it was found and each failing before the change: dueflow on a
company's own tables, types, names, views, schemas and roles, through the real `dueflow`
command (init-db, check --sources, run) against a real PostgreSQL and a real SMTP server."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date, timedelta

import pytest
from sqlalchemy import create_engine, text

from dueflow.tasks.adapters import db
from tests.conftest import PG_URL, require_pg
from tests.helpers.openai_server import openai_stub

pytestmark = pytest.mark.pg

AS_OF = date(2027, 1, 10)
RENEWS = AS_OF + timedelta(days=30)


@pytest.fixture
def schemas() -> Iterator[Callable[..., str]]:
    """make(name) creates a schema for this test; every one is dropped afterwards, with the
    roles made by role()."""
    require_pg()
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    made: list[str] = []
    roles: list[str] = []

    def make(label: str) -> str:
        name = f"{label}_{uuid.uuid4().hex[:8]}"
        with admin.connect() as conn:
            conn.execute(text(f'CREATE SCHEMA "{name}"'))
        made.append(name)
        return name

    make.roles = roles  # type: ignore[attr-defined]
    yield make
    with admin.connect() as conn:
        conn.execute(
            text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name"
                " = 'dueflow' AND pid <> pg_backend_pid() AND usename = ANY(:roles)"
            ),
            {"roles": roles},
        )
        for name in made:
            conn.execute(text(f'DROP SCHEMA "{name}" CASCADE'))
        for role in roles:
            conn.execute(text(f'DROP OWNED BY "{role}"'))
            conn.execute(text(f'DROP ROLE "{role}"'))
    admin.dispose()


def url_for(*path: str, user: str = "postgres") -> str:
    base = PG_URL.replace("postgres@", f"{user}@", 1)
    return f"{base}?options=-csearch_path%3D{'%2C'.join(path)}"


def run_sql(url: str, *statements: str, **params: object) -> None:
    engine = create_engine(url)
    with engine.begin() as conn:
        for statement in statements:
            conn.execute(text(statement), params)
    engine.dispose()


def one_line_error(result) -> str:
    err = result.stderr.strip()
    assert result.returncode == 2, result.stdout + result.stderr
    assert err.startswith("dueflow: error: ") and len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def ledger_keys(url: str) -> list[str]:
    return sorted(db.ledger_rows(db.engine_for(url))["key"])


SERIAL_TABLES = (
    "CREATE TABLE contracts (id serial PRIMARY KEY, vendor text, title text, amount numeric, currency text,"
    " renewal_date date, notify_email text, status text)",
    "CREATE TABLE clients (id serial PRIMARY KEY, name text, email text, locale text DEFAULT 'en',"
    " notes text,"
    " dunning_paused boolean DEFAULT false)",
    "CREATE TABLE invoices (id serial PRIMARY KEY, client_id integer REFERENCES clients, number text,"
    " amount numeric, currency text, status text, sent_at timestamptz, due_date date, paid_at timestamptz)",
)


def seed_serial(url: str) -> None:
    run_sql(
        url,
        *SERIAL_TABLES,
        "INSERT INTO contracts (vendor, title, amount, currency, renewal_date, notify_email, status)"
        " VALUES ('Acme', 'Hosting', 1250.50, 'EUR', :renews, 'owner@corp.example', 'active')",
        "INSERT INTO clients (name, email) VALUES ('Northwind', 'ap@northwind.example')",
        "INSERT INTO invoices (client_id, number, amount, currency, status, sent_at, due_date)"
        " VALUES (1, '2027-0042', 980.40, 'EUR', 'sent', :sent, :due)",
        renews=RENEWS,
        sent=f"{AS_OF - timedelta(days=8)} 10:00:00+00",
        due=AS_OF - timedelta(days=1),
    )


def test_integer_ids_work_from_init_db_to_the_email(schemas, dueflow_cli, mail_env, smtp_sink):
    """Was: init-db and check said ready, then the run ended after 86 s in `operator does
    not exist: integer = text`, with four tracebacks and nothing sent."""
    url = url_for(schemas("serial"))
    seed_serial(url)
    env = mail_env | {"DUEFLOW_DATABASE_URL": url}
    init = dueflow_cli("init-db", env=env)
    assert init.returncode == 0 and "Ready" in init.stdout, init.stdout + init.stderr
    check = dueflow_cli("check", "--sources", env=env)
    assert "ok       sources: read in" in check.stdout, check.stdout
    said = " ".join(check.stdout.split())
    assert "id ← id [int4]" in said and "client_id ← client_id [int4]" in said
    assert "Tonight (" in check.stdout and "renewal: " in check.stdout  # the real extract ran
    assert "CREATE INDEX ON" in check.stdout and '((CAST("id" AS text)))' in check.stdout  # int ids

    run = dueflow_cli("run", "--as-of", AS_OF.isoformat(), env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    assert sorted(smtp_sink.keys()) == sorted([f"renewal/1/{RENEWS}/30d", "dunning/1/REMINDED_1"])
    again = dueflow_cli("run", "--as-of", AS_OF.isoformat(), env=env)
    assert again.returncode == 0 and len(smtp_sink.keys()) == 2


def test_the_company_names_and_words_are_mapped_without_ddl(
    schemas, dueflow_cli, mail_env, smtp_sink, tmp_path
):
    """Was: check listed the missing columns and said `init-db` fixes them; init-db said
    "Schema ready" and changed nothing — a loop."""
    data = schemas("erp")
    url = url_for(data)
    run_sql(
        url,
        "CREATE TABLE customer (customer_id text, customer_name text, mail text, lang text, remarks text,"
        " on_hold char(1))",
        "CREATE TABLE bill (bill_id text, customer_id text, invoice_no text, total_cents bigint, ccy text,"
        " state text, issued timestamp, due date, settled_on date)",
        "CREATE TABLE agreement (id text, supplier text, name text, cost numeric, ccy text, renews date,"
        " owner text, state text)",
        "INSERT INTO customer VALUES ('k1', 'Northwind', 'ap@northwind.example', 'es', NULL, 'N'),"
        " ('k2', 'Held', 'ap@held.example', 'en', NULL, 'Y')",
        "INSERT INTO bill VALUES ('b1', 'k1', 'F-1', 98040, 'EUR', 'issued', :sent, :due, NULL),"
        " ('b2', 'k2', 'F-2', 1000, 'EUR', 'issued', :sent, :due, NULL),"
        " ('b3', 'k1', 'F-3', 1000, 'EUR', 'settled', :sent, :due, :due)",
        "INSERT INTO agreement VALUES ('a1', 'Acme', 'Hosting', 99.5, 'EUR', :renews, 'o@corp.example',"
        " 'live')",
        sent=f"{AS_OF - timedelta(days=8)} 10:00:00",
        due=AS_OF - timedelta(days=1),
        renews=RENEWS,
    )
    mapping = tmp_path / "sources.toml"
    mapping.write_text(f"""
[contracts]
relation = "agreement"
[contracts.columns]
vendor = "supplier"
title = "name"
amount = "cost"
currency = "ccy"
renewal_date = "renews"
notify_email = "owner"
status = "state"
[contracts.values.status]
live = "active"
[clients]
relation = "customer"
[clients.columns]
id = "customer_id"
name = "customer_name"
email = "mail"
locale = "lang"
notes = "remarks"
dunning_paused = "on_hold"
[clients.values.dunning_paused]
Y = true
N = false
[invoices]
relation = "bill"
schema = "{data}"
[invoices.columns]
id = "bill_id"
client_id = "customer_id"
number = "invoice_no"
amount_minor = "total_cents"
currency = "ccy"
status = "state"
sent_at = "issued"
due_date = "due"
paid_at = {{ sql = "CAST(settled_on AS timestamp)" }}
[invoices.values.status]
issued = "sent"
settled = "paid"
""")
    env = mail_env | {
        "DUEFLOW_DATABASE_URL": url,
        "DUEFLOW_SOURCES_FILE": str(mapping),
        "DUEFLOW_TIMEZONE": "Europe/Madrid",
    }
    unmapped = env | {"DUEFLOW_SOURCES_FILE": ""}
    init = dueflow_cli("init-db", env=unmapped)  # makes the ledger (exit 0), and says what it cannot make
    assert init.returncode == 0 and init.stderr == "" and "Ready" not in init.stdout
    assert "Not ready for a run yet" in init.stdout
    assert "  contracts: no table or view contracts" in init.stdout
    assert "Next: `dueflow sources init" in init.stdout
    check_before = dueflow_cli("check", env=unmapped)
    source_lines = [line for line in check_before.stdout.splitlines() if line.startswith("problem  source ")]
    assert source_lines and all(
        "init-db" not in line or "--with-sample-tables" in line for line in source_lines
    )
    assert any("DUEFLOW_SOURCES_FILE" in line for line in source_lines), check_before.stdout
    assert dueflow_cli("init-db", env=env).returncode == 0
    check = dueflow_cli("check", "--sources", env=env)
    said = " ".join(check.stdout.split())
    assert "amount_minor ← total_cents [int8]" in said and "sent_at ← issued [timestamp]" in said, (
        check.stdout
    )
    assert "read in the business time zone Europe/Madrid" in check.stdout
    run = dueflow_cli("run", "--as-of", AS_OF.isoformat(), env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    received = smtp_sink.by_key()
    assert sorted(received) == sorted([f"renewal/a1/{RENEWS}/30d", "dunning/b1/REMINDED_1"])
    body = received["dunning/b1/REMINDED_1"].get_body(("plain",)).get_content()
    assert "980,40\xa0€" in body and "F-1" in body  # es; minor units read exactly


def test_a_view_in_another_schema_through_the_search_path_is_a_source(
    schemas, dueflow_cli, mail_env, smtp_sink
):
    """Was: init-db failed (`cannot create index on relation "contracts"`), and with the
    ledger made by hand, check and run said `table contracts is missing`."""
    data, views = schemas("data"), schemas("views")
    seed_serial(url_for(data))
    run_sql(
        url_for(views, data),
        f'CREATE VIEW "{views}".contracts AS SELECT * FROM "{data}".contracts',
        f'CREATE VIEW "{views}".clients AS SELECT * FROM "{data}".clients',
        f'CREATE VIEW "{views}".invoices AS SELECT id, client_id, number, amount, currency,'
        f" CASE status WHEN 'sent' THEN 'sent' ELSE status END AS status, sent_at, due_date, paid_at"
        f' FROM "{data}".invoices',
    )
    ledger = schemas("ledger")
    env = mail_env | {"DUEFLOW_DATABASE_URL": url_for(views, data), "DUEFLOW_LEDGER_SCHEMA": ledger}
    init = dueflow_cli("init-db", env=env)
    assert init.returncode == 0 and "Ready" in init.stdout, init.stdout + init.stderr
    check = dueflow_cli("check", "--sources", env=env)
    assert f"contracts ← {views}.contracts (view)" in check.stdout, check.stdout
    assert "is a view: index its base tables" in check.stdout
    run = dueflow_cli("run", "--as-of", AS_OF.isoformat(), env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    assert len(smtp_sink.keys()) == 2
    with create_engine(url_for(ledger)).connect() as conn:  # dueflow's own tables in its own schema
        assert conn.execute(text("SELECT count(*) FROM dueflow_ledger")).scalar() == 2


def test_a_search_path_never_makes_dueflow_read_empty_copies(schemas, dueflow_cli, mail_env, smtp_sink):
    """Was: with the data in one schema and `search_path=dueflow,<data>`, init-db created
    empty source tables in the first schema, and every run read them: nothing sent."""
    data, mine = schemas("data"), schemas("mine")
    seed_serial(url_for(data))
    env = mail_env | {"DUEFLOW_DATABASE_URL": url_for(mine, data)}
    assert dueflow_cli("init-db", env=env).returncode == 0
    with create_engine(url_for(mine)).connect() as conn:
        tables = set(
            conn.execute(text("SELECT tablename FROM pg_tables WHERE schemaname = :s"), {"s": mine}).scalars()
        )
    assert "contracts" not in tables and "dueflow_ledger" in tables  # only dueflow's own
    run = dueflow_cli("run", "--as-of", AS_OF.isoformat(), env=env)
    assert run.returncode == 0 and len(smtp_sink.keys()) == 2, run.stdout + run.stderr

    # Copies left by an earlier dueflow in the first schema: refused, never read.
    run_sql(url_for(mine), *(statement.replace("REFERENCES clients", "") for statement in SERIAL_TABLES))
    err = one_line_error(dueflow_cli("run", "--as-of", (AS_OF + timedelta(days=1)).isoformat(), env=env))
    assert f"contracts exists in schemas {mine} and {data} of the search path" in err
    assert "set DUEFLOW_SOURCE_SCHEMA" in err
    chosen = dueflow_cli(
        "run", "--as-of", (AS_OF + timedelta(days=1)).isoformat(), env=env | {"DUEFLOW_SOURCE_SCHEMA": data}
    )
    assert chosen.returncode == 0, chosen.stdout + chosen.stderr


def test_a_timestamp_in_year_1_bc_never_stops_the_night(schemas, dueflow_cli, mail_env, smtp_sink):
    """Was: with LLM drafting on, `ValueError: year -1 is out of range` every run (the
    client's payment history read through the driver's conversion); the due reminder stayed
    pending and went out a day late."""
    url = url_for(schemas("bc"))
    db.init_db(db.engine_for(url), sample_tables=True)
    run_sql(
        url,
        "INSERT INTO clients VALUES ('k1', 'Northwind', 'ap@northwind.example', 'en', NULL, false)",
        "INSERT INTO invoices (id, client_id, number, amount, currency, status, sent_at, due_date, paid_at)"
        " VALUES ('old', 'k1', 'F-0', 10, 'EUR', 'paid', :sent, :due, '0001-01-01 00:00:00+01 BC'),"
        " ('due', 'k1', 'F-1', 980.40, 'EUR', 'sent', :sent, :due, NULL)",
        sent=f"{AS_OF - timedelta(days=8)} 10:00:00+00",
        due=AS_OF - timedelta(days=1),
    )
    with openai_stub() as llm:
        env = mail_env | {
            "DUEFLOW_DATABASE_URL": url,
            "OPENAI_API_KEY": "sk-test",
            "OPENAI_BASE_URL": llm.base_url,
            "DUEFLOW_LLM_MODEL": "local-model",
        }
        run = dueflow_cli("run", "--as-of", AS_OF.isoformat(), env=env)
        assert run.returncode == 0, run.stdout + run.stderr
        assert llm.requests, "the model was asked: the payment history was read"
    assert smtp_sink.keys() == ["dunning/due/REMINDED_1"]


def test_a_timestamp_without_a_time_zone_is_the_business_zones_local_time(
    schemas, dueflow_cli, mail_env, smtp_sink
):
    """Was: read as UTC, undocumented: a late-evening invoice moved to the next day."""
    url = url_for(schemas("local"))
    run_sql(
        url,
        *(s.replace("sent_at timestamptz", "sent_at timestamp") for s in SERIAL_TABLES),
        "INSERT INTO clients (name, email) VALUES ('Northwind', 'ap@northwind.example')",
        "INSERT INTO invoices (client_id, number, amount, currency, status, sent_at, due_date)"
        " VALUES (1, 'F-1', 10, 'EUR', 'sent', :sent, :due)",
        sent=f"{AS_OF - timedelta(days=7)} 23:30:00",
        due=AS_OF,
    )  # 23:30 in Madrid (22:30 UTC)
    env = mail_env | {"DUEFLOW_DATABASE_URL": url, "DUEFLOW_TIMEZONE": "Europe/Madrid"}
    assert dueflow_cli("init-db", env=env).returncode == 0
    run = dueflow_cli("run", "--as-of", AS_OF.isoformat(), env=env)  # 7 days after the local date
    assert run.returncode == 0 and smtp_sink.keys() == ["dunning/1/REMINDED_1"], run.stdout + run.stderr


@contextmanager
def role(schemas, name: str, *grants: str, **settings: str) -> Iterator[str]:
    """A login role of this test, with these grants and role settings."""
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    user = f"{name}_{uuid.uuid4().hex[:6]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE ROLE "{user}" LOGIN'))
        for grant in grants:
            conn.execute(text(grant.format(user=f'"{user}"')))
        for setting, value in settings.items():
            conn.execute(text(f"ALTER ROLE \"{user}\" SET {setting} = '{value}'"))
    schemas.roles.append(user)
    admin.dispose()
    yield user


def test_dueflow_needs_only_select_on_the_sources(schemas, dueflow_cli, mail_env, smtp_sink):
    data, ledger = schemas("data"), schemas("ledger")
    seed_serial(url_for(data))
    with role(
        schemas,
        "reader",
        f'GRANT USAGE ON SCHEMA "{data}" TO {{user}}',
        f'GRANT SELECT ON ALL TABLES IN SCHEMA "{data}" TO {{user}}',
        f'GRANT ALL ON SCHEMA "{ledger}" TO {{user}}',
    ) as user:
        env = mail_env | {
            "DUEFLOW_DATABASE_URL": url_for(ledger, user=user),
            "DUEFLOW_SOURCE_SCHEMA": data,
            "DUEFLOW_ESCALATION_TO": "collections@corp.example",
        }
        init = dueflow_cli("init-db", env=env)
        assert init.returncode == 0 and "Ready" in init.stdout, init.stdout + init.stderr
        check = dueflow_cli("check", env=env)
        assert check.returncode == 0, check.stdout
        run = dueflow_cli("run", "--as-of", AS_OF.isoformat(), env=env)
        assert run.returncode == 0 and len(smtp_sink.keys()) == 2, run.stdout + run.stderr


def test_a_read_only_role_is_one_line_before_anything_and_check_says_so(
    schemas, dueflow_cli, mail_env, smtp_sink
):
    """Issue 25, finding 8: nothing written, exit 2 — with 178 lines of Prefect traceback —
    while `dueflow check` said the database was ok."""
    mine = schemas("mine")
    db.init_db(db.engine_for(url_for(mine)), sample_tables=True)
    seed_rows = (
        "INSERT INTO contracts VALUES ('c1', 'Acme', 'Hosting', 10, 'EUR', :renews, 'o@corp.example',"
        " 'active')"
    )
    run_sql(url_for(mine), seed_rows, renews=RENEWS)
    with role(
        schemas,
        "ro",
        f'GRANT ALL ON SCHEMA "{mine}" TO {{user}}',
        f'GRANT ALL ON ALL TABLES IN SCHEMA "{mine}" TO {{user}}',
        default_transaction_read_only="on",
    ) as user:
        env = mail_env | {"DUEFLOW_DATABASE_URL": url_for(mine, user=user)}
        check = dueflow_cli("check", env=env)
        assert check.returncode == 1
        assert (
            "problem  dueflow's tables: cannot write: cannot execute UPDATE in a read-only transaction"
            in check.stdout
            and "default_transaction_read_only" in check.stdout
        ), check.stdout
        err = one_line_error(dueflow_cli("run", "--as-of", AS_OF.isoformat(), env=env))
        assert "read-only" in err and "default_transaction_read_only" in err
    assert ledger_keys(url_for(mine)) == [] and smtp_sink.keys() == []


def test_a_statement_timeout_is_one_line_before_any_write_and_storing_still_completes(
    schemas, dueflow_cli, mail_env, smtp_sink
):
    """Issue 25, finding 8: statement_timeout on the role gave a raw psycopg2 traceback when
    it hit the extract; when it hit storing the messages, 400 rows stayed pending and
    unstored every night, and `check` said ok."""
    mine = schemas("mine")
    url = url_for(mine)
    db.init_db(db.engine_for(url), sample_tables=True)
    # A source that takes its time: every row read costs 20 ms (rows without a renewal date
    # are read every night, to be quarantined, whatever the day).
    run_sql(
        url,
        "ALTER TABLE contracts RENAME TO contracts_data",
        "INSERT INTO contracts_data SELECT 's' || n, 'Acme', 'Hosting', 10, 'EUR', NULL, 'o@corp.example',"
        " 'active' FROM generate_series(1, 40) AS n",
        "CREATE VIEW contracts AS SELECT * FROM contracts_data WHERE pg_sleep(0.02) IS NOT NULL",
    )
    with role(
        schemas,
        "slow",
        f'GRANT ALL ON SCHEMA "{mine}" TO {{user}}',
        f'GRANT ALL ON ALL TABLES IN SCHEMA "{mine}" TO {{user}}',
        statement_timeout="300ms",
    ) as user:
        env = mail_env | {"DUEFLOW_DATABASE_URL": url_for(mine, user=user)}
        check = dueflow_cli("check", env=env)
        assert (
            "problem  sources: reading tonight's source rows failed: canceling statement due to statement"
            " timeout"
            in check.stdout
            and "raise statement_timeout" in check.stdout
        ), check.stdout
        err = one_line_error(dueflow_cli("run", "--as-of", AS_OF.isoformat(), env=env))
        assert "statement timeout" in err and "nothing was written" in err
        assert ledger_keys(url) == []

        # Fast sources, slow ledger writes: every stored message costs 40 ms; 300 ms per
        # statement still stores them all, in smaller statements.
        run_sql(
            url,
            "DROP VIEW contracts",
            "ALTER TABLE contracts_data RENAME TO contracts",
            "UPDATE contracts SET renewal_date = :renews",
            renews=RENEWS,
        )
        run_sql(
            url,
            "CREATE FUNCTION slow_store() RETURNS trigger LANGUAGE plpgsql AS"
            " 'BEGIN PERFORM pg_sleep(0.04); RETURN NEW; END'",
            "CREATE TRIGGER slow_store BEFORE UPDATE ON dueflow_ledger FOR EACH ROW"
            " WHEN (OLD.body_text IS NULL AND NEW.body_text IS NOT NULL) EXECUTE FUNCTION slow_store()",
        )
        run = dueflow_cli("run", "--as-of", AS_OF.isoformat(), env=env)
        assert run.returncode == 0, run.stdout + run.stderr
    assert len(smtp_sink.keys()) == 40 and len(ledger_keys(url)) == 40


def test_a_mapping_expression_failing_on_one_value_is_one_line_naming_it(
        schemas, dueflow_cli, mail_env, smtp_sink, tmp_path, prefect_server):
    """Issue 36: a CAST in a mapping that fails on one row failed the whole read with ~200
    traceback lines, on the terminal and in Prefect's logs, and said "see `dueflow check`".
    Now the night stops before any write with one line that names the expression and how to
    make it safe (the database does not say which row), and the run's log holds the same
    line and no traceback."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.sorting import LogSort
    from prefect.logging.handlers import APILogWorker

    url = url_for(schemas("cast"))
    seed_serial(url)
    db.init_db(db.engine_for(url))
    run_sql(url, "ALTER TABLE invoices ALTER COLUMN amount TYPE text",
            "INSERT INTO invoices (client_id, number, amount, currency, status, sent_at, due_date)"
            " VALUES (1, '2027-0043', 'n/a', 'EUR', 'sent', :sent, :due)",
            sent=f"{AS_OF - timedelta(days=8)} 10:00:00+00", due=AS_OF)
    mapping = tmp_path / "sources.toml"
    mapping.write_text('[invoices.columns]\namount = { sql = "CAST(amount AS numeric)" }\n')
    env = mail_env | {"DUEFLOW_DATABASE_URL": url, "DUEFLOW_SOURCES_FILE": str(mapping)}
    err = one_line_error(dueflow_cli("run", "--as-of", AS_OF.isoformat(), env=env))
    assert ("the mapping's amount (sql: CAST(amount AS numeric)) fails on a value of invoices: invalid input"
            ' syntax for type numeric: "n/a"') in err, err
    assert 'read it as invoices.amount = { sql = "CASE WHEN btrim(CAST(amount AS text)) ~ ' in err, err
    assert ledger_keys(url) == [] and smtp_sink.keys() == []
    APILogWorker.drain_all(timeout=10)
    with get_client(sync_client=True) as client:
        logs = [log.message for log in client.read_logs(limit=50, sort=LogSort.TIMESTAMP_DESC)]
    said = [message for message in logs if 'invalid input syntax for type numeric: "n/a"' in message]
    assert said and not any("Traceback" in message for message in said), said
