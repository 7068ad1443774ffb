"""Mapping a company's own tables without friction (issue 38), on PostgreSQL and SQLite, on
tables shaped as the issue found them (tests/helpers/company_schema.py): a value map applies
whatever the column's type (a boolean state mapped `true = "active"`), an optional column is
optional (`clients.notes`), and every expression dueflow proposes for a column of another
type reads it without ever failing the night: a value it cannot read is NULL, its row is
quarantined with the reason, every other row goes."""

from __future__ import annotations

from datetime import date

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from dueflow.blocks.settings import Settings
from dueflow.tasks.adapters import db
from dueflow.tasks.adapters.sources import SourceError, failing_expressions
from dueflow.tasks.check import night_store
from dueflow.tasks.core.casts import ISO_DATE, safe_cast
from dueflow.tasks.core.parameters import default_parameters
from dueflow.tasks.core.sources import parse_mapping
from dueflow.tasks.jobs import night_jobs
from tests.conftest import PG_URL, require_pg
from tests.helpers.company_schema import AS_OF, DUE_BY_START, MAPPING, RENEWALS, create_company


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.pg)])
def company_url(request) -> str:
    """An empty database of either kind, no ledger, no sample tables."""
    return request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")


def night(url: str, mapping: str, start: str = "sent") -> tuple[set[str], dict[str, str]]:
    """The keys a first night on AS_OF would reserve through the real extract and rules, and
    the rows it would quarantine (source id: reason)."""
    settings = Settings.from_env({"DUEFLOW_DATABASE_URL": url, "DUEFLOW_ESCALATION_TO": "c@ours.example"})
    database = db.Database(url).with_sources(parse_mapping(mapping, "the mapping"), None, "UTC")
    renewal, dunning = night_jobs(settings, default_parameters(start))
    store = night_store(database, ledger=False)
    decisions = [renewal.decide(renewal.extract(store, AS_OF), AS_OF),
                 dunning.decide(type(dunning).extract_all(store), AS_OF)]
    return ({key for d in decisions for key in d.to_reserve["key"]},
            {row.source_id: row.reason for d in decisions for row in d.quarantined.itertuples()})


def test_a_boolean_state_is_read_through_its_value_map_and_notes_are_optional(company_url):
    create_company(company_url)
    for start, dunned in DUE_BY_START.items():
        keys, quarantined = night(company_url, MAPPING, start)
        assert keys == RENEWALS | dunned and quarantined == {}  # contract 2 (false) is cancelled
    spelled = MAPPING.replace("true = \"active\"\nfalse", "yes = \"active\"\n0")  # any word of a boolean
    assert night(company_url, spelled)[0] == RENEWALS | DUE_BY_START["sent"]
    unmapped = MAPPING.replace('[contracts.values.status]\ntrue = "active"\nfalse = "cancelled"\n', "")
    if "postgresql" in company_url:  # a boolean status without a map: the fix is the map, not a CAST
        with pytest.raises(SourceError) as refused:
            night(company_url, unmapped)
        assert [p.fix for p in refused.value.problems] == [
            'map its values in the mapping file: [contracts.values] status = { true = "active", false ='
            ' "cancelled" } (each one of active, cancelled)']
    else:  # SQLite keeps it as 1 and 0: unknown statuses, each contract quarantined with the reason
        keys, quarantined = night(company_url, unmapped)
        assert keys == DUE_BY_START["sent"] and sorted(quarantined) == ["1", "2", "3"], quarantined


def test_an_integer_status_code_takes_a_value_map_of_its_numbers(company_url):
    create_company(company_url)
    with db.engine_for(company_url).begin() as conn:
        conn.execute(text("CREATE TABLE agreement_codes AS SELECT agreement_id, supplier, description,"
                          " fee_cents, currency, renews_on, owner_email,"
                          " CASE WHEN active THEN 7 ELSE 9 END AS state_code FROM agreement"))
    coded = MAPPING.replace('relation = "agreement"', 'relation = "agreement_codes"').replace(
        'status = "active"', 'status = "state_code"').replace('true = "active"\nfalse = "cancelled"',
                                                               '7 = "active"\n9 = "cancelled"')
    assert night(company_url, coded)[0] == RENEWALS | DUE_BY_START["sent"]


