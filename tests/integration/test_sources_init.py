"""`dueflow sources init` (issue 38) on the company's own tables, PostgreSQL and SQLite: the
draft it proposes is read by the check as it stands — the night it decides is the night the
hand-written mapping decides — and what it could not guess is a TODO the check then names."""

from __future__ import annotations

import tomllib

import pytest
from sqlalchemy import text

from dueflow.blocks.settings import Settings
from dueflow.flows.cli import main
from dueflow.tasks.adapters import db
from dueflow.tasks.adapters.sources import SourceError
from dueflow.tasks.core.sources import parse_mapping
from dueflow.tasks.operations import draft_mapping
from tests.helpers.company_schema import DUE_BY_START, MAPPING, RENEWALS, create_company, schema_of
from tests.integration.test_mapping_friction import night


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.pg)])
def company_url(request) -> str:
    url = request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")
    create_company(url)
    return url


def settings_of(url: str) -> Settings:
    return Settings.from_env({"DUEFLOW_DATABASE_URL": url})


def test_the_draft_of_the_issue_s_tables_reads_the_night_the_hand_mapping_reads(company_url):
    draft = draft_mapping(settings_of(company_url), schema_of(company_url))
    assert draft.chosen == {"contracts": "agreement", "clients": "customer", "invoices": "invoice"}
    assert draft.todo == 0, draft.text
    data, hand = tomllib.loads(draft.text), tomllib.loads(MAPPING)
    for source in ("contracts", "clients", "invoices"):  # the same columns (a name that is dueflow's aside)
        assert {k: v for k, v in data[source]["columns"].items() if k != v} == hand[source]["columns"]
    assert data["invoices"]["values"]["status"] == {"issued": "sent", "settled": "paid"}  # the words seen
    assert data["contracts"]["values"]["status"] == {"true": "active", "false": "cancelled"}
    assert "# notes = " in draft.text  # optional, not found: said, not required
    for start, dunned in DUE_BY_START.items():
        assert night(company_url, draft.text, start) == (RENEWALS | dunned, {})


def test_what_it_cannot_guess_is_a_todo_and_the_check_names_it(company_url):
    engine = db.engine_for(company_url)
    with engine.begin() as conn:
        conn.execute(text("ALTER TABLE invoice RENAME COLUMN due_on TO zahlbar_bis"))
        conn.execute(text("ALTER TABLE agreement RENAME TO lieferanten"))
        conn.execute(text("UPDATE invoice SET state = 'strittig' WHERE invoice_id = 9000000005"))
    draft = draft_mapping(settings_of(company_url), schema_of(company_url))
    assert draft.chosen == {"contracts": None, "clients": "customer", "invoices": "invoice"}
    lines = draft.text.splitlines()
    assert any(line.startswith('# TODO due_date = "…"  # required: its due date; columns not used:')
               and "zahlbar_bis" in line for line in lines), draft.text
    assert any(line.startswith("# TODO [contracts]: no table or view is named like it")
               and "lieferanten" in line for line in lines)
    assert '# TODO "strittig" = "…"' in lines
    assert draft.todo == 3
    with pytest.raises(SourceError) as refused:
        db.Database(company_url).with_sources(parse_mapping(draft.text, "the draft"), None, "UTC")
    said = {p.source: p.detail for p in refused.value.problems}
    assert said["invoices"] == "invoice has no column(s) due_date"
    assert said["contracts"].startswith("no table or view contracts in ")
    assert "--with-sample-tables" not in " ".join(p.fix for p in refused.value.problems)  # a mapping is set


@pytest.mark.pg
def test_a_date_kept_as_text_is_drafted_with_its_null_safe_reading(pg_url):
    create_company(pg_url, due_on_type="text")
    draft = draft_mapping(settings_of(pg_url), schema_of(pg_url))
    assert tomllib.loads(draft.text)["invoices"]["columns"]["due_date"]["sql"].startswith(
        "CASE WHEN btrim(due_on) ~ '^")
    assert night(pg_url, draft.text, "due") == (RENEWALS | DUE_BY_START["due"], {})


def test_the_command_writes_a_new_file_or_stdout_and_never_overwrites(company_url, tmp_path, monkeypatch,
                                                                       capsys):
    monkeypatch.setenv("DUEFLOW_DATABASE_URL", company_url)
    schema = ["--schema", schema_of(company_url)] if "postgresql" in company_url else []
    target = tmp_path / "sources.toml"
    assert main(["sources", "init", *schema, "--output", str(target)]) == 0
    out, _ = capsys.readouterr()
    assert out.splitlines() == [
        f"{target}: drafted from the tables of {'schema ' + schema[1] if schema else 'the database'}:"
        " contracts ← agreement, clients ← customer, invoices ← invoice.",
        f"Next: read it, then DUEFLOW_SOURCES_FILE={target} and `dueflow check --sources`."]
    written = target.read_text(encoding="utf-8")
    assert main(["sources", "init", *schema, "--output", str(target)]) == 2
    _, err = capsys.readouterr()
    assert err == f"dueflow: error: {target} exists: nothing written (name another file)\n"
    assert target.read_text(encoding="utf-8") == written
    assert main(["sources", "init", *schema]) == 0
    out, err = capsys.readouterr()
    assert out == written and err.startswith("dueflow: drafted from the tables of")
