"""The ledger where analysts want it: `dueflow ledger` as a table, CSV, JSON lines or Parquet.

Rows stream from the database a chunk at a time (`db.stream_frames`: a server-side cursor
on PostgreSQL) and each chunk is written before the next is read, so exporting two million
rows holds one chunk in memory, not two million rows. Every chunk is given the same types
on both backends (SQLite hands back text for dates and timestamps, PostgreSQL Python
objects): dates as dates, timestamps in UTC, counts as integers, `permanent` as a boolean —
so a CSV, JSON or Parquet file says the same thing whichever database it came from.
"""

from __future__ import annotations

import csv
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import IO, Any, Literal

import numpy as np
from sqlalchemy import Engine

from dueflow.sql import statement
from dueflow.tasks.adapters import db
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.statuses import LedgerStatus
from dueflow.tasks.core.vocabulary import ledger_outcomes, todos, when_text

Format = Literal["table", "csv", "json", "parquet"]
FORMATS: tuple[Format, ...] = ("table", "csv", "json", "parquet")
CHUNK_ROWS = 5_000
ALL_ROWS = 2**62  # sql/ledger_export.sql's LIMIT when there is none

TEXT = ("key", "job", "subject_id", "cycle", "step", "status", "recipient", "subject", "draft_source",
        "draft_note", "tone_plan", "message_id", "smtp_response", "error", "flow_run_id", "cc_recipient",
        "bcc_recipient", "attachment_name", "attachment_sha256", "attachment_note", "resolved_by",
        "statement_key")
INTEGERS = ("step_rank", "attempts", "attachment_size")
FLAGS = ("permanent",)
DATES = ("as_of", "attempt_as_of")
TIMESTAMPS = ("retry_after", "created_at", "updated_at", "sending_at", "sent_at", "pruned_at", "resolved_at")
COLUMNS = ("key", "job", "subject_id", "cycle", "step", "step_rank", "as_of", "status", "attempts",
           "permanent", "recipient", "subject", "draft_source", "draft_note", "tone_plan", "message_id",
           "smtp_response", "error",
           "retry_after", "flow_run_id", "created_at", "updated_at", "sending_at", "sent_at",
           "attempt_as_of", "cc_recipient", "bcc_recipient", "attachment_name", "attachment_sha256",
           "attachment_size", "attachment_note", "pruned_at", "resolved_by", "resolved_at",
           "statement_key")

# The terminal table: these columns, each at most this wide (the rest of a value is cut).
# The status is the outcome's word (tasks/core/vocabulary.py) and what to do comes next;
# the Message-ID is what an operator looks for in the mail server's log before `resolve`.
TABLE_COLUMNS = {"as_of": 10, "status": 18, "what_to_do": 78, "attempts": 8, "key": 60, "recipient": 36,
                 "message_id": 60, "permanent": 9, "retry_after": 20, "error": 60}
TABLE_HEADERS = {"error": "detail", "what_to_do": "what to do"}


@dataclass(frozen=True)
class LedgerFilter:
    """Which ledger rows to export; None leaves a filter off."""

    job: str | None = None
    status: LedgerStatus | str | None = None
    since: date | None = None  # as_of on or after
    until: date | None = None  # as_of on or before
    limit: int | None = None

    def params(self) -> dict[str, Any]:
        return {"job": self.job, "status": str(self.status) if self.status else None,
                "since": self.since.isoformat() if self.since else None,
                "until": self.until.isoformat() if self.until else None,
                "limit": ALL_ROWS if self.limit is None else self.limit}

    def describe(self) -> str:
        parts = [f"job {self.job}" if self.job else "", f"status {self.status}" if self.status else "",
                 f"as_of from {self.since}" if self.since else "",
                 f"as_of until {self.until}" if self.until else ""]
        return ", ".join(p for p in parts if p)


def _dates(values: pd.Series) -> pd.Series:
    parsed = pd.to_datetime(values.astype("string").str.slice(0, 10), errors="coerce", format="%Y-%m-%d")
    return pd.Series([d.date() if pd.notna(d) else None for d in parsed], index=values.index, dtype=object)