@pytest.mark.pg
def test_a_date_kept_as_text_gets_a_hint_that_reads_it_and_quarantines_only_the_bad_row(pg_url):
    """The hint is the expression to paste: with it, the one invoice whose due date is not
    a day that exists is quarantined with the reason and every other row goes."""
    import tomllib

    create_company(pg_url, due_on_type="text")
    with db.engine_for(pg_url).begin() as conn:
        conn.execute(text("UPDATE invoice SET due_on = '2027-02-30' WHERE invoice_id = 9000000003"))
    with pytest.raises(SourceError) as refused:
        night(pg_url, MAPPING)
    (problem,) = refused.value.problems
    assert problem.detail == "due_date is text in invoice; dueflow reads a date (or a timestamp)"
    assert problem.fix.startswith("read it in the mapping file as [invoices.columns] due_date = { sql = ")
    pasted = problem.fix.removeprefix("read it in the mapping file as [invoices.columns] ").split(" (NULL")[0]
    assert tomllib.loads(pasted)["due_date"]["sql"].startswith("CASE WHEN btrim(due_on) ~ '^")
    mapping = MAPPING.replace('due_date = "due_on"', pasted)
    keys, quarantined = night(pg_url, mapping, "due")
    assert keys == RENEWALS | DUE_BY_START["due"]
    assert quarantined == {"9000000003": "due_date missing or not a valid date"}


@pytest.mark.pg
def test_a_failing_cast_of_the_mapping_is_answered_with_its_null_safe_form(pg_url):
    create_company(pg_url, due_on_type="text")
    with db.engine_for(pg_url).begin() as conn:
        conn.execute(text("UPDATE invoice SET due_on = 'soon' WHERE invoice_id = 9000000003"))
    mapping = MAPPING.replace('due_date = "due_on"', 'due_date = { sql = "CAST(due_on AS date)" }')
    with pytest.raises(Exception, match="invalid input syntax for type date"):
        night(pg_url, mapping)  # one row stops every reminder: what failing_expressions explains
    database = db.Database(pg_url).with_sources(parse_mapping(mapping, "m"), None, "UTC")
    assert database.sources is not None
    (problem,) = failing_expressions(database.engine, database.sources)
    safe = safe_cast("CAST(due_on AS date)")
    assert safe is not None and problem.fix.startswith(f'read it as invoices.due_date = {{ sql = "{safe}" }}')
    keys, quarantined = night(pg_url, mapping.replace("CAST(due_on AS date)", safe), "due")
    assert keys == RENEWALS | DUE_BY_START["due"] and list(quarantined) == ["9000000003"]


def texts() -> st.SearchStrategy[str]:
    """Text a date column kept as text holds: real dates, impossible ones, other shapes."""
    dates = st.dates(date(1, 1, 1), date(9999, 12, 31)).map(date.isoformat)
    near = st.builds(lambda y, m, d: f"{y:04d}-{m:02d}-{d:02d}", st.integers(0, 10000), st.integers(0, 13),
                     st.integers(0, 32))
    return st.one_of(dates, near, st.text(alphabet="0123456789-./ T:+e", max_size=14),
                     dates.map(lambda d: f" {d} "))


@pytest.mark.pg
@settings(max_examples=30)
@given(values=st.lists(texts(), min_size=1, max_size=60))
def test_the_null_safe_date_never_fails_and_reads_every_day_that_exists(values):
    require_pg()
    safe = safe_cast("CAST(v AS date)")
    engine = db.engine_for(PG_URL)
    with engine.connect() as conn:  # one statement over them all: a single failing value would fail it
        read = dict(conn.execute(text(f"SELECT v, {safe} FROM unnest(CAST(:values AS text[])) AS v"),
                                 {"values": values}).all())
    for value in values:
        try:
            expected = date.fromisoformat(value.strip()) if len(value.strip()) == 10 else None
        except ValueError:
            expected = None
        assert read[value] == expected, value
    assert "\\" not in ISO_DATE and '"' not in ISO_DATE  # pasted into a TOML string as it is


def test_a_value_map_leaves_text_that_only_looks_like_a_boolean_as_written(company_url):
    """On a text column, `1` is a word like any other: a key `true` does not take it."""
    create_company(company_url)
    with db.engine_for(company_url).begin() as conn:
        conn.execute(text("UPDATE invoice SET state = '1' WHERE invoice_id = 9000000001"))
    mapping = MAPPING.replace('issued = "sent"', 'issued = "sent"\ntrue = "void"')
    keys, quarantined = night(company_url, mapping)
    assert "dunning/9000000001/REMINDED_1" not in keys and "9000000001" in quarantined
    assert keys == RENEWALS | DUE_BY_START["sent"] - {"dunning/9000000001/REMINDED_1"}
