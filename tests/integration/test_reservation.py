"""Reservation races on real SQLite and PostgreSQL: threads and processes, each with
their own connection, reserve overlapping keys at the same moment."""

from __future__ import annotations

import multiprocessing as mp
from datetime import date
from itertools import pairwise

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from dueflow.sql import statement
from dueflow.tasks.adapters import db
from tests import examples
from tests.helpers.concurrency import race
from tests.helpers.factories import sourced

AS_OF = date(2027, 1, 1)
CYCLE = "2027-02-15"


def candidates(contract_ids: list[int], lead: int = 60) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "key": [f"renewal/c-{i}/{CYCLE}/{lead}d" for i in contract_ids],
            "subject_id": [f"c-{i}" for i in contract_ids],
            "cycle": CYCLE,
            "step": f"{lead}d",
            "step_rank": lead,
            "recipient": "owner@example.com",
        }
    )


def overlapping_sets(workers: int, keys: int) -> list[list[int]]:
    """Each worker takes a different, overlapping slice; every key is wanted by 3+ workers."""
    return [[k for k in range(keys) if (k + w) % 4 != 0] for w in range(workers)]


def _reserve_in_process(url: str, ids: list[int], barrier, out) -> None:
    out.put(sorted(_reserve(db.engine_for(url), ids, barrier)))


def _reserve(engine, ids: list[int], barrier) -> set[str]:
    with engine.connect() as conn:  # open the connection before the start line
        conn.execute(text("SELECT 1"))
    barrier.wait()
    return db.reserve(sourced(engine), "renewal", candidates(ids), AS_OF, flow_run_id=None)


def assert_exactly_one_winner(url: str, winners: list[list[str]], wanted: set[str]) -> None:
    flat = [key for won in winners for key in won]
    assert len(flat) == len(set(flat)), "a key has two winners"
    assert set(flat) == wanted, "a wanted key has no winner"
    ledger = db.ledger_rows(db.engine_for(url))
    assert sorted(ledger["key"]) == sorted(wanted)


def test_threads_race_for_overlapping_keys(db_url):
    sets = overlapping_sets(workers=8, keys=400)
    engine = db.engine_for(db_url)
    results = race(engine, [
        lambda ids=ids: sorted(db.reserve(sourced(engine), "renewal", candidates(ids), AS_OF, None))
        for ids in sets])
    wanted = {k for ids in sets for k in candidates(ids)["key"]}
    assert_exactly_one_winner(db_url, results, wanted)


def test_processes_race_for_overlapping_keys(db_url):
    ctx = mp.get_context("spawn")
    sets = overlapping_sets(workers=4, keys=2000)
    barrier, out = ctx.Barrier(len(sets)), ctx.Queue()
    procs = [ctx.Process(target=_reserve_in_process, args=(db_url, ids, barrier, out)) for ids in sets]
    for p in procs:
        p.start()
    winners = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    wanted = {k for ids in sets for k in candidates(ids)["key"]}
    assert_exactly_one_winner(db_url, winners, wanted)


def test_rereservation_wins_nothing(db_url):
    engine = db.engine_for(db_url)
    first = db.reserve(sourced(engine), "renewal", candidates(list(range(50))), AS_OF, None)
    again = db.reserve(sourced(engine), "renewal", candidates(list(range(60))), AS_OF, None)
    assert len(first) == 50
    assert again == set(candidates(list(range(50, 60)))["key"])


def test_one_pool_per_database_however_the_arguments_are_spelled(db_url):
    # Two pools for one URL would each keep their connections: a process that runs many
    # nights (tests, a served deployment) would exhaust PostgreSQL's max_connections.
    engine = db.engine_for(db_url)
    assert db.engine_for(db_url, db.DB_LOCK_TIMEOUT) is engine
    assert db.engine_for(db_url, lock_timeout=int(db.DB_LOCK_TIMEOUT)) is engine
    assert db.Database(db_url).engine is engine


def test_a_stale_run_cannot_reserve_a_less_urgent_lead(db_url):
    engine = db.engine_for(db_url)
    assert db.reserve(sourced(engine), "renewal", candidates([1, 2], lead=15), AS_OF, None)
    # A late run still thinking in 30d terms for contract 1 (and 3, untouched) loses c-1.
    won = db.reserve(sourced(engine), "renewal", candidates([1, 3], lead=30), AS_OF, None)
    assert won == {f"renewal/c-3/{CYCLE}/30d"}


@pytest.mark.pg
def test_stale_and_fresh_runs_racing_keep_the_lead_order(pg_url):
    """Two runs race: one reserves 15d, the other the (now stale) 30d, for the same
    contracts. Whatever the interleaving, no cycle ends with 30d after 15d."""
    db.init_db(db.engine_for(pg_url), sample_tables=True)
    engine = db.engine_for(pg_url)
    ids = list(range(300))
    urgent, _stale = race(engine, [
        lambda lead=lead: db.reserve(sourced(engine), "renewal", candidates(ids, lead=lead), AS_OF, None)
        for lead in (15, 30)])
    ledger = db.ledger_rows(engine)
    assert len(urgent) == len(ids)  # the urgent lead is never blocked
    by_contract = ledger.assign(contract=ledger["key"].str.split("/").str[1])
    for _, rows in by_contract.sort_values("created_at").groupby("contract"):
        leads = [int(k.split("/")[-1][:-1]) for k in rows["key"]]
        assert leads in ([15], [30, 15]), leads


