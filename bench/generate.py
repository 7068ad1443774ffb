"""Synthetic data at scale, loaded with COPY into the dueflow schema.

The data models a steady installation that has run every night since `go-live`
(`history_days` before the bench date):

- contracts renew on dates spread evenly over three years around the bench date,
  so about 1/1095 of them enter each lead window every night;
- invoices were sent over the last 540 days; most were paid after a few days,
  some after reminders, a few never;
- the ledger holds every alert and dunning step that the earlier nights reserved
  (with the rendered message, as the flow stores it), simulated here from the
  rules of docs/design.md, independently of `tasks.decide`.

From the same simulation the generator derives what a correct run on the bench
date must do (`Expected`), so the benchmark can check the flow's counts.
"""

from __future__ import annotations

import hashlib
import io
import json
import time
from dataclasses import asdict, dataclass, field
from datetime import date, timedelta
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Engine, text

from dueflow.sql import statement
from dueflow.tasks.adapters import db
from dueflow.tasks.core.render import dunning_context, render, renewal_context

LEADS = (15, 30, 60)  # the flow's default leads, most urgent first
DELAYS = (7, 5, 7)  # SENT→REMINDED_1→REMINDED_2→OVERDUE, the flow's defaults
STEPS = ("REMINDED_1", "REMINDED_2", "OVERDUE")
MAIL_FROM = "alerts@dueflow.bench"
ESCALATION_TO = "escalations@dueflow.bench"
RENEWAL_SPAN_DAYS = 1095  # renewal dates cover three years centred on the bench date
INVOICE_AGE_DAYS = 540
COPY_CHUNK_ROWS = 200_000
NEVER = 1 << 40  # a day number no payment reaches
EPOCH = date(1970, 1, 1)

# The non-unique indexes of the loaded tables (as sql/schema.sql defines them today):
# dropped before COPY, rebuilt afterwards by init_db.
SECONDARY_INDEXES = """
SELECT i.relname FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
WHERE t.relname = ANY(:tables) AND pg_table_is_visible(t.oid) AND NOT x.indisunique
"""
SOURCE_TABLES = ("clients", "contracts", "invoices")


@dataclass(frozen=True)
class Scale:
    contracts: int
    invoices: int
    clients: int
    as_of: date
    history_days: int = 365
    seed: int = 6
    # Invoices are sent over this many days; a short span (60) gives many open invoices
    # not yet due, the shape where dunning reads the most and sends the least.
    invoice_age_days: int = INVOICE_AGE_DAYS


@dataclass(frozen=True)
class Expected:
    """What a correct run must do on the bench date (from the generator's own simulation)."""

    renewal_due: int  # due rows, including those already handled
    renewal_new: int
    renewal_quarantined: int
    dunning_new: int
    dunning_quarantined: int
    surge_renewal_new: int  # with an empty ledger
    surge_dunning_new: int

    @property
    def steady_new(self) -> int:
        return self.renewal_new + self.dunning_new

    @property
    def surge_new(self) -> int:
        return self.surge_renewal_new + self.surge_dunning_new

    @property
    def quarantined(self) -> int:
        return self.renewal_quarantined + self.dunning_quarantined


@dataclass
class Dataset:
    """Every table as a DataFrame ready for COPY, plus the expectations."""

    scale: Scale
    tables: dict[str, pd.DataFrame]
    expected: Expected
    stats: dict[str, Any] = field(default_factory=dict)


def day_number(day: date) -> int:
    return (day - EPOCH).days


def iso_dates(days: np.ndarray) -> np.ndarray:
    return (np.datetime64("1970-01-01") + days.astype("timedelta64[D]")).astype(str)


def iso_stamps(days: np.ndarray, seconds: np.ndarray) -> np.ndarray:
    stamps = (days * 86_400 + seconds).astype("datetime64[s]").astype(str)
    return np.char.add(stamps, "+00:00")


def numbered(prefix: str, count: int, width: int) -> pd.Series:
    return prefix + pd.Series(np.arange(1, count + 1)).astype(str).str.zfill(width)