def _timestamps(values: pd.Series) -> pd.Series:
    # SQLite's CURRENT_TIMESTAMP is UTC without an offset; PostgreSQL's timestamptz has one.
    text = values.map(lambda v: v.isoformat() if isinstance(v, datetime) else v).astype("string")
    return pd.to_datetime(text, errors="coerce", utc=True, format="ISO8601").astype("datetime64[us, UTC]")


def typed(chunk: pd.DataFrame) -> pd.DataFrame:
    """One chunk of sql/ledger_export rows with the same types on both backends."""
    out = pd.DataFrame(index=chunk.index)
    for column in COLUMNS:
        values = chunk[column]
        if column in INTEGERS:
            out[column] = pd.to_numeric(values).astype("Int64")
        elif column in FLAGS:
            out[column] = values.map(lambda v: None if v is None else bool(int(v))).astype("boolean")
        elif column in DATES:
            out[column] = _dates(values)
        elif column in TIMESTAMPS:
            out[column] = _timestamps(values)
        else:
            out[column] = values.astype("string")
    return out


def ledger_chunks(engine: Engine, where: LedgerFilter,
                  chunk_rows: int = CHUNK_ROWS) -> Iterator[pd.DataFrame]:
    """The filtered ledger, oldest first, a typed chunk at a time."""
    for chunk in db.stream_frames(engine, statement("ledger_export"), where.params(), chunk_rows):
        yield typed(chunk)


def _json_value(value: Any) -> Any:
    """A cell as JSON and CSV carry it: missing as None, dates and times in ISO 8601."""
    if value is None or (not isinstance(value, str | bool) and pd.isna(value)):
        return None
    if isinstance(value, pd.Timestamp | datetime | date):
        return value.isoformat()
    if isinstance(value, np.generic):
        return value.item()
    return value