@pytest.mark.pg
def test_after_a_large_reservation_per_key_updates_are_key_lookups(pg_url):
    """Regression: with statistics taken before a surge, settling each of N fresh pending
    rows scanned all N pending rows through a partial index on status (quadratic)."""
    engine = db.engine_for(pg_url)
    db.init_db(engine, sample_tables=True)
    # Earlier nights: a ledger of settled rows, analysed while nothing was pending.
    db.reserve(sourced(engine), "renewal", candidates(list(range(20_000)), lead=15), AS_OF, None,
               status="sent")
    with engine.connect() as conn:
        conn.execute(text("ANALYZE dueflow_ledger"))  # nothing pending in the statistics
        conn.commit()
    fresh = list(range(20_000, 21_500))
    won = db.reserve(sourced(engine), "renewal", candidates(fresh), AS_OF, None)
    assert len(won) == len(fresh)
    with engine.connect() as conn:
        plan = "\n".join(row[0] for row in conn.execute(text(
            "EXPLAIN UPDATE dueflow_ledger SET error = 'x' WHERE key = :k AND status = 'pending'"),
            {"k": sorted(won)[0]}))
    assert "Index Cond: (key = " in plan, plan  # a lookup by key, whichever index


def test_keys_with_awkward_characters_round_trip(db_url):
    engine = db.engine_for(db_url)
    ids = ['c"quoted"', "c\\back\\slash", "c,comma", "c{brace}", "c'single", "c NULL", "ñandú"]
    frame = pd.DataFrame({"key": [f"renewal/{i}/{CYCLE}/30d" for i in ids], "subject_id": ids,
                          "cycle": CYCLE, "step": "30d", "step_rank": 30, "recipient": "a@b.example",
                          "previous_by": None})
    assert db.reserve(sourced(engine), "renewal", frame, AS_OF, None) == set(frame["key"])
    assert sorted(db.ledger_rows(engine)["key"]) == sorted(frame["key"])


def test_stored_messages_round_trip_and_settled_rows_keep_theirs(db_url, monkeypatch):
    """store_messages writes each message onto its own pending row, byte for byte, across
    statement chunks; a row already settled is not overwritten, and neither is a message
    stored before (the first one stays: whoever sends the key sends the ledger's text)."""
    monkeypatch.setattr(db, "STORE_CHUNK", 3)  # several statements in one transaction
    engine = db.engine_for(db_url)
    ids = list(range(8))
    db.reserve(sourced(engine), "renewal", candidates(ids), AS_OF, None)
    keys = sorted(candidates(ids)["key"])
    with engine.begin() as conn:
        conn.execute(text("UPDATE dueflow_ledger SET status = 'sent' WHERE key = :k"), {"k": keys[0]})
    awkward = 'Dear "client", {x} \\ 100 € NULL, \'quoted\'\nline two\ttab'
    messages = [{"key": k, "recipient": f"owner{n}@example.com", "subject": f"Renewal {n}",
                 "body_text": f"{awkward} {n}", "body_html": None if n % 2 else f"<p>{awkward}</p>",
                 "message_id": f"<{n}@dueflow>", "draft_source": "llm" if n == 3 else None,
                 "draft_note": "firm" if n == 3 else None}
                for n, k in enumerate(keys)]
    db.store_messages(engine, messages)
    db.store_messages(engine, [m | {"subject": "a second rendering"} for m in messages])
    stored = db.read_frame(engine, "SELECT key, attempts, recipient, subject, body_text, body_html,"
                           " message_id, draft_source, draft_note FROM dueflow_ledger", {}
                           ).set_index("key")
    assert pd.isna(stored.loc[keys[0], "body_text"]) and stored.loc[keys[0], "attempts"] == 0
    for message in messages[1:]:
        row = stored.loc[message["key"]]
        for field in ("recipient", "subject", "body_text", "body_html", "message_id",
                      "draft_source", "draft_note"):
            assert (None if pd.isna(row[field]) else row[field]) == message[field], field
        assert row["attempts"] == 0  # counted when a delivery claims it


def test_array_literals_never_shift_values():
    """pg_array escapes the joined text at once; a value that could split it is refused,
    because a shifted array would pair one contract's key with another's recipient."""
    assert db.pg_array(['a"b', "c\\d", "x,y", "{z}", ""]) == r'{"a\"b","c\\d","x,y","{z}",""}'
    assert db.pg_array(["a", None, 3]) == '{"a",NULL,"3"}'
    assert db.pg_array([None, None]) == "{NULL,NULL}"
    assert db.pg_array([]) == "{}"
    with pytest.raises(ValueError, match="NUL"):
        db.pg_array(["one\x00two", "three"])