def nullable(values: np.ndarray | pd.Series, missing: np.ndarray) -> pd.Series:
    """Values as an object column with None (COPY: NULL) where `missing`."""
    out = pd.Series(np.asarray(values, dtype=object))
    out[missing] = None
    return out


def money(rng: np.random.Generator, count: int) -> np.ndarray:
    return np.char.mod("%.2f", rng.integers(5_000, 5_000_000, count) / 100)


def lead_intervals() -> list[tuple[int, int]]:
    """Each lead L with the days-left interval [lo, L] for which it is the due lead."""
    bounds, low = [], 0
    for lead in LEADS:
        bounds.append((low, lead))
        low = lead + 1
    return bounds


def renewal_reservations(cycle: np.ndarray, go_live: int, as_of: int) -> list[tuple[np.ndarray, int]]:
    """For each lead, the night each cycle's alert was reserved (-1: never), for nightly
    runs from go-live to the night before the bench date. Lead L is due for
    days-left d in [lo, L]; nights before as_of see d down to cycle - (as_of - 1), and
    the first such night (largest d) reserves it."""
    out = []
    for low, lead in lead_intervals():
        d_high = np.minimum(lead, cycle - go_live)
        d_low = np.maximum(low, cycle - (as_of - 1))
        out.append((np.where(d_low <= d_high, cycle - d_high, -1), lead))
    return out


def due_lead_of(days_left: np.ndarray) -> np.ndarray:
    """The due lead for days-left (the rule of docs/design.md), -1 where none."""
    lead = np.full(days_left.shape, -1)
    for low, high in reversed(lead_intervals()):
        lead = np.where((days_left >= low) & (days_left <= high), high, lead)
    return lead


def message_bodies() -> dict[str, tuple[str, str, str]]:
    """One rendered message per kind, stored on every history row of that kind."""
    renewal = renewal_context(vendor="Vendor 1", title="Contract 1", amount="1250.50", currency="EUR",
                              renewal_date=date(2027, 8, 14), days_left=60, lead=60, locale="en")

    def dunning(step: str) -> dict:
        return dunning_context(
            step=step, invoice_id="inv-0000001", number="F-0000001", amount="980.40", currency="EUR",
            issue_date=date(2027, 5, 1), due_date=date(2027, 5, 31), client_id="cl-00001",
            client_name="Client 1", client_email="ap@client1.example",
            history=[{"step": "REMINDED_1", "as_of": "2027-05-08", "status": "sent"},
                     {"step": "REMINDED_2", "as_of": "2027-05-13", "status": "sent"}],
            paragraph="", as_of=date(2027, 6, 5), locale="en")

    return {
        "renewal": render("renewal", "en", renewal),
        "REMINDED_1": render("dunning", "en", dunning("REMINDED_1")),
        "REMINDED_2": render("dunning", "en", dunning("REMINDED_2")),
        "OVERDUE": render("escalation", "en", dunning("OVERDUE")),
    }


def ledger_frame(
    keys: pd.Series, job: str, subject_id: pd.Series, cycle: pd.Series | str, step: pd.Series,
    step_rank: np.ndarray, night: np.ndarray, recipient: pd.Series, kind: pd.Series,
) -> pd.DataFrame:
    bodies = message_bodies()
    # Object arrays of references to the few rendered strings: a Series.map copies each
    # string per row under pandas' string dtype (50 GB at full scale).
    kinds = kind.tolist()
    subject, body_text, body_html = (
        pd.Series(np.fromiter((bodies[k][i] for k in kinds), dtype=object, count=len(kinds)), dtype=object)
        for i in range(3))
    stamp = pd.Series(iso_stamps(night, np.full(night.shape, 6 * 3600 + 300)))
    return pd.DataFrame(
        {
            "key": keys.to_numpy(),
            "job": job,
            "subject_id": subject_id.to_numpy(),
            "cycle": cycle if isinstance(cycle, str) else cycle.to_numpy(),
            "step": step.to_numpy(),
            "step_rank": step_rank,
            "as_of": iso_dates(night),
            "status": "sent",
            "attempts": 1,
            "recipient": recipient.to_numpy(),
            "subject": subject.to_numpy(),
            "body_text": body_text.to_numpy(),
            "body_html": body_html.to_numpy(),
            "message_id": [f"<{hashlib.sha256(k.encode()).hexdigest()[:32]}@dueflow.bench>"
                           for k in keys],
            "smtp_response": "250 OK queued",
            "flow_run_id": np.char.add("history-", iso_dates(night)),
            "created_at": stamp.to_numpy(),
            "updated_at": stamp.to_numpy(),
            "sent_at": stamp.to_numpy(),
        },
        dtype=object,  # not the string dtype: it would copy the shared bodies per row
    )


