"""The settings' table (blocks/table.py) is the one place a setting is declared: the
environment, the blocks, `dueflow check`, the URL settings and the secrets are read from its
rows, every switch by the one on/off parser, and every default is its row's (issue 37)."""

from __future__ import annotations

import dataclasses
import re

import pytest

from dueflow.blocks import table
from dueflow.blocks.errors import ConfigError
from dueflow.blocks.parsers import OFF, ON, on_off
from dueflow.blocks.settings import Settings
from dueflow.blocks.table import EMAIL, SETTINGS, SettingsTable, carried_by
from dueflow.tasks.core import defaults

SWITCHES = [row for row in SETTINGS if row.parse is on_off]


def test_each_variable_is_one_row_and_each_row_a_setting():
    variables = [row.variable for row in SETTINGS if row.variable]
    assert len(variables) == len(set(variables)) > 40
    assert {f.name for f in dataclasses.fields(Settings)} == {row.field for row in SETTINGS}
    assert {"DUEFLOW_RUN_LOCK", "DUEFLOW_ALLOW_ANY_AS_OF", "DUEFLOW_RENEWAL_ON_ANY_DAY"} <= {
        row.variable for row in SWITCHES}


def test_an_empty_environment_is_every_row_s_default():
    read = Settings.from_env({})
    assert {row.field: getattr(read, row.field) for row in SETTINGS} == {
        row.field: row.default for row in SETTINGS}
    assert dataclasses.astuple(read) == dataclasses.astuple(SettingsTable())
    assert read.llm is None and read.llm_model == defaults.DEFAULT_MODEL


@pytest.mark.parametrize("row", SWITCHES, ids=lambda row: row.variable)
def test_every_switch_reads_the_same_words_and_refuses_any_other_in_one_line(row):
    for word in ON + tuple(w.upper() for w in ON) + (" on ",):
        assert getattr(Settings.from_env({row.variable: word}), row.field) is True
    for word in OFF:
        assert getattr(Settings.from_env({row.variable: word}), row.field) is False
    for typo in ("maybe", "of", "enabled", "2", "on\nBcc: x"):
        with pytest.raises(ConfigError) as refused:
            Settings.from_env({row.variable: typo})
        message = str(refused.value)
        assert message.startswith(f"{row.variable}=") and "\n" not in message
        assert message.endswith("is not on or off: write one of on, true, yes, 1, off, false, no, 0")


def test_a_url_option_that_is_a_switch_is_read_by_the_same_parser():
    from dueflow.blocks.endpoints import parse_bounce_url, parse_mail_url

    assert parse_mail_url("smtps://relay.example?verify=off").verify is False
    assert parse_bounce_url("imaps://u:p@mail.example/INBOX?verify=0").verify is False  # was on
    assert parse_bounce_url("maildir:///m?delete=on").processed == "delete"
    for url in ("smtps://relay.example?verify=maybe", "maildir:///m?delete=yse",
                "imaps://u:p@mail.example/INBOX?verify=nope"):
        with pytest.raises(ConfigError, match="is not on or off"):
            (parse_mail_url if url.startswith("smtp") else parse_bounce_url)(url)


def test_dueflow_check_tries_every_variable_of_the_table():
    from dueflow.tasks.check import check_settings

    for row in SWITCHES:
        problems, settings = check_settings({row.variable: "maybe"})
        assert settings is None and [p.item for p in problems] == [f"setting {row.variable}"]


def test_the_blocks_carry_the_rows_that_name_them(monkeypatch):
    """Each block type's fields are its rows; a block loaded gives each of them, and an
    emails' block field is a row of the table and nothing more."""
    from pydantic import SecretStr

    from dueflow.blocks import prefect_blocks
    from dueflow.blocks import settings as settings_module

    for kind in table.BLOCK_TYPES:
        if not kind.module:
            block = getattr(prefect_blocks, kind.name)
            assert set(block.model_fields) == {row.block_field for row in carried_by(kind)}
            assert block.get_block_type_name() == kind.title
            for row in carried_by(kind):
                assert (block.model_fields[row.block_field].annotation in (SecretStr, SecretStr | None)) \
                    == row.secret
    assert prefect_blocks.DueflowLLM(api_key=SecretStr("k")).model == defaults.DEFAULT_MODEL
    given = {"mail_from": "ar@acme.example", "reply_to": "replies@acme.example",
             "escalation_to": "c@acme.example", "bcc": "archive@acme.example", "company_name": "Acme",
             "invoice_pdf": "/srv/acme/{number}.pdf", "payment_link": "https://pay.acme.example/{number}",
             "signature": "Acme AR", "payment_instructions": "IBAN …", "contract_contact": "Procurement",
             "mail_from_name": "Acme Finance"}
    monkeypatch.setattr(settings_module, "load_block",
                        lambda _cls, _name: prefect_blocks.DueflowEmail(**given))
    loaded = Settings.from_env({"DUEFLOW_EMAIL_BLOCK": "acme", "DUEFLOW_COMPANY_NAME": "Env Co",
                                "DUEFLOW_TEMPLATES_DIR": "/env/templates"}).with_blocks()
    assert set(given) < {row.field for row in carried_by(EMAIL)}
    assert {name: getattr(loaded, name) for name in given} == given
    assert loaded.templates_dir == "/env/templates"  # a field left empty keeps the variable


