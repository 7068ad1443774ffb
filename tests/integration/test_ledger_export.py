"""`dueflow ledger` as analysts want it, on SQLite and PostgreSQL: filters, the four formats
with the same types from both backends, files written whole or not at all, and streaming —
a large export holds one chunk in memory, not the ledger."""

from __future__ import annotations

import csv
import io
import json
import tracemalloc
from datetime import date

import pyarrow as pa
import pyarrow.parquet as pq
from sqlalchemy import text

from dueflow.tasks.adapters import db
from dueflow.tasks.ledger_export import COLUMNS, LedgerFilter, export, ledger_chunks

ROWS = [  # key, job, subject_id, cycle, step, step_rank, as_of, status, attempts, permanent
    ("renewal/c-1/2027-03-01/30d", "renewal", "c-1", "2027-03-01", "30d", 30, "2027-01-30", "sent", 1, False),
    ("renewal/c-2/2027-03-05/60d", "renewal", "c-2", "2027-03-05", "60d", 60, "2027-01-04", "adopted", 0,
     False),
    ("dunning/i-1/REMINDED_1", "dunning", "i-1", "", "REMINDED_1", 1, "2027-01-10", "failed", 3, True),
    ("dunning/i-2/REMINDED_1", "dunning", "i-2", "", "REMINDED_1", 1, "2027-02-01", "pending", 1, False),
    ("dunning/i-3/OVERDUE", "dunning", "i-3", "", "OVERDUE", 3, "2027-02-03", "sent", 1, False),
]


def fill(url: str) -> None:
    with db.engine_for(url).begin() as conn:
        for n, (key, job, sid, cycle, step, rank, as_of, status, attempts, permanent) in enumerate(ROWS):
            conn.execute(text(
                "INSERT INTO dueflow_ledger (key, job, subject_id, cycle, step, step_rank, as_of, status,"
                " attempts, permanent, recipient, subject, error, created_at, sent_at) VALUES (:key, :job,"
                " :sid, :cycle, :step, :rank, :as_of, :status, :attempts, :permanent, :recipient, :subject,"
                " :error, :created, :sent_at)"),
                {"key": key, "job": job, "sid": sid, "cycle": cycle, "step": step, "rank": rank,
                 "as_of": as_of, "status": status, "attempts": attempts, "permanent": permanent,
                 "recipient": f"{sid}@example.com", "subject": f"Sujet «{sid}», with a comma",
                 "error": "550 5.1.1 No such user" if status == "failed" else None,
                 "created": f"2027-01-0{n + 1} 06:00:0{n}+00:00",
                 "sent_at": f"{as_of} 06:01:00+00:00" if status == "sent" else None})


def test_filters_and_formats_agree_on_both_backends(db_url, dueflow_cli, tmp_path):
    fill(db_url)
    env = {"DUEFLOW_DATABASE_URL": db_url}

    table = dueflow_cli("ledger", env=env)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["as_of", "status", "what", "to", "do", "attempts", "key", "recipient",
                                "message_id", "permanent", "retry_after", "detail"]
    at = lines[0].index("key")
    assert [line[at:].split()[0] for line in lines[1:]] == [row[0] for row in ROWS]  # oldest first
    assert "550 5.1.1 No such user" in table.stdout

    as_json = dueflow_cli("ledger", "--format", "json", env=env)
    records = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [r["key"] for r in records] == [row[0] for row in ROWS]
    first = records[0]
    assert list(first) == list(COLUMNS)
    assert first["as_of"] == "2027-01-30" and first["step_rank"] == 30 and first["permanent"] is False
    assert first["created_at"] == "2027-01-01T06:00:00+00:00"
    assert first["sent_at"] == "2027-01-30T06:01:00+00:00"
    assert records[2]["permanent"] is True and records[2]["attempts"] == 3 and records[3]["sent_at"] is None
    assert dueflow_cli("ledger", "--json", env=env).stdout == as_json.stdout  # the old flag

    def keys(*args: str) -> list[str]:
        result = dueflow_cli("ledger", "--format", "json", *args, env=env)
        assert result.returncode == 0, result.stderr
        return [json.loads(line)["key"] for line in result.stdout.splitlines()]

    assert keys("--status", "adopted") == ["renewal/c-2/2027-03-05/60d"]
    assert keys("--job", "dunning", "--status", "sent") == ["dunning/i-3/OVERDUE"]
    assert keys("--since", "2027-01-10", "--until", "2027-02-01") == [
        "renewal/c-1/2027-03-01/30d", "dunning/i-1/REMINDED_1", "dunning/i-2/REMINDED_1"]
    assert keys("--limit", "2") == [row[0] for row in ROWS[:2]]
    assert keys("--job", "renewal", "--since", "2027-02-01") == []
    empty = dueflow_cli("ledger", "--status", "pending", "--job", "renewal", env=env)
    assert empty.stdout.strip() == "No ledger rows with job renewal, status pending."

    out_csv = tmp_path / "ledger.csv"
    written = dueflow_cli("ledger", "--format", "csv", "--output", str(out_csv), env=env)
    assert written.returncode == 0 and written.stdout == ""
    assert f"5 ledger row(s) written to {out_csv} (csv)" in written.stderr
    rows = list(csv.DictReader(io.StringIO(out_csv.read_text(encoding="utf-8"))))
    assert [r["key"] for r in rows] == [row[0] for row in ROWS]
    assert rows[0]["subject"] == "Sujet «c-1», with a comma" and rows[0]["created_at"] == first["created_at"]
    assert rows[0]["permanent"] == "False" and rows[1]["sent_at"] == ""

    out_parquet = tmp_path / "ledger.parquet"
    assert dueflow_cli("ledger", "--format", "parquet", "--output", str(out_parquet), env=env).returncode == 0
    parquet = pq.read_table(out_parquet)
    assert parquet.schema.field("as_of").type == pa.date32()
    assert parquet.schema.field("created_at").type == pa.timestamp("us", tz="UTC")
    assert parquet.schema.field("step_rank").type == pa.int64()
    assert parquet.schema.field("permanent").type == pa.bool_()
    assert parquet.column("key").to_pylist() == [row[0] for row in ROWS]
    assert parquet.column("as_of").to_pylist()[0] == date(2027, 1, 30)
    assert parquet.column("status").to_pylist() == [row[7] for row in ROWS]
    assert not list(tmp_path.glob("*.part"))