def build(scale: Scale) -> Dataset:
    """All tables in memory, deterministic for a given Scale."""
    started = time.perf_counter()
    rng = np.random.default_rng(scale.seed)
    as_of = day_number(scale.as_of)
    go_live = as_of - scale.history_days

    # Clients: 1 % paused, 0.1 % with an unusable address, locales en/es/fr.
    n_cl = scale.clients
    client_ids = numbered("cl-", n_cl, 5)
    client_bad_email = rng.random(n_cl) < 0.001
    client_paused = rng.random(n_cl) < 0.01
    client_email = pd.Series(np.where(client_bad_email, "accounts(at)client" + client_ids.str[3:],
                                      "ap@client" + client_ids.str[3:] + ".example"))
    clients = pd.DataFrame({
        "id": client_ids, "name": "Client " + client_ids.str[3:], "email": client_email,
        "locale": rng.choice(["en", "es", "fr"], n_cl, p=[0.7, 0.25, 0.05]),
        "notes": nullable(np.full(n_cl, "Pays late in August"), rng.random(n_cl) > 0.05),
        "dunning_paused": np.where(client_paused, "true", "false"),
    })

    # Contracts: 4 % cancelled; 0.1 % with one defect that gets them quarantined.
    n = scale.contracts
    contract_ids = numbered("c-", n, 7)
    renewal = as_of - RENEWAL_SPAN_DAYS // 2 + rng.integers(0, RENEWAL_SPAN_DAYS, n)
    cancelled = rng.random(n) < 0.04
    defect = rng.random(n)
    no_date = defect < 0.0005
    bad_email = (defect >= 0.0005) & (defect < 0.0007)
    bad_currency = (defect >= 0.0007) & (defect < 0.0009)
    no_amount = (defect >= 0.0009) & (defect < 0.001)
    owner = "owner" + (pd.Series(np.arange(n)) % 20_000).astype(str)
    contracts = pd.DataFrame({
        "id": contract_ids,
        "vendor": "Vendor " + (pd.Series(np.arange(n)) % 5_000).astype(str),
        "title": "Contract " + contract_ids.str[2:],
        "amount": nullable(money(rng, n), no_amount),
        "currency": np.where(bad_currency, "XYZ", rng.choice(["EUR", "USD", "GBP"], n, p=[.6, .3, .1])),
        "renewal_date": nullable(iso_dates(renewal), no_date),
        "notify_email": np.where(bad_email, "not-an-address", owner + "@corp.example"),
        "status": np.where(cancelled, "cancelled", "active"),
    })

    # Renewal history: the current cycle of every good active contract, and the
    # previous (yearly) cycle of those renewing within a year.
    good_contract = ~cancelled & (defect >= 0.001)
    days_left = np.where(no_date, -(10**6), renewal - as_of)
    in_window = (days_left >= 0) & (days_left <= max(LEADS))
    lead_today = due_lead_of(days_left)
    cycles = [(np.flatnonzero(good_contract), renewal[good_contract])]
    previous = good_contract & (renewal >= as_of) & (renewal < as_of + 365)
    cycles.append((np.flatnonzero(previous), renewal[previous] - 365))
    reserved_today = np.zeros(n, dtype=bool)
    parts = []
    for which, (index, cycle) in enumerate(cycles):
        for nights, lead in renewal_reservations(cycle, go_live, as_of):
            hit = nights >= 0
            parts.append((index[hit], cycle[hit], lead, nights[hit]))
            if which == 0:  # the cycle tonight's run sees
                reserved_today[index[hit & (lead_today[index] == lead)]] = True
    r_index = np.concatenate([p[0] for p in parts])
    r_cycle = iso_dates(np.concatenate([p[1] for p in parts]))
    r_lead = np.concatenate([np.full(len(p[0]), p[2]) for p in parts])
    r_night = np.concatenate([p[3] for p in parts])
    r_subject = contract_ids.iloc[r_index].reset_index(drop=True)
    r_step = pd.Series(r_lead).astype(str) + "d"
    renewal_ledger = ledger_frame(
        "renewal/" + r_subject + "/" + r_cycle + "/" + r_step, "renewal", r_subject,
        pd.Series(r_cycle), r_step, r_lead, r_night,
        contracts["notify_email"].iloc[r_index].reset_index(drop=True),
        pd.Series("renewal", index=r_step.index),
    )

    # Invoices: sent over the last INVOICE_AGE_DAYS days; 1 % draft, 1 % void; payers
    # pay within a week (60 %), 7–11 days (22 %), 12–18 (10 %), 19–60 (5 %) or never (3 %).
    m = scale.invoices
    invoice_ids = numbered("inv-", m, 7)
    sent_day = as_of - rng.integers(0, scale.invoice_age_days + 1, m)
    kind = rng.random(m)
    draft, void = kind < 0.01, (kind >= 0.01) & (kind < 0.02)
    behaviour = rng.random(m)
    delay = np.select(
        [behaviour < 0.60, behaviour < 0.82, behaviour < 0.92, behaviour < 0.97],
        [rng.integers(0, 7, m), rng.integers(7, 12, m), rng.integers(12, 19, m), rng.integers(19, 61, m)],
        default=NEVER,
    )
    paid_day = np.where(draft | void, NEVER, sent_day + delay)
    paid = paid_day < as_of
    client_index = rng.integers(0, n_cl, m)
    invoice_bad_currency = rng.random(m) < 0.0002
    invoices = pd.DataFrame({
        "id": invoice_ids,
        "client_id": client_ids.iloc[client_index].to_numpy(),
        "number": "F-" + invoice_ids.str[4:],
        "amount": money(rng, m),
        "currency": np.where(invoice_bad_currency, "XYZ", rng.choice(["EUR", "USD"], m, p=[.8, .2])),
        "status": np.select([draft, void, paid], ["draft", "void", "paid"], default="sent"),
        "sent_at": nullable(iso_stamps(sent_day, rng.integers(0, 86_400, m)), draft),
        "due_date": nullable(iso_dates(sent_day + 30), draft),
        "paid_at": nullable(iso_stamps(np.minimum(paid_day, as_of), rng.integers(0, 86_400, m)), ~paid),
    })

    # Dunning history: every night from go-live, the next step of each unpaid invoice
    # is reserved once its wait is over (one step per invoice per night).
    dunnable = ~draft & ~void & ~client_paused[client_index] & ~client_bad_email[client_index] \
        & ~invoice_bad_currency
    rank = np.zeros(m, dtype=np.int64)
    step_day = sent_day.copy()
    waits = np.asarray([*DELAYS, NEVER])
    relevant = np.flatnonzero(dunnable & (paid_day >= go_live))
    d_parts = []
    for night in range(go_live, as_of):
        sub = relevant
        due = (paid_day[sub] >= night) & (sent_day[sub] <= night) \
            & (night - step_day[sub] >= waits[rank[sub]])
        won = sub[due]
        rank[won] += 1
        step_day[won] = night
        d_parts.append((won, rank[won].copy(), night))
    d_index = np.concatenate([p[0] for p in d_parts])
    d_rank = np.concatenate([p[1] for p in d_parts])
    d_night = np.concatenate([np.full(len(p[0]), p[2]) for p in d_parts])
    d_subject = invoice_ids.iloc[d_index].reset_index(drop=True)
    d_step = pd.Series(np.asarray(STEPS)[d_rank - 1])
    d_recipient = pd.Series(np.where(d_rank == 3, ESCALATION_TO,
                                     client_email.iloc[client_index[d_index]].to_numpy()))
    dunning_ledger = ledger_frame(
        "dunning/" + d_subject + "/" + d_step, "dunning", d_subject, "", d_step, d_rank, d_night,
        d_recipient, d_step,
    )

    # Tonight, by the rules of docs/design.md.
    participating = (~draft & ~void & ~paid) & ~client_paused[client_index]
    bad_invoice = client_bad_email[client_index] | invoice_bad_currency
    good_open = participating & ~bad_invoice
    due_tonight = good_open & (rank < 3) & (as_of - step_day >= waits[np.minimum(rank, 3)])
    renewal_due = good_contract & in_window
    expected = Expected(
        renewal_due=int(renewal_due.sum()),
        renewal_new=int((renewal_due & ~reserved_today).sum()),
        renewal_quarantined=int((~cancelled & (no_date | (in_window & (defect < 0.001)))).sum()),
        dunning_new=int(due_tonight.sum()),
        dunning_quarantined=int((participating & bad_invoice).sum()),
        surge_renewal_new=int(renewal_due.sum()),
        surge_dunning_new=int((good_open & (as_of - sent_day >= DELAYS[0])).sum()),
    )
    ledger = pd.concat([renewal_ledger, dunning_ledger], ignore_index=True)
    stats = {
        "build_seconds": round(time.perf_counter() - started, 2),
        "go_live": str(scale.as_of - timedelta(days=scale.history_days)),
        "open_invoices": int((~draft & ~void & ~paid).sum()),
        "contracts_in_window": int((~cancelled & in_window).sum()),
    }
    return Dataset(scale, {"clients": clients, "contracts": contracts, "invoices": invoices,
                           "dueflow_ledger": ledger}, expected, stats)


