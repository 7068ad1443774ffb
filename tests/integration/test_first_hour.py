"""The first hour on a company's own tables (issue 38), PostgreSQL and SQLite: `check`
before `init-db` checks the sources and says the ledger once; `init-db` exits 0 once its own
tables are right and says apart what the sources lack and the next command; both say which
dunning start holds, and `check --sources` counts the reminders that would go before their
due date."""

from __future__ import annotations

import os
from datetime import UTC, datetime

import pytest

from dueflow.flows.cli import main
from dueflow.tasks.adapters import db
from dueflow.tasks.check import check_database, check_settings, sources_report
from tests.helpers.company_schema import BEFORE_DUE, MAPPING, create_company


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.pg)])
def company_url(request) -> str:
    """The company's tables, dated from today (what `check` reads), and no ledger."""
    url = request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")
    create_company(url, night=datetime.now(UTC).date())
    return url


@pytest.fixture
def env(company_url, tmp_path, monkeypatch) -> dict[str, str]:
    """The environment of an operator's shell with the company's mapping file (nothing else
    of DUEFLOW_*, whatever the session set)."""
    mapping = tmp_path / "sources.toml"
    mapping.write_text(MAPPING, encoding="utf-8")
    for name in [n for n in os.environ if n.startswith("DUEFLOW_")]:
        monkeypatch.delenv(name)
    values = {"DUEFLOW_DATABASE_URL": company_url, "DUEFLOW_SOURCES_FILE": str(mapping),
              "DUEFLOW_MAIL_URL": f"file://{tmp_path / 'outbox'}", "DUEFLOW_MAIL_FROM": "ar@ours.example",
              "DUEFLOW_ESCALATION_TO": "collections@ours.example"}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


def checked(env: dict[str, str], **more: str) -> tuple[dict[str, str], list[str]]:
    """What `dueflow check --sources` says of the settings and the database: each item's
    line by its name, and the sources' report (the mail server and templates aside)."""
    checks, settings = check_settings(env | more)
    assert settings is not None
    return {r.item: r.line() for r in [*checks, *check_database(settings)]}, sources_report(settings)


def test_check_before_init_db_checks_the_sources_and_says_the_ledger_once(env, company_url):
    items, report = checked(env)
    assert items["ledger"].startswith("problem  ledger: dueflow's tables (the ledger) are not in this"
                                      " database: run `dueflow init-db`")
    assert "— fix:" not in items["ledger"]  # never "run init-db — fix: run init-db"
    assert items["sources"].startswith("ok       sources: read in")
    assert "2 contract(s), 4 open invoice(s), 3 client(s) tonight (DUEFLOW_SOURCES_FILE" in items["sources"]
    assert "no ledger yet: as a first night" in items["sources"]
    assert [line for line in items.values() if line.startswith("problem")] == [items["ledger"]]
    assert items["dunning start"].startswith("warning  dunning start: sent (the default): a first reminder"
                                             " counts from sent_at, so it may go before the due date")
    said = "\n".join(report)
    assert "no ledger yet: as a first night" in said and "    status       ← active" in said
    assert (f"  {BEFORE_DUE} reminder(s) would go out before their invoice's due date (counted from"
            " sent_at); DUEFLOW_DUNNING_START=due, or `dueflow run --dunning-start due`, counts from the due"
            " date") in report
    assert not db.has_ledger(db.engine_for(company_url))  # checking made nothing

    items, report = checked(env, DUEFLOW_DUNNING_START="due")
    assert items["dunning start"].startswith("ok       dunning start: due (DUEFLOW_DUNNING_START)")
    assert not [line for line in report if "before their invoice's due date" in line]


def test_init_db_exits_0_and_says_apart_what_the_sources_lack_and_what_to_run(env, company_url, capsys,
                                                                             monkeypatch):
    monkeypatch.delenv("DUEFLOW_SOURCES_FILE")  # a new install: no mapping yet
    assert main(["init-db"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert err == "" and lines[0].startswith("Ledger created in ")
    assert lines[1].startswith("Dunning start: sent (the default): a first reminder counts from sent_at, so"
                               " it may go before the due date; DUEFLOW_DUNNING_START=due counts from"
                               " due_date.")
    assert lines[2].startswith("Not ready for a run yet: dueflow's tables are right, the sources cannot be"
                               " read")
    assert [line.split(" in ")[0] for line in lines[3:6]] == [
        "  contracts: no table or view contracts", "  clients: no table or view clients",
        "  invoices: no table or view invoices"]
    assert lines[6].startswith("Next: `dueflow sources init")
    assert "--with-sample-tables" in lines[6] and len(lines) == 7

    monkeypatch.setenv("DUEFLOW_SOURCES_FILE", env["DUEFLOW_SOURCES_FILE"])
    assert main(["init-db"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("Ledger up to date in ") and len(lines) == 2  # the start is said once
    assert lines[1] == ("Ready: the ledger and the sources can be read. Next: `dueflow check --sources` shows"
                        " how each source is read, then `dueflow run --dry-run`.")

    broken = env["DUEFLOW_SOURCES_FILE"] + ".broken"
    with open(broken, "w", encoding="utf-8") as out_file:
        out_file.write(MAPPING.replace('due_date = "due_on"', 'due_date = "due_by"'))
    monkeypatch.setenv("DUEFLOW_SOURCES_FILE", broken)
    assert main(["init-db"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].startswith("  invoices: the mapping (invoices.due_date = 'due_by') names a column invoice"
                               " does not have") and lines[2].endswith("— fix: correct the mapping file")
    assert lines[3] == f"Next: correct DUEFLOW_SOURCES_FILE {broken} as said, then `dueflow check --sources`."
    assert "sample" not in "\n".join(lines)  # no sample tables for a user whose mapping is set


def test_invoices_says_a_client_paused_with_no_end_and_each_steps_outcome(env, company_url, capsys,
                                                                          monkeypatch):
    assert main(["init-db"]) == 0
    monkeypatch.setenv("DUEFLOW_GUARD", "off")
    assert main(["run"]) == 0  # reminders to the file outbox: steps in the ledger
    capsys.readouterr()
    assert main(["invoices", "--json"]) == 0
    import json

    states = {str(r["invoice_id"]): r for r in map(json.loads, capsys.readouterr().out.splitlines())}
    held = states["9000000005"]  # Held GmbH: on_hold true, no end
    assert (held["state"], held["held"]) == ("SENT", "client paused, no end")
    assert states["9000000001"]["held"] is None and states["9000000004"]["state"] == "PAID"
    reminded = states["9000000002"]  # its first reminder went tonight
    assert (reminded["state"], reminded["step_status"], reminded["what_to_do"]) == ("REMINDED_1", "sent", "")
    assert list(states["9000000001"])[5:9] == ["held", "state_as_of", "step_status", "what_to_do"]
    assert main(["invoices"]) == 0
    [line] = [x for x in capsys.readouterr().out.splitlines() if "9000000005" in x]
    assert "client paused, no end" in line