# Any text PostgreSQL can hold (no NUL, no lone surrogates), None, and the odd number.
ARRAY_VALUES = st.one_of(st.none(), st.integers(-10**6, 10**6),
                         st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")))


@pytest.mark.pg
@settings(max_examples=examples(150), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(ARRAY_VALUES, max_size=12))
def test_array_literals_carry_any_text_to_postgresql_unchanged(pg_url, values):
    """Every value arrives as its own element, byte for byte, whichever path pg_array took
    (all text joined as it is, or each value through str(), NULL for None)."""
    with db.engine_for(pg_url).connect() as conn:
        back = conn.execute(text("SELECT CAST(:a AS text[])"), {"a": db.pg_array(values)}).scalar_one()
    assert back == [None if v is None else str(v) for v in values]


def _chars(row: dict) -> int:
    return sum(len(row[f] or "") for f in ("subject", "body_text", "body_html"))


@settings(max_examples=examples(200), deadline=None)
@given(sizes=st.lists(st.integers(0, 120), max_size=40), max_rows=st.integers(1, 6),
       max_chars=st.integers(1, 200))
def test_store_batches_keep_every_message_in_order_within_both_bounds(sizes, max_rows, max_chars):
    rows = [{"key": f"k{n}", "subject": "s" * (size % 3), "body_text": "t" * size,
             "body_html": None if n % 2 else "h" * (size // 2)} for n, size in enumerate(sizes)]
    batches = list(db.store_batches(rows, max_rows, max_chars))
    assert [row for batch in batches for row in batch] == rows  # each once, in order
    for batch in batches:
        assert 1 <= len(batch) <= max_rows
        assert sum(map(_chars, batch)) <= max_chars or len(batch) == 1  # a message larger alone
    for batch, following in pairwise(batches):  # a batch ends only when it must
        assert len(batch) == max_rows or sum(map(_chars, batch)) + _chars(following[0]) > max_chars


@pytest.mark.pg
def test_many_messages_are_stored_with_fresh_statistics(pg_url):
    """A first night reserves tens of thousands of keys into a ledger the planner has never
    measured; storing their messages then joins 5,000 keys at a time against those rows.
    The statistics are refreshed first, so that the planner sees them (sql/analyze_ledger)."""
    engine = db.engine_for(pg_url)
    db.init_db(engine, sample_tables=True)

    def analysed() -> tuple[object, float]:
        with engine.connect() as conn:
            return conn.execute(text(
                "SELECT s.last_analyze, c.reltuples FROM pg_stat_user_tables s"
                " JOIN pg_class c ON c.oid = s.relid WHERE s.relid = 'dueflow_ledger'::regclass")).one()

    def messages(keys: set[str]) -> list[dict[str, str]]:
        return [{"key": k, "recipient": "a@corp.example", "subject": "s", "body_text": "t",
                 "body_html": "<p>t</p>", "message_id": f"<{n}@corp.example>"} for n, k in enumerate(keys)]

    few = db.reserve(sourced(engine), "renewal", candidates(list(range(50))), AS_OF, None)
    db.store_messages(engine, messages(few))
    assert analysed()[0] is None  # a small night leaves it to autovacuum
    many = db.reserve(sourced(engine), "renewal",
                      candidates(list(range(1_000, 1_000 + db.ANALYZE_BEFORE_STORING))),
                      AS_OF, None)
    db.store_messages(engine, messages(many))
    last_analyze, reltuples = analysed()
    assert last_analyze is not None and reltuples >= len(many)
    with engine.connect() as conn:
        stored = conn.execute(text("SELECT count(*) FROM dueflow_ledger WHERE body_text = 't'")).scalar_one()
    assert stored == len(few) + len(many)


@pytest.mark.pg
def test_a_large_reservation_probes_the_ledger_instead_of_scanning_it(pg_url):
    """Regression: given 100,000 candidates, the planner chose a merge anti join over the
    whole renewals index for the ordering check, 7 s instead of 0.4 on a ledger of 2.4
    million rows; on this small ledger, a hash anti join over a scan of all of it. The
    reservation probes the ledger by index, one candidate at a time."""
    engine = db.engine_for(pg_url)
    db.init_db(engine, sample_tables=True)
    db.reserve(sourced(engine), "renewal", candidates(list(range(30_000)), lead=15), AS_OF, None,
               status="sent")
    with engine.connect() as conn:
        conn.execute(text("ANALYZE dueflow_ledger"))
        conn.commit()
    arrays = db.reserve_arrays(db.candidate_columns(candidates(list(range(10_000, 40_000)))))
    with engine.connect() as conn:  # as db.reserve runs it, explained instead of executed
        conn.execute(text(statement("reserve_plan", "postgresql")))
        plan = "\n".join(row[0] for row in conn.execute(
            text("EXPLAIN " + statement("reserve_renewals", "postgresql")),
            arrays | {"as_of": AS_OF.isoformat(), "flow_run_id": None, "status": "pending"}))
    assert "Nested Loop Anti Join" in plan, plan
    assert "Index Only Scan using dueflow_ledger_renewals" in plan, plan
    assert "Merge" not in plan and "Hash" not in plan and "Seq Scan" not in plan, plan