def copy_frame(cursor: Any, table: str, frame: pd.DataFrame) -> None:
    """Stream `frame` into `table` with COPY … FROM STDIN (CSV), chunk by chunk."""
    columns = ", ".join(frame.columns)
    force = " , FORCE_NOT_NULL (cycle)" if table == "dueflow_ledger" else ""
    sql = f"COPY {table} ({columns}) FROM STDIN WITH (FORMAT csv{force})"
    for start in range(0, len(frame), COPY_CHUNK_ROWS):
        chunk = frame.iloc[start:start + COPY_CHUNK_ROWS].to_csv(header=False, index=False)
        cursor.copy_expert(sql, io.BytesIO(chunk.encode()), size=1 << 20)


META_TABLE = "bench_meta"


def _meta(scale: Scale) -> str:
    """What the loaded data depends on: the scale, and sql/schema.sql (a new index or
    column there means the tables must be created again)."""
    schema = hashlib.sha256(statement("schema").encode()).hexdigest()[:16]
    fields = {k: str(v) for k, v in asdict(scale).items()
              if k != "invoice_age_days" or v != INVOICE_AGE_DAYS}  # older data sets lack it
    return json.dumps(fields | {"schema": schema}, sort_keys=True)


def sources_loaded(engine: Engine, scale: Scale) -> bool:
    """True when the source tables hold the data of exactly this Scale."""
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE IF NOT EXISTS {META_TABLE} (name text PRIMARY KEY, value text)")
        row = conn.execute(text(f"SELECT value FROM {META_TABLE} WHERE name = 'sources'")).first()
    return row is not None and row[0] == _meta(scale)


