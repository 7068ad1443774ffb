"""dueflow's own tables as a long-lived asset: a ledger made by an earlier release (the schema
of commit 196539c, kept in tests/data, and an older one without the columns it added in
place) is upgraded in place by `init-db`, with every row in every status kept; the next
night decides exactly what it would have on a ledger made new with the same rows; `check`
and a run say when the ledger is behind, and a second upgrade changes nothing."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, timedelta
from pathlib import Path

import pytest
from sqlalchemy import inspect, text

from dueflow.blocks.errors import ConfigError
from dueflow.sql.migrations import HEAD
from dueflow.tasks.adapters import db
from dueflow.tasks.adapters.sql_store import sql_store
from dueflow.tasks.core.addresses import Mailbox
from dueflow.tasks.jobs import RenewalJob
from tests.conftest import pg_schema
from tests.helpers.factories import contract, insert, sourced

OLD_SCHEMA = Path(__file__).parent.parent / "data" / "schema_196539c.sql"
AS_OF = date(2027, 1, 10)
LEADS = (15, 30, 60)


def make_old_ledger(url: str, without_added_columns: bool = False) -> None:
    """What `dueflow init-db` of commit 196539c made (its sql/schema.sql, run as it ran it)."""
    engine = db.engine_for(url)
    script = re.sub(r"--[^\n]*", "", OLD_SCHEMA.read_text())
    if engine.dialect.name == "sqlite":
        script = re.sub(r"\bnumeric\b", "text", script)
    if without_added_columns:  # the first releases: no claim columns yet
        script = re.sub(
            r",\s*sending_at\s+timestamptz,\s*claim_token\s+text,\s*attempt_as_of\s+date", "", script
        )
    with engine.begin() as conn:
        for ddl in filter(None, (part.strip() for part in script.split(";"))):
            conn.exec_driver_sql(ddl)


LEDGER_ROWS = [  # a row in every status, claimed and unclaimed
    {
        "key": f"renewal/c1/{AS_OF + timedelta(days=20)}/30d",
        "subject_id": "c1",
        "cycle": str(AS_OF + timedelta(days=20)),
        "step": "30d",
        "step_rank": 30,
        "status": "sent",
    },
    {
        "key": f"renewal/c2/{AS_OF + timedelta(days=25)}/30d",
        "subject_id": "c2",
        "cycle": str(AS_OF + timedelta(days=25)),
        "step": "30d",
        "step_rank": 30,
        "status": "failed",
    },
    {
        "key": f"renewal/c3/{AS_OF + timedelta(days=14)}/15d",
        "subject_id": "c3",
        "cycle": str(AS_OF + timedelta(days=14)),
        "step": "15d",
        "step_rank": 15,
        "status": "pending",
        "sending_at": "2027-01-09 10:00:00+00:00",
    },
    {
        "key": f"renewal/c4/{AS_OF + timedelta(days=50)}/60d",
        "subject_id": "c4",
        "cycle": str(AS_OF + timedelta(days=50)),
        "step": "60d",
        "step_rank": 60,
        "status": "pending",
    },
    {
        "key": f"renewal/c5/{AS_OF + timedelta(days=45)}/60d",
        "subject_id": "c5",
        "cycle": str(AS_OF + timedelta(days=45)),
        "step": "60d",
        "step_rank": 60,
        "status": "adopted",
    },
]


def load_rows(url: str, claims: bool = True) -> None:
    with db.engine_for(url).begin() as conn:
        for row in LEDGER_ROWS:
            values = {
                "job": "renewal",
                "as_of": str(AS_OF - timedelta(days=1)),
                "recipient": "o@corp.example",
                "sending_at": None,
            } | row
            if not claims:
                values.pop("sending_at")
            columns = ", ".join(values)
            conn.execute(
                text(f"INSERT INTO dueflow_ledger ({columns}) VALUES ({', '.join(':' + c for c in values)})"),
                values,
            )
    insert(
        url,
        "contracts",
        [
            contract(f"c{n}", AS_OF + timedelta(days=d))
            for n, d in ((1, 20), (2, 25), (3, 14), (4, 50), (5, 45), (6, 29))
        ],
    )


def ledger(url: str) -> list[tuple]:
    with db.engine_for(url).connect() as conn:
        return sorted(
            tuple(row)
            for row in conn.execute(
                text("SELECT key, status, recipient, attempts, as_of FROM dueflow_ledger")
            )
        )


def tonight(url: str) -> tuple[list[str], list[str]]:
    database = sourced(url)
    job = RenewalJob(LEADS, "en", Mailbox("alerts@dueflow.test"))
    decision = job.decide(job.extract(sql_store(database), AS_OF), AS_OF)
    return sorted(decision.to_reserve["key"]), sorted(decision.due.loc[decision.due["handled"], "key"])


@contextmanager
def two_databases(backend: str, tmp_path: Path) -> Iterator[tuple[str, str]]:
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'old.db'}", f"sqlite:///{tmp_path / 'new.db'}"
        return
    with pg_schema() as old, pg_schema() as new:
        yield old, new


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.pg)])
def test_a_ledger_of_the_last_release_is_upgraded_in_place_and_decides_the_same_night(backend, tmp_path):
    with two_databases(backend, tmp_path) as (old, new):
        make_old_ledger(old)
        load_rows(old)
        engine = db.engine_for(old)
        assert db.ledger_problems(engine) == [
            "the ledger was made by an earlier dueflow: run `dueflow init-db`"
            " to upgrade it in place (its rows are kept)"
        ]
        before = ledger(old)

        version = db.init_db(engine)
        assert not version.behind and db.ledger_problems(engine) == []
        assert ledger(old) == before  # every row, every status

        db.init_db(db.engine_for(new), sample_tables=True)
        load_rows(new)
        assert tonight(old) == tonight(new)  # the next night decides what it would have

        again = db.init_db(engine)  # idempotent
        assert again == version and ledger(old) == before


def test_a_ledger_from_before_the_claim_columns_gains_them_with_its_rows(tmp_path):
    url = f"sqlite:///{tmp_path / 'older.db'}"
    make_old_ledger(url, without_added_columns=True)
    engine = db.engine_for(url)
    with engine.begin() as conn:  # and its one index for both jobs
        conn.execute(text("CREATE INDEX dueflow_ledger_subject ON dueflow_ledger (job, subject_id, cycle)"))
    load_rows(url, claims=False)
    before = ledger(url)
    db.init_db(engine)
    assert ledger(url) == before
    with engine.connect() as conn:
        columns = {row[1] for row in conn.exec_driver_sql("PRAGMA table_info(dueflow_ledger)")}
    assert {"sending_at", "claim_token", "attempt_as_of"} <= columns
    indexes = {index["name"] for index in inspect(engine).get_indexes("dueflow_ledger")}
    assert {"dueflow_ledger_renewals", "dueflow_ledger_dunning"} <= indexes
    assert "dueflow_ledger_subject" not in indexes


def test_a_run_and_check_say_when_the_ledger_is_behind(tmp_path, dueflow_cli):
    url = f"sqlite:///{tmp_path / 'old.db'}"
    make_old_ledger(url)
    load_rows(url)
    run = dueflow_cli("run", "--as-of", AS_OF.isoformat(), env={"DUEFLOW_DATABASE_URL": url})
    assert run.returncode == 2 and "run `dueflow init-db` to upgrade it in place" in run.stderr
    check = dueflow_cli("check", env={"DUEFLOW_DATABASE_URL": url})
    ledger = next(line for line in check.stdout.splitlines() if line.startswith("problem  ledger: "))
    assert ledger.endswith("run `dueflow init-db` to upgrade it in place (its rows are kept)")  # said once
    assert "ok       sources: read in" in check.stdout  # the sources are checked all the same
    upgrade = dueflow_cli("init-db", env={"DUEFLOW_DATABASE_URL": url})
    assert upgrade.returncode == 0, upgrade.stdout + upgrade.stderr
    assert "Ledger upgraded" in upgrade.stdout and "every row kept" in upgrade.stdout
    assert "Ready" in upgrade.stdout
    assert db.ledger_problems(db.engine_for(url)) == []


@contextmanager
def odd_ledger_schema() -> Iterator[tuple[str, str]]:
    """The session's PostgreSQL with a ledger schema named as a user may name one: mixed
    case, a space, a double quote."""
    from sqlalchemy import create_engine

    from tests.conftest import PG_URL, require_pg

    require_pg()
    schema = f'Ledger "{uuid.uuid4().hex[:6]}" x'
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    quoted = admin.dialect.identifier_preparer.quote_schema(schema)
    with admin.connect() as conn:
        conn.execute(text(f"CREATE SCHEMA {quoted}"))
    try:
        yield PG_URL, schema
    finally:
        db.engine_for(PG_URL, ledger_schema=schema).dispose()
        with admin.connect() as conn:
            conn.execute(text(f"DROP SCHEMA {quoted} CASCADE"))
        admin.dispose()


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.pg)])
def test_the_one_select_reading_of_the_version_agrees_with_alembic(backend, tmp_path):
    """A night reads the ledger's version with one SELECT (db._ledger_is_current) and loads
    Alembic only when it is not HEAD: the shortcut says current exactly when Alembic does,
    in a ledger schema of any name, and a ledger behind or ahead still gets its words."""
    with (odd_ledger_schema() if backend == "postgresql" else
          contextmanager(lambda: iter([(f"sqlite:///{tmp_path / 'v.db'}", None)]))()) as (url, schema):
        engine = db.engine_for(url, ledger_schema=schema)
        assert not db._ledger_is_current(engine)  # no ledger yet
        assert db.ledger_problems(engine) == [
            "dueflow's tables (the ledger) are not in this database: run `dueflow init-db`"]
        db.init_db(engine)
        assert db._ledger_is_current(engine) and not db.ledger_version(engine).behind
        assert db.ledger_problems(engine) == []
        for revision, words in (("0003", f"this dueflow needs {HEAD}"), ("0099", "newer than this dueflow")):
            with engine.begin() as conn:
                conn.execute(text("UPDATE dueflow_schema_version SET version_num = :v"), {"v": revision})
            assert not db._ledger_is_current(engine)
            (problem,) = db.ledger_problems(engine)
            assert f"the ledger is at version {revision}" in problem and words in problem


FREE_TEXT_ROWS = [  # rows of a release whose model wrote the paragraph (draft_source 'llm')
    ("dunning/i1/REMINDED_1", "pending", None, "llm"),  # never claimed: withdrawn
    ("dunning/i2/REMINDED_1", "pending", "2027-01-09 10:00:00+00:00", "llm"),  # claimed: kept
    ("dunning/i3/REMINDED_1", "sent", "2027-01-09 10:00:00+00:00", "llm"),  # its history
    ("dunning/i4/REMINDED_1", "pending", None, "template"),  # no model words: kept
]


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.pg)])
def test_upgrading_withdraws_free_text_a_model_wrote_from_rows_not_yet_handed_to_smtp(backend, tmp_path):
    """Migration 0005 (G7): a pending row no delivery claimed loses the message an earlier
    release stored with a model's own paragraph, so that it is rendered again and planned
    anew; what was sent or may have been handed to SMTP keeps its message as history."""
    from alembic import command

    with two_databases(backend, tmp_path) as (url, _):
        engine = db.engine_for(url)
        with db.writing(engine) as conn:
            schema = conn.exec_driver_sql("SELECT current_schema()").scalar() \
                if db.dialect(engine) == "postgresql" else None
            command.upgrade(db._alembic_config(conn, schema), "0004")
            for key, status, claimed, source in FREE_TEXT_ROWS:
                conn.execute(text(
                    "INSERT INTO dueflow_ledger (key, job, subject_id, cycle, step, step_rank, status,"
                    " as_of, recipient, sending_at, subject, body_text, body_html, paragraph,"
                    " draft_source) VALUES (:key, 'dunning', :id, '2027-01-01', 'REMINDED_1', 1,"
                    " :status, '2027-01-09', 'ap@client.example', :claimed, 'Invoice overdue',"
                    " 'Please pay our client instead.', '<p>Please pay our client instead.</p>',"
                    " 'Please pay our client instead.', :source)"),
                    {"key": key, "id": key.split("/")[1], "status": status, "claimed": claimed,
                     "source": source})
        assert db.ledger_version(engine).current == "0004"

        db.init_db(engine)
        with engine.connect() as conn:
            rows = {row.key: row for row in conn.execute(text(
                "SELECT key, status, subject, body_text, body_html, paragraph, draft_note, tone_plan,"
                " refused_answer FROM dueflow_ledger"))}
        withdrawn = rows["dunning/i1/REMINDED_1"]
        assert withdrawn.status == "pending"  # still owed: the next run renders it again
        assert (withdrawn.subject, withdrawn.body_text, withdrawn.body_html, withdrawn.paragraph) == (
            None, None, None, None)
        assert "withdrawn before sending" in withdrawn.draft_note
        for key in ("dunning/i2/REMINDED_1", "dunning/i3/REMINDED_1", "dunning/i4/REMINDED_1"):
            assert rows[key].body_text == "Please pay our client instead.", key
            assert rows[key].draft_note is None
        assert all(row.tone_plan is None and row.refused_answer is None for row in rows.values())
        assert len(rows) == len(FREE_TEXT_ROWS)  # every row kept


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.pg)])
def test_init_db_makes_the_message_id_secret_once_and_nothing_prints_it(backend, tmp_path, dueflow_cli):
    """Migration 0007: one secret per database, from the operating system's random source;
    a second init-db keeps it (Message-IDs of messages rendered again stay the same), and
    neither `check` nor the ledger's export shows it."""
    with two_databases(backend, tmp_path) as (url, other):
        engine = db.engine_for(url)
        db.init_db(engine, sample_tables=True)
        secret = db.message_id_key(engine)
        assert len(secret) == 64 and int(secret, 16) >= 0
        db.init_db(engine)
        assert db.message_id_key(engine) == secret
        with engine.begin() as conn:  # emptied by hand: the night says to run init-db, which makes one
            conn.exec_driver_sql("DELETE FROM dueflow_secrets")
        with pytest.raises(ConfigError, match="init-db"):
            db.message_id_key(engine)
        db.init_db(engine)
        secret = db.message_id_key(engine)
        assert len(secret) == 64
        db.init_db(db.engine_for(other))
        assert db.message_id_key(db.engine_for(other)) != secret  # each database its own
        env = {"DUEFLOW_DATABASE_URL": url, "DUEFLOW_MAIL_URL": f"file://{tmp_path / 'outbox'}"}
        for command in (("check",), ("ledger", "--format", "json"), ("init-db",)):
            shown = dueflow_cli(*command, env=env)
            assert secret not in shown.stdout + shown.stderr, command


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.pg)])
def test_migration_0008_gives_every_row_of_an_older_ledger_its_subject_form(backend, tmp_path):
    """Migration 0008 (issue 36, case 2): each row of a ledger made before it gets the form of
    its subject apart from spelling, so the first night after the upgrade already notices
    a source whose ids changed spelling (a company on numeric(10,2) ids, whose keys read
    `1.00`, now reads `1`: its first night stops and `dueflow rekey` settles it)."""
    from alembic import command

    spelled = {"renewal": ["c-7", " C-7", "0042"],
               "dunning": ["1.00", "000001", "2", "6F1C2B0E-93A4-4C55-9B1E-0D3C7A8E5F21"]}
    with two_databases(backend, tmp_path) as (url, _):
        engine = db.engine_for(url)
        with db.writing(engine) as conn:
            schema = conn.exec_driver_sql("SELECT current_schema()").scalar() \
                if db.dialect(engine) == "postgresql" else None
            command.upgrade(db._alembic_config(conn, schema), "0007")
            for job, ids in spelled.items():
                for subject_id in ids:
                    conn.execute(text(
                        "INSERT INTO dueflow_ledger (key, job, subject_id, cycle, step, step_rank, status,"
                        " as_of) VALUES (:key, :job, :id, '', 'REMINDED_1', 1, 'sent', '2027-01-09')"),
                        {"key": f"{job}/{subject_id}/x", "job": job, "id": subject_id})
        db.init_db(engine)
        with engine.connect() as conn:
            forms = {(r.job, r.subject_id): r.subject_form for r in conn.execute(text(
                "SELECT job, subject_id, subject_form FROM dueflow_ledger"))}
    assert forms == {("renewal", "c-7"): "c-7", ("renewal", " C-7"): "c-7", ("renewal", "0042"): "42",
                     ("dunning", "1.00"): "1", ("dunning", "000001"): "1", ("dunning", "2"): "2",
                     ("dunning", "6F1C2B0E-93A4-4C55-9B1E-0D3C7A8E5F21"): "6f1c2b0e93a44c559b1e0d3c7a8e5f21"}