class Writer:
    """Writes typed chunks in one format; `close` finishes the output."""

    def write(self, chunk: pd.DataFrame) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Write what a format needs at its end (Parquet's footer)."""


class CsvWriter(Writer):
    def __init__(self, handle: IO[str]) -> None:
        self.writer = csv.writer(handle, lineterminator="\n")
        self.writer.writerow(COLUMNS)

    def write(self, chunk: pd.DataFrame) -> None:
        self.writer.writerows(tuple(_json_value(v) for v in row)
                              for row in chunk.astype(object).itertuples(index=False, name=None))


class JsonLinesWriter(Writer):
    def __init__(self, handle: IO[str]) -> None:
        self.handle = handle

    def write(self, chunk: pd.DataFrame) -> None:
        self.handle.writelines(
            json.dumps({k: _json_value(v) for k, v in zip(COLUMNS, row, strict=True)}, ensure_ascii=False)
            + "\n" for row in chunk.astype(object).itertuples(index=False, name=None))


class ParquetWriter(Writer):
    def __init__(self, path: Path) -> None:
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise RuntimeError("Parquet needs pyarrow: pip install 'dueflow[parquet]'") from None
        self.pa = pa
        types = {**dict.fromkeys(TEXT, pa.string()), **dict.fromkeys(INTEGERS, pa.int64()),
                 **dict.fromkeys(FLAGS, pa.bool_()), **dict.fromkeys(DATES, pa.date32()),
                 **dict.fromkeys(TIMESTAMPS, pa.timestamp("us", tz="UTC"))}
        self.schema = pa.schema([(column, types[column]) for column in COLUMNS])
        self.writer = pq.ParquetWriter(str(path), self.schema, compression="zstd")

    def write(self, chunk: pd.DataFrame) -> None:
        self.writer.write_table(self.pa.Table.from_pandas(chunk, schema=self.schema, preserve_index=False))

    def close(self) -> None:
        self.writer.close()


class TableWriter(Writer):
    """An aligned table for the terminal. The widths come from the first chunk (capped), so
    the table streams like the rest; a longer value later is cut with '…'."""

    def __init__(self, handle: IO[str]) -> None:
        self.handle = handle
        self.widths: dict[str, int] | None = None

    @staticmethod
    def _cells(chunk: pd.DataFrame) -> pd.DataFrame:
        outcome = ledger_outcomes(chunk["status"], chunk["permanent"], chunk["sending_at"])
        chunk = chunk.assign(status=outcome, what_to_do=todos(outcome, pd.Series("KEY", index=chunk.index),
                                                              chunk["retry_after"]),
                             # a retry time means something only for a failure a later run retries
                             retry_after=chunk["retry_after"].where(outcome == "failed").map(when_text))
        shown = chunk.loc[:, list(TABLE_COLUMNS)].astype(object).where(chunk.notna(), None)
        cells = shown.map(lambda v: "" if v is None else str(v))
        # The detail: what went wrong, else the mail server's reply (`250 OK queued as …`).
        reply = chunk["smtp_response"].astype("string").fillna("")
        cells["error"] = cells["error"].where(cells["error"] != "", reply)
        # Retention removed the address: the table says so rather than show a blank.
        pruned = chunk["pruned_at"].notna().to_numpy()
        if pruned.any():
            days = chunk.loc[pruned, "pruned_at"].astype(str).str.slice(0, 10)
            cells.loc[pruned, "recipient"] = "(pruned " + days + ")"
        return cells

    def write(self, chunk: pd.DataFrame) -> None:
        cells = self._cells(chunk)
        if self.widths is None:
            headers = [TABLE_HEADERS.get(c, c) for c in TABLE_COLUMNS]
            self.widths = {c: min(cap, max(len(h), int(cells[c].str.len().max() or 0)))
                           for (c, cap), h in zip(TABLE_COLUMNS.items(), headers, strict=True)}
            self._line(headers)
        for row in cells.itertuples(index=False, name=None):
            self._line(row)

    def _line(self, values: Iterable[str]) -> None:
        assert self.widths is not None
        parts = []
        for value, width in zip(values, self.widths.values(), strict=True):
            parts.append(value if len(value) <= width else value[:width - 1] + "…")
        self.handle.write("  ".join(p.ljust(w) for p, w in zip(parts, self.widths.values(), strict=True))
                          .rstrip() + "\n")


def export(
    engine: Engine,
    where: LedgerFilter,
    fmt: Format,
    output: Path | None,
    stdout: IO[str],
    on_chunk: Callable[[int], None] = lambda rows: None,
    chunk_rows: int = CHUNK_ROWS,
) -> int:
    """Write the filtered ledger in `fmt` to `output` (a file, written whole or not at all:
    it appears under its name only once complete) or to `stdout`; returns the row count."""
    if fmt == "parquet" and output is None:
        raise ValueError("Parquet is a binary file format: give --output FILE")
    partial = output.with_name(output.name + ".part") if output is not None else None
    handle: IO[str] | None = None
    rows = 0
    try:
        if fmt == "parquet":
            assert partial is not None
            writer: Writer = ParquetWriter(partial)
        else:
            if partial is not None:
                handle = open(partial, "w", encoding="utf-8", newline="", errors="surrogateescape")  # noqa: SIM115
            target = handle or stdout
            writer = {"csv": CsvWriter, "json": JsonLinesWriter, "table": TableWriter}[fmt](target)
        for chunk in ledger_chunks(engine, where, chunk_rows):
            writer.write(chunk)
            rows += len(chunk)
            on_chunk(rows)
        writer.close()
        if handle is not None:
            handle.close()
            handle = None
        if partial is not None and output is not None:
            os.replace(partial, output)
            partial = None
    finally:
        if handle is not None:
            handle.close()
        if partial is not None:
            partial.unlink(missing_ok=True)
    return rows


class RowCounter:
    """'exported N rows (R rows/s)' on a terminal's stderr while an export runs."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.started = time.monotonic()
        self.shown = False

    def __call__(self, rows: int) -> None:
        rate = rows / max(time.monotonic() - self.started, 1e-6)
        self.stream.write(f"\rdueflow ledger: {rows:,} rows exported ({rate:,.0f} rows/s)")
        self.stream.flush()
        self.shown = True

    def done(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()