def test_the_secrets_of_the_settings_are_the_rows_marked_secret():
    from dueflow.blocks.urls import secrets_of

    env = {"OPENAI_API_KEY": "sk-table-key", "DUEFLOW_DATABASE_URL": "postgresql://u:pa%40ss@db/x",
           "DUEFLOW_BOUNCE_URL": "imaps://b:imap-pw@mail.example/INBOX", "DUEFLOW_COMPANY_NAME": "Acme"}
    found = secrets_of(env)
    assert {"sk-table-key", "pa@ss", "pa%40ss", "imap-pw"} <= set(found) and "Acme" not in found
    assert set(Settings.from_env(env).secrets()) == set(found)
    assert "sk-table-key" not in repr(Settings.from_env(env))


def test_a_parameter_that_is_a_setting_too_has_one_reading():
    """A switch is on for a run when its variable or the run's parameter is on (the
    variable on holds for every run); a block's name given as a parameter wins over its
    variable, and an empty one keeps it. A value of the wrong kind is refused even when the
    variable would allow the run."""
    assert list(table.PARAMETERS) == ["email_block", "renewal_on_any_day", "dunning_start", "allow_any_as_of"]
    off, on = Settings.from_env({}), Settings.from_env({"DUEFLOW_ALLOW_ANY_AS_OF": "on"})
    allowed = [s.with_parameters(allow_any_as_of=p).allow_any_as_of for s in (off, on) for p in (False, True)]
    assert allowed == [False, True, True, True]
    assert off.with_parameters(renewal_on_any_day=True).renewal_on_any_day is True
    for wrong in ("yes", 1, None):
        with pytest.raises(ConfigError, match="parameter allow_any_as_of: true or false"):
            on.with_parameters(allow_any_as_of=wrong)
    named = Settings.from_env({"DUEFLOW_EMAIL_BLOCK": "env-block"})
    assert named.with_parameters(email_block=" acme ").email_block == "acme"
    assert named.with_parameters(email_block="").email_block == "env-block"
    assert named.with_parameters(email_block=None).email_block == "env-block"


def test_the_dunning_start_has_one_reading_of_its_three_places():
    """DUEFLOW_DUNNING_START for every run (default `sent`), the run's `dunning_start`
    parameter over it when given, and a profile's `start` over both for its clients; a
    profile that says none counts from the run's."""
    from dueflow.tasks.jobs import dunning_rules

    default, due = Settings.from_env({}), Settings.from_env({"DUEFLOW_DUNNING_START": " Due "})
    assert (default.dunning_start, due.dunning_start) == ("sent", "due")
    assert [due.with_parameters(dunning_start=p).dunning_start for p in ("", None, "sent", "due")] == [
        "due", "due", "sent", "due"]
    for wrong in ("paid", 1, "SENT"):
        with pytest.raises(ConfigError, match=r"^parameter dunning_start: 'sent' or 'due', got"):
            due.with_parameters(dunning_start=wrong)
    with pytest.raises(ConfigError, match=r"^DUEFLOW_DUNNING_START='paid' is not one of sent, due$"):
        Settings.from_env({"DUEFLOW_DUNNING_START": "paid"})
    run = dataclasses.replace(due, profiles_block="team", profiles_text="[profiles.own]\nstart = 'sent'\n"
                              "[profiles.same]\ndelays = [1, 2, 3]\n")  # as a DueflowProfiles block gives it
    starts = dunning_rules(run, (7, 5, 7), run.dunning_start, "calendar", None).profiles.frame()["start"]
    assert starts.to_dict() == {"": "due", "own": "sent", "same": "due"}


def test_the_tables_of_the_configuration_docs_are_made_from_the_table():
    doc = table.DOCS.read_text(encoding="utf-8")
    assert re.findall(r"<!-- settings: (\w+) ", doc) == list(table.GROUPS)
    assert [row.variable for row in SETTINGS if row.variable and not row.group] == []  # each is documented
    assert table.with_docs_tables(doc) == doc, "docs/configuration.md: run `python -m dueflow.blocks.table`"
    assert "| `DUEFLOW_LLM_MODEL` | the model | `gpt-4o-mini` |" in doc
    edited = doc.replace("| `DUEFLOW_LLM_MODEL` | the model |", "| `DUEFLOW_LLM_MODEL` | the model to use |")
    assert table.with_docs_tables(edited) == doc  # a table edited by hand is made anew


# The test suite's own variables (docs/configuration.md, "For the test suite"), not settings.
TEST_VARIABLES = {"DUEFLOW_TEST_PG_URL", "DUEFLOW_REQUIRE_PG", "DUEFLOW_REQUIRE_MTA", "DUEFLOW_TEST_DEPTH",
                  "DUEFLOW_SCREENSHOTS_DIR", "DUEFLOW_PROJECT_DIR"}


def test_every_variable_named_anywhere_is_a_row_of_the_table():
    """A variable named in the docs, the code or the tests that the table does not have is
    a typo or a setting nobody reads."""
    root = table.DOCS.parents[1]
    files = [root / "README.md", *(root / "docs").glob("*.md")]
    for folder in ("blocks", "flows", "tasks", "deployments", "bench", "tests"):
        files += (root / folder).rglob("*.py")
    variable = re.compile(r"\b(?:DUEFLOW|OPENAI)_[A-Z0-9_]*[A-Z0-9]\b")
    named = {name for path in files for name in variable.findall(path.read_text(encoding="utf-8"))}
    assert len(files) > 100 and "DUEFLOW_RUN_LOCK" in named
    assert named - set(table.VARIABLES) - TEST_VARIABLES == set()
