"""The mapping file (tasks/core/sources.py), the timestamps of the sources and the amounts in
minor units: pure, no database."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dueflow.tasks.adapters.sources import sources_read
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.money import amounts_from_minor, minor_units
from dueflow.tasks.core.sources import Expression, MappingError, parse_mapping
from dueflow.tasks.core.validate import business_dates
from tests import examples

GOOD = """
[invoices]
relation = "invoice"
schema = "billing"
[invoices.columns]
number = "invoice_no"
client_id = "customer_id"
amount_minor = "total_cents"
sent_at = { sql = "issued_on::timestamp" }
[invoices.values.status]
issued = "sent"
settled = "paid"
[clients.columns]
id = "customer_id"
[clients.values.dunning_paused]
Y = true
N = "false"
"""


def test_a_mapping_file_names_relations_columns_expressions_and_value_maps():
    mapping = parse_mapping(GOOD, "sources.toml")
    invoices = mapping.spec("invoices")
    assert (invoices.relation, invoices.schema) == ("invoice", "billing")
    assert invoices.origin("number") == "invoice_no" and invoices.origin("due_date") == "due_date"
    assert invoices.origin("sent_at") == Expression("issued_on::timestamp")
    assert invoices.values["status"] == {"issued": "sent", "settled": "paid"}
    assert mapping.spec("clients").values["dunning_paused"] == {"Y": "true", "N": "false"}
    assert mapping.spec("contracts").relation == "contracts"  # not mapped: dueflow's names


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[invoice]\nrelation = 'x'", "unknown source(s) invoice"),
        ("[invoices.columns]\nnumbr = 'n'", "[invoices.columns] numbr: not a column of invoices"),
        ("[invoices.values.status]\nissued = 'sended'", "'issued' maps to 'sended', which is not one of"),
        (
            "[clients.values.dunning_paused]\nY = 'maybe'",
            "clients.values.dunning_paused: 'Y' maps to 'maybe'",
        ),
        ("[invoices.values.number]\na = 'b'", "[invoices.values] number: only status take value maps"),
        ("[invoices.columns]\namount = 'a'\namount_minor = 'b'", "map either amount or amount_minor"),
        ("[invoices.columns]\nnumber = { sql = 'x; DROP TABLE y' }", "may not contain ';' or comments"),
        ("[invoices.columns]\nnumber = 42", "invoices.number: expected a column name"),
        ("[invoices]\nrelation = 'x'\ntable = 'y'", "unknown setting(s) table"),
        ("[invoices", "not valid TOML"),
    ],
)
def test_a_mapping_it_cannot_use_is_one_line_naming_file_source_and_column(text, says):
    with pytest.raises(MappingError) as refused:
        parse_mapping(text, "sources.toml")
    message = str(refused.value)
    assert message.startswith("sources.toml: ") and says in message and "\n" not in message


def test_timestamps_with_an_offset_are_converted_and_those_without_are_the_business_zones():
    values = pd.Series(
        [
            "2026-11-30 23:30:00+00",
            "2026-11-30 23:30:00",
            "2026-11-30",
            "2026-11-30T23:30:00Z",
            "0001-12-31 23:00:00+00 BC",
            "not a time",
            None,
        ],
        dtype=object,
    )
    dates = business_dates(values, "Europe/Madrid")
    assert [None if pd.isna(d) else d.date() for d in dates] == [
        date(2026, 12, 1),
        date(2026, 11, 30),
        date(2026, 11, 30),
        date(2026, 12, 1),
        None,
        None,
        None,
    ]


@given(
    st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2100, 1, 1)),
    st.sampled_from(["UTC", "Europe/Madrid", "America/New_York", "Asia/Tokyo", "Pacific/Chatham"]),
)
def test_a_timestamp_is_dated_in_the_business_zone_whichever_way_it_is_written(moment, zone):
    aware = moment.replace(tzinfo=ZoneInfo("UTC"))
    local = aware.astimezone(ZoneInfo(zone))
    written = pd.Series(
        [aware.isoformat(), local.isoformat(), local.replace(tzinfo=None).isoformat(sep=" ")], dtype=object
    )
    assert {d.date() for d in business_dates(written, zone)} == {local.date()}


def written_forms(moment: datetime, zone: str) -> list[str]:
    """One moment as a source may hold it: a date, naive timestamps (the zone's local time),
    and with offsets in every spelling ISO 8601 and PostgreSQL's text allow."""
    aware = moment.replace(tzinfo=ZoneInfo("UTC"))
    local = aware.astimezone(ZoneInfo(zone))
    offset = local.strftime("%z")  # +0100
    return [local.date().isoformat(), local.replace(tzinfo=None).isoformat(sep=" "),
            local.replace(tzinfo=None).isoformat(), aware.strftime("%Y-%m-%dT%H:%M:%SZ"),
            aware.strftime("%Y-%m-%d %H:%M:%S+00"), local.isoformat(),
            local.strftime("%Y-%m-%d %H:%M:%S") + offset, local.isoformat(timespec="microseconds")]


NOT_DATES = ["not a date", "2027-02-30", "2027-13-01T00:00:00Z", "31/01/2027", "", "  ",
             "2027-01-20T25:00:00", "2027-01-20T10:00:00+25:00", "0001-12-31 23:00:00+00 BC",
             "2027-01-20 UTC", "\x00", "9999999999",
             "2027-01-20T10:00:00Z garbage", "NaT", "null"]


@settings(max_examples=examples(200))
@given(
    st.lists(st.one_of(
        st.tuples(st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2100, 1, 1)),
                  st.integers(0, 7)),
        st.sampled_from(NOT_DATES), st.none(), st.text(max_size=30)), min_size=1, max_size=20),
    st.sampled_from(["UTC", "Europe/Madrid", "America/New_York", "Asia/Tokyo", "Pacific/Chatham"]),
)
def test_a_column_mixing_every_form_with_garbage_reads_each_value_as_it_reads_alone(items, zone):
    """issue 36: one offset among naive values stopped every reminder (a ValueError, then
    "Cannot compare tz-naive and tz-aware timestamps"). Read per value: a date for every
    accepted form — its date in the business zone — and NaT for the rest, whatever the others."""
    values, expected = [], []
    for item in items:
        if isinstance(item, tuple):
            moment, form = item
            values.append(written_forms(moment, zone)[form])
            expected.append(moment.replace(tzinfo=ZoneInfo("UTC")).astimezone(ZoneInfo(zone)).date())
        else:
            values.append(item)
            expected.append(None)
    column = business_dates(pd.Series(values, dtype=object), zone)
    assert pd.api.types.is_datetime64_dtype(column) and column.dt.tz is None  # naive, comparable
    alone = [business_dates(pd.Series([v], dtype=object), zone).iloc[0] for v in values]
    assert [None if pd.isna(d) else d for d in column] == [None if pd.isna(d) else d for d in alone]
    for value, want, got in zip(values, expected, column, strict=True):
        if want is not None:
            assert got.date() == want, value
        elif value in NOT_DATES or value is None:
            assert pd.isna(got), value