def test_bad_requests_are_one_line_and_leave_no_file(db_url, dueflow_cli, tmp_path):
    fill(db_url)
    env = {"DUEFLOW_DATABASE_URL": db_url}
    no_file = dueflow_cli("ledger", "--format", "parquet", env=env)
    assert no_file.returncode == 2 and "--format parquet writes a file: add --output FILE" in no_file.stderr
    missing_dir = tmp_path / "nowhere" / "ledger.csv"
    cannot = dueflow_cli("ledger", "--format", "csv", "--output", str(missing_dir), env=env)
    assert cannot.returncode == 2 and f"cannot write {missing_dir}" in cannot.stderr
    bad_date = dueflow_cli("ledger", "--since", "2027-02-30", env=env)
    assert bad_date.returncode == 2 and "invalid date '2027-02-30'" in bad_date.stderr
    assert dueflow_cli("ledger", "--status", "unknown", env=env).returncode == 2


def fill_many(url: str, count: int) -> None:
    """`count` ledger rows written by the database itself (fast on both backends)."""
    engine = db.engine_for(url)
    numbers = ("SELECT generate_series(1, :n) AS n" if engine.dialect.name == "postgresql" else
               "WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < :n) SELECT n FROM s")
    with engine.begin() as conn:
        conn.execute(text(
            f"INSERT INTO dueflow_ledger (key, job, subject_id, cycle, step, step_rank, as_of, status,"
            f" attempts, recipient, subject, smtp_response)"
            f" SELECT 'renewal/c-' || n || '/2027-03-01/30d', 'renewal', 'c-' || n, '2027-03-01', '30d', 30,"
            f" '2027-01-30', 'sent', 1, 'owner-' || n || '@example.com',"
            f" 'Renewal of contract number ' || n || ' with a subject of ordinary length',"
            f" '250 2.0.0 Ok: queued as ' || n FROM ({numbers}) AS numbers"), {"n": count})


def test_a_large_export_streams_in_bounded_memory(db_url, tmp_path):
    count = 8_000
    fill_many(db_url, count)
    engine = db.engine_for(db_url)
    sizes = [len(chunk) for chunk in ledger_chunks(engine, LedgerFilter(), chunk_rows=3_000)]
    assert sum(sizes) == count and max(sizes) <= 3_000 and len(sizes) == 3

    tracemalloc.start()
    try:
        rows = export(engine, LedgerFilter(), "csv", tmp_path / "big.csv", io.StringIO(), chunk_rows=1_000)
        _, streamed_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        whole = db.read_frame(engine, "SELECT * FROM dueflow_ledger", {})  # the pre-streaming way
        _, whole_peak = tracemalloc.get_traced_memory()
        del whole
    finally:
        tracemalloc.stop()
    assert rows == count
    assert sum(1 for _ in (tmp_path / "big.csv").open(encoding="utf-8")) == count + 1
    # One 1,000-row chunk at a time: a fraction of holding all 8,000 rows at once.
    assert streamed_peak < whole_peak / 4, (streamed_peak, whole_peak)
    assert streamed_peak < 25 * 2**20