def load(engine: Engine, data: Dataset, tables: tuple[str, ...]) -> dict[str, float]:
    """Replace `tables` by the generated rows (COPY), rebuild indexes, VACUUM ANALYZE."""
    seconds: dict[str, float] = {}
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE IF NOT EXISTS {META_TABLE} (name text PRIMARY KEY, value text)")
        conn.exec_driver_sql(f"DELETE FROM {META_TABLE} WHERE name = 'sources'")
        # Dropped and recreated by init_db, so the tables always match sql/schema.sql.
        dropped = [*tables, "dueflow_quarantine"] if "dueflow_ledger" in tables else list(tables)
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS {', '.join(dropped)}")
    db.init_db(engine)
    with engine.begin() as conn:
        for (index,) in conn.execute(text(SECONDARY_INDEXES), {"tables": list(tables)}).all():
            conn.exec_driver_sql(f'DROP INDEX "{index}"')
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        for table in tables:
            started = time.perf_counter()
            copy_frame(cursor, table, data.tables[table])
            raw.commit()
            seconds[f"copy_{table}"] = round(time.perf_counter() - started, 2)
    finally:
        raw.close()
    started = time.perf_counter()
    db.init_db(engine)  # recreates the secondary indexes of sql/schema.sql
    seconds["indexes"] = round(time.perf_counter() - started, 2)
    started = time.perf_counter()
    vacuum_analyze(engine)
    seconds["vacuum_analyze"] = round(time.perf_counter() - started, 2)
    if set(SOURCE_TABLES) <= set(tables):
        with engine.begin() as conn:
            conn.execute(text(f"INSERT INTO {META_TABLE} VALUES ('sources', :v)"),
                         {"v": _meta(data.scale)})
    return seconds