@given(st.integers(-(10**20), 10**20), st.sampled_from(["EUR", "JPY", "KWD", "USD", "BHD"]))
def test_minor_units_become_the_exact_amount(minor, currency):
    units = minor_units(currency)
    frame = pd.DataFrame({"amount_minor": [str(minor)], "currency": [currency], "amount": [None]})
    amount = amounts_from_minor(frame)["amount"].iloc[0]
    assert Decimal(amount) == Decimal(minor).scaleb(-units)
    assert len(amount.partition(".")[2]) == units


def test_minor_units_that_are_not_whole_numbers_are_left_for_the_amount_check():
    frame = pd.DataFrame(
        {
            "amount_minor": ["12.5", "abc", None, "100"],
            "currency": ["EUR", "EUR", "EUR", "XYZ"],
            "amount": [None] * 4,
        }
    )
    assert amounts_from_minor(frame)["amount"].tolist() == ["12.5", "abc", None, None]


def test_a_statement_reads_the_sources_it_names_outside_comments_and_literals():
    sql = (
        "-- contracts are not read here\nSELECT 'clients' FROM dueflow_ledger l\n"
        "JOIN invoices i ON i.id = l.subject_id"
    )
    assert sources_read(sql) == ["invoices"]
    assert sources_read("SELECT 1 FROM dueflow_ledger WHERE error = 'invoices paid'") == []