STASH_PREFIX = "bench_stash_"


def _ledger_indexes(conn: Any) -> list[str]:
    """Names of the indexes on the visible `dueflow_ledger` table."""
    return list(conn.execute(text(
        "SELECT i.relname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid"
        " JOIN pg_class t ON t.oid = x.indrelid"
        " WHERE t.relname = 'dueflow_ledger' AND pg_table_is_visible(t.oid)")).scalars().all())


def stash_ledger(engine: Engine) -> None:
    """Set the history ledger aside (renamed, with its indexes) and create a fresh one,
    as `dueflow init-db` leaves it on a first install; `restore_ledger` undoes it."""
    with engine.begin() as conn:
        # A stash left by a benchmark that was killed before restoring it is stale: the
        # ledger was loaded again since.
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS {STASH_PREFIX}dueflow_ledger")
        indexes = _ledger_indexes(conn)
        for index in indexes:
            conn.exec_driver_sql(f'ALTER INDEX "{index}" RENAME TO "{STASH_PREFIX}{index}"')
        conn.exec_driver_sql(f"ALTER TABLE dueflow_ledger RENAME TO {STASH_PREFIX}dueflow_ledger")
        conn.exec_driver_sql("TRUNCATE dueflow_quarantine")
    db.init_db(engine)


def restore_ledger(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE IF EXISTS dueflow_ledger")
        conn.exec_driver_sql(f"ALTER TABLE {STASH_PREFIX}dueflow_ledger RENAME TO dueflow_ledger")
        indexes = _ledger_indexes(conn)
        for index in indexes:
            conn.exec_driver_sql(f'ALTER INDEX "{index}" RENAME TO "{index[len(STASH_PREFIX):]}"')
        conn.exec_driver_sql("TRUNCATE dueflow_quarantine")


def mark_ledger(engine: Engine, scale: Scale | None) -> None:
    """Record that the ledger holds exactly the generated history of `scale` (None: it may not)."""
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE IF NOT EXISTS {META_TABLE} (name text PRIMARY KEY, value text)")
        conn.exec_driver_sql(f"DELETE FROM {META_TABLE} WHERE name = 'ledger'")
        if scale is not None:
            conn.execute(text(f"INSERT INTO {META_TABLE} VALUES ('ledger', :v)"), {"v": _meta(scale)})


def ledger_loaded(engine: Engine, scale: Scale) -> bool:
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE IF NOT EXISTS {META_TABLE} (name text PRIMARY KEY, value text)")
        row = conn.execute(text(f"SELECT value FROM {META_TABLE} WHERE name = 'ledger'")).first()
    return row is not None and row[0] == _meta(scale)


def vacuum_analyze(engine: Engine, tables: tuple[str, ...] = (*SOURCE_TABLES, "dueflow_ledger")) -> None:
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        for table in tables:
            conn.exec_driver_sql(f"VACUUM (ANALYZE) {table}")


def table_sizes(engine: Engine) -> dict[str, dict[str, int]]:
    sizes = {}
    with engine.connect() as conn:
        for table in (*SOURCE_TABLES, "dueflow_ledger"):
            rows = conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one()
            size = conn.execute(text("SELECT pg_total_relation_size(CAST(:t AS regclass))"),
                                {"t": table}).scalar_one()
            sizes[table] = {"rows": int(rows), "bytes": int(size)}
    return sizes
