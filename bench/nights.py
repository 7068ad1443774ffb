"""Nights as processes: dueflow between its two limits, beside the seeds' own script (bench/seeds.py).

    .venv/bin/python -m bench.nights --small --surge 5000          # quick check
    .venv/bin/python -m bench.nights --scales 1,5 --surge 30000,100000 --reuse-data --runs 2 \\
        --profile-dir bench/out/prof --json bench/out/nights.json

The data shape of issue 26, at scale k: k·1M contracts of which 2,000 renew inside the
widest lead (60 days) tonight, whatever k; k·1M invoices with 1,000 due for their first
reminder tonight, 1,000 more tomorrow and k·118,000 open ones not yet due (sent in the
last five days); k·200,000 clients. A surge (--surge N) is the 1x shape (the small one with
--small) with N emails due on the first night: its 2,000 renewals and N − 2,000 first
reminders, fewer open invoices not yet due so the open total stays 120,000 while it can, a
client per open invoice. Each shape is generated once in PostgreSQL (generate_series) into
its own database (dueflow_nights_1x, dueflow_nights_surge30k, ...) and reused with --reuse-data.

Three nights (--nights; a surge has its first night only), each run by the seeds' script and
then by `dueflow run` as processes against a real `prefect server start`, an SMTP sink and the
database: the first night (empty ledgers), the same night again (nothing new) and the steady
night (the next day). On the first night the seeds' script also runs inside one `@flow`
(bench/seeds.py --flow), from the same empty table. Measured in the same run, issue 44's limits:

- the floor: --floor N (3) empty Prefect flow runs as processes on the same server, the median;
- the mail path: the sink captures what dueflow sends on its first night, and
  bench/mail_path.py, a process of its own, pushes those very messages with a bare smtplib
  client over 1, 4 and 8 connections to the same sink (checked against the sink's count); the
  fastest is the mail path. A night that sent nothing has a mail path of 0; the steady night's
  is estimated from the first night's rate (marked ~);
- with --delivery-alone, between the two: the first night's emails delivered again by
  tasks/deliver.py alone (bench/delivery_alone.py: no Prefect, nothing composed beside it).

Each night's timeline: when its first and last email reached the sink (the sink notes its
arrivals since `mark()`) and when the empty flow's body ran (it prints the time), so the
other work is also given in three parts — before the first email beyond the floor's start,
the delivery beyond the mail path's time, after the last email beyond the floor's end. The
measured tree's modules are compiled to bytecode first, as pip compiles an installed package.

The report (text, and JSON with every run) gives per shape and night: floor, mail path, the
seeds' script (process, flow), dueflow, dueflow's other work = (dueflow − floor) − mail path,
the ratio seeds/dueflow (median over --runs) and each process's peak RSS; each mail path by
connections; for a surge, the emails/s of dueflow and the script and the delivery rate against
the mail path = mail path ÷ (dueflow − floor); the growth factors from the smallest to the
largest scale, the other work of the nothing-new night among them. `--naive` adds the heavier
per-row script of bench/naive.py (ledger SELECT per row) as a column.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, replace
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from dueflow.tasks.core.defaults import DELIVERY_WORKERS

BASE_URL = "postgresql+psycopg2://postgres@127.0.0.1:5432/"
AS_OF = date(2027, 6, 15)
SHAPE_VERSION = 1  # bump when the generated data changes
NIGHTS = ("first", "again", "steady")
# The least any flow run costs as a process: interpreter, `from prefect import flow`, a run
# recorded by the server (its states, the client's start and stop), nothing else. Its body
# prints the time it ran: the floor's start (up to its body) and end (after it) apart.
EMPTY_FLOW = "import time\nfrom prefect import flow\nflow(name='empty')(lambda: print(time.time()))()"
MAIL_FROM, ESCALATION_TO = "alerts@dueflow.bench", "escalations@dueflow.bench"
MAIL_PATH_CONNECTIONS = (1, 4, 8)


@dataclass(frozen=True)
class Shape:
    contracts: int
    invoices: int
    clients: int
    renewals_due: int = 2_000
    reminders_due: int = 1_000
    open_not_due: int = 118_000  # besides the 1,000 due tomorrow

    @classmethod
    def scaled(cls, k: float) -> Shape:
        return cls(int(k * 1_000_000), int(k * 1_000_000), int(k * 200_000),
                   open_not_due=int(k * 118_000))

    @classmethod
    def small(cls) -> Shape:
        return cls(20_000, 20_000, 4_000, renewals_due=200, reminders_due=100, open_not_due=2_400)

    def surge(self, emails: int) -> Shape:
        """This shape with `emails` due tonight: its renewals and the rest first reminders. The
        open invoices not yet due shrink by as many as the reminders add (today's and tomorrow's),
        so the open total stays the base's until they run out; clients, one per open invoice."""
        reminders = emails - self.renewals_due
        if reminders < 0:
            raise SystemExit(f"a surge of {emails:,} is below the shape's {self.renewals_due:,} renewals")
        open_not_due = max(0, self.open_not_due - 2 * (reminders - self.reminders_due))
        if 2 * reminders + open_not_due > self.invoices:
            raise SystemExit(f"a surge of {emails:,} needs more invoices than the shape's {self.invoices:,}")
        return replace(self, reminders_due=reminders, open_not_due=open_not_due,
                       clients=max(self.clients, 2 * reminders))

    def database(self, label: str) -> str:
        return f"dueflow_nights_{label}"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# --------------------------------------------------------------------------- data

def generate_sql(shape: Shape, as_of: date) -> list[str]:
    """The statements that make the shape (parameters inlined: they are ours)."""
    d, k = f"DATE '{as_of.isoformat()}'", shape
    open_total = 2 * k.reminders_due + k.open_not_due
    return [
        "DROP TABLE IF EXISTS contracts, invoices, clients, seeds_sent, bench_shape CASCADE",
        """CREATE TABLE contracts (id text PRIMARY KEY, vendor text, title text, amount numeric,
           currency text, renewal_date date, notify_email text, status text)""",
        """CREATE TABLE clients (id text PRIMARY KEY, name text, email text, locale text DEFAULT 'en',
           notes text, dunning_paused boolean DEFAULT false, dunning_paused_until date, cc_email text,
           dunning_profile text)""",
        """CREATE TABLE invoices (id text PRIMARY KEY, client_id text, number text, amount numeric,
           currency text, status text, sent_at timestamptz, due_date date, paid_at timestamptz,
           dunning_hold_until date, pdf_path text)""",
        f"""INSERT INTO clients (id, name, email, locale, notes, dunning_paused)
           SELECT 'cl' || lpad(g::text, 8, '0'), 'Client ' || g, 'ap' || g || '@client.example', 'en',
                  NULL, false FROM generate_series(1, {k.clients}) g""",
        # Renewals due tonight spread over the 61 days of the widest lead; the rest either
        # passed or renew 70 days out and later (none enters a window tomorrow).
        f"""INSERT INTO contracts
           SELECT 'c' || lpad(g::text, 9, '0'), 'Vendor ' || (g % 5000), 'Contract ' || g,
                  ((g % 100000) + 1000) / 100.0, 'EUR',
                  CASE WHEN g <= {k.renewals_due} THEN {d} + (g - 1) % 61
                       WHEN g % 2 = 0 THEN {d} - 1 - g % 700 ELSE {d} + 70 + g % 900 END,
                  'owner' || (g % 1000) || '@company.example',
                  CASE WHEN g > {k.renewals_due} AND g % 50 = 0 THEN 'cancelled' ELSE 'active' END
           FROM generate_series(1, {k.contracts}) g""",
        # Invoices: the first due for REMINDED_1 tonight (sent 7 days ago), the next due
        # tomorrow, then open ones sent in the last five days, then paid ones.
        f"""INSERT INTO invoices
           SELECT 'i' || lpad(g::text, 9, '0'),
                  'cl' || lpad((1 + (g::bigint * 7919) % {k.clients})::text, 8, '0'),
                  'F-' || g, ((g % 100000) + 1000) / 100.0, 'EUR',
                  CASE WHEN g <= {open_total} THEN 'sent' ELSE 'paid' END,
                  s.day + time '09:00' AT TIME ZONE 'UTC', s.day + 30,
                  CASE WHEN g <= {open_total} THEN NULL ELSE s.day + 10 + time '12:00' AT TIME ZONE 'UTC' END,
                  NULL, NULL
           FROM generate_series(1, {k.invoices}) g,
                LATERAL (SELECT CASE WHEN g <= {k.reminders_due} THEN {d} - 7
                                     WHEN g <= {2 * k.reminders_due} THEN {d} - 6
                                     WHEN g <= {open_total} THEN {d} - g % 6
                                     ELSE {d} - 30 - g % 500 END AS day) s""",
        *INDEXES,
        "CREATE TABLE bench_shape (shape text)",
    ]


# The indexes `dueflow check --sources` names for these tables (a new user is told to make
# them): the renewal window, the open invoices, the typed start of the dunning candidates, and
# the clients' payment history (each chunk of reminders reads its clients' invoices).
INDEXES = (
    "CREATE INDEX IF NOT EXISTS contracts_renewal_date ON contracts (renewal_date)",
    "CREATE INDEX IF NOT EXISTS invoices_open ON invoices (status) WHERE paid_at IS NULL",
    "CREATE INDEX IF NOT EXISTS invoices_open_sent ON invoices (sent_at) WHERE paid_at IS NULL",
    "CREATE INDEX IF NOT EXISTS invoices_client_id ON invoices (client_id)",
)


def shape_tag(shape: Shape, as_of: date) -> str:
    return json.dumps({"v": SHAPE_VERSION, "as_of": as_of.isoformat(), **shape.__dict__}, sort_keys=True)


def psql(dbname: str, *statements: str, autocommit: bool = True) -> list[Any]:
    import psycopg2

    conn = psycopg2.connect(host="127.0.0.1", port=5432, user="postgres", dbname=dbname)
    conn.autocommit = autocommit
    out = []
    try:
        cur = conn.cursor()
        for sql in statements:
            cur.execute(sql)
            out.append(cur.fetchall() if cur.description else None)
        if not autocommit:
            conn.commit()
    finally:
        conn.close()
    return out


def ensure_data(shape: Shape, label: str, as_of: date, reuse: bool) -> tuple[str, float | None]:
    """The shape's database, generated unless --reuse-data finds it there; the seconds it took."""
    name = shape.database(label)
    if not psql("postgres", f"SELECT 1 FROM pg_database WHERE datname = '{name}'")[0]:
        psql("postgres", f'CREATE DATABASE "{name}"')
    tag = shape_tag(shape, as_of)
    if reuse:
        try:
            found = psql(name, "SELECT shape FROM bench_shape")[0]
        except Exception:
            found = []
        if found and found[0][0] == tag:
            log(f"{label}: reusing the data in database {name}")
            psql(name, *INDEXES, "ANALYZE invoices")  # an index `check` came to name since
            return BASE_URL + name, None
    log(f"{label}: generating {shape.contracts:,} contracts, {shape.invoices:,} invoices,"
        f" {shape.clients:,} clients into {name}")
    started = time.perf_counter()
    psql(name, *generate_sql(shape, as_of), autocommit=False)
    psql(name, "VACUUM ANALYZE contracts", "VACUUM ANALYZE invoices", "VACUUM ANALYZE clients")
    run_dueflow(["init-db"], BASE_URL + name, check=True)
    psql(name, f"INSERT INTO bench_shape VALUES ('{tag}')")
    seconds = time.perf_counter() - started
    log(f"{label}: data ready in {seconds:.0f} s")
    return BASE_URL + name, seconds


def reset_ledgers(url: str) -> None:
    """Empty ledgers for a first night: the seeds' table and every dueflow table with rows, but
    the schema's version and the Message-ID secret init-db made (without it no night runs)."""
    name = url.rsplit("/", 1)[1]
    tables = psql(name, "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
                        " AND tablename LIKE 'dueflow%'"
                        " AND tablename NOT IN ('dueflow_schema_version', 'dueflow_secrets')")[0]
    psql(name, "DROP TABLE IF EXISTS seeds_sent",
         *([f"TRUNCATE {', '.join(t for (t,) in tables)}"] if tables else []),
         *[f"VACUUM ANALYZE {t}" for (t,) in tables])


# --------------------------------------------------------------------------- processes

def dueflow_bin() -> str:
    return str(Path(sys.executable).parent / "dueflow")


def run_dueflow(args: list[str], url: str, check: bool = False, env: dict[str, str] | None = None) -> None:
    done = subprocess.run([dueflow_bin(), *args], env=(env or os.environ) | {"DUEFLOW_DATABASE_URL": url},
                          capture_output=True, text=True)
    if check and done.returncode:
        raise SystemExit(f"dueflow {' '.join(args)} failed: {done.stderr[-2000:]}")


@dataclass
class Run:
    seconds: float
    rss_mb: float
    returncode: int
    out: str
    started_at: float = 0.0  # time.time() when the process was started
    ended_at: float = 0.0  # and when it ended


def timed(argv: list[str], env: dict[str, str]) -> Run:
    """Wall time and peak RSS (the kernel's, of this one process) of a fresh process."""
    with tempfile.TemporaryFile("w+", encoding="utf-8") as out:
        started_at, started = time.time(), time.perf_counter()
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
        _pid, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read()
    return Run(round(seconds, 3), round(usage.ru_maxrss / 1024, 1), proc.returncode, text[-3000:],
               started_at, started_at + seconds)


def timeline(run: Run, arrivals: tuple[float, float] | None) -> dict[str, float]:
    """When a night's first and last email reached the sink, in seconds after its process
    started, and how long the process went on after the last: where its time went."""
    if arrivals is None:
        return {}
    first, last = arrivals
    return {"first_email": round(first - run.started_at, 3), "last_email": round(last - run.started_at, 3),
            "after_last": round(run.ended_at - last, 3)}


def floor_parts(run: Run) -> dict[str, float]:
    """The empty flow run's start (its process started → its body ran) and end (the body →
    the process ended), from the time its body printed (the last line that is a number:
    Prefect may log after it)."""
    for line in reversed(run.out.splitlines()):
        try:
            body = float(line)
        except ValueError:
            continue
        return {"start": round(body - run.started_at, 3), "end": round(run.ended_at - body, 3)}
    return {}


def compile_tree(root: Path) -> None:
    """dueflow's modules compiled to bytecode, as pip compiles a package it installs: a
    user's nights read it, so a benchmark that times them must not compile ~80 modules from
    source in every process (an editable install under PYTHONDONTWRITEBYTECODE would: about
    0.2 s a night on this machine). Prefect's own modules, installed by pip, are compiled."""
    import compileall

    package = root / "dueflow"
    for folder in (package, *(p.resolve() for p in package.iterdir() if p.is_dir())):
        compileall.compile_dir(folder, quiet=1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrefectServer:
    """`prefect server start` in its own home, as a user starts it."""

    def __init__(self) -> None:
        self.home = tempfile.mkdtemp(prefix="dueflow-nights-prefect-")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/api"
        self.log = open(Path(self.home) / "server.log", "w", encoding="utf-8")  # noqa: SIM115 - closed in stop()
        env = os.environ | {"PREFECT_HOME": self.home, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
        self.proc = subprocess.Popen([str(Path(sys.executable).parent / "prefect"), "server", "start",
                                      "--host", "127.0.0.1", "--port", str(self.port)],
                                     env=env, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)

    def wait(self, timeout: float = 180) -> float:
        started = time.perf_counter()
        while time.perf_counter() - started < timeout:
            if self.proc.poll() is not None:
                tail = (Path(self.home) / "server.log").read_text()[-2000:]
                raise SystemExit(f"prefect server exited: {tail}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as reply:
                    if reply.status == 200:
                        return time.perf_counter() - started
            except OSError:
                time.sleep(0.5)
        raise SystemExit("prefect server did not answer in time")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()
        shutil.rmtree(self.home, ignore_errors=True)


def machine_line(url: str) -> str:
    from sqlalchemy import create_engine

    from bench.machine import describe_machine, machine_speed

    engine = create_engine(url)
    try:
        return describe_machine(machine_speed(engine))
    finally:
        engine.dispose()


# --------------------------------------------------------------------------- nights

def night_dates(as_of: date) -> dict[str, date]:
    return {"first": as_of, "again": as_of, "steady": as_of + timedelta(days=1)}


def mail_path(capture: Path, sink: Any, env: dict[str, str], label: str) -> dict[str, Any]:
    """The captured messages replayed by bench/mail_path.py over 1, 4 and 8 connections to the
    same sink, each a process of its own; the sink's count checked against every replay."""
    with capture.open(encoding="ascii") as lines:
        messages = sum(1 for _ in lines)
    out: dict[str, Any] = {"messages": messages, "by_connections": {}}
    for connections in MAIL_PATH_CONNECTIONS:
        before = sink.received
        run = timed([sys.executable, "-m", "bench.mail_path", str(capture), "127.0.0.1", str(sink.port),
                     str(connections)], env)
        received = sink.wait_for(before + messages) - before
        figures = json.loads(run.out.strip().splitlines()[-1]) if run.returncode == 0 else {}
        out["by_connections"][str(connections)] = figures | {"received": received,
                                                             "returncode": run.returncode}
        log(f"{label} mail path, {connections} connection(s): {figures.get('seconds', 0):7.2f} s"
            f"  {figures.get('per_second', 0):8.1f} msg/s  sink counted {received:,} of {messages:,}"
            f"  exit {run.returncode}")
        if run.returncode or received != messages:
            log(f"{label} mail path: NOT every message arrived ({run.out[-500:]})")
    done = [f for f in out["by_connections"].values() if f.get("seconds") and f["received"] == messages]
    fastest = min(done, key=lambda f: f["seconds"], default=None)
    out["fastest"] = fastest and {"connections": fastest["connections"], "seconds": fastest["seconds"],
                                  "per_second": fastest["per_second"]}
    return out


def alone(url: str, day: date, env: dict[str, str], sink: Any, label: str) -> dict[str, Any]:
    """bench/delivery_alone.py after a first night: the same emails delivered again by
    tasks/deliver.py alone (no Prefect, no composing), on DELIVERY_WORKERS threads."""
    before = sink.received
    run = timed([sys.executable, "-m", "bench.delivery_alone", url, day.isoformat(), str(DELIVERY_WORKERS)],
                env)
    received = sink.wait_for(before + 1) - before
    figures = json.loads(run.out.strip().splitlines()[-1]) if run.returncode == 0 else {}
    log(f"{label} delivery alone, {DELIVERY_WORKERS} threads: {figures.get('seconds', 0):7.2f} s"
        f"  {figures.get('per_second', 0):8.1f} emails/s  sink counted {received:,}  exit {run.returncode}")
    if run.returncode:
        log(run.out[-1500:])
    return figures | {"received": received, "returncode": run.returncode}


def measure_shape(label: str, url: str, as_of: date, runs: int, env: dict[str, str], sink: Any,
                  profile_dir: Path | None, naive: bool, only: str, nights: tuple[str, ...],
                  scratch: Path, delivery_alone: bool = False) -> dict[str, Any]:
    mail_host, mail_port = "127.0.0.1", str(sink.port)
    dueflow_env = env | {"DUEFLOW_DATABASE_URL": url}
    out: dict[str, Any] = {n: {"seeds": [], "seeds_flow": [], "dueflow": [], "naive": [], "mail_path": [],
                               "delivery_alone": []} for n in nights}
    capture = scratch / f"first_night_{label}.jsonl"
    for rep in range(runs):
        reset_ledgers(url)
        for night, day in night_dates(as_of).items():
            if night not in nights:
                continue
            seeds = [sys.executable, "-m", "bench.seeds", url, mail_host, mail_port, day.isoformat()]
            commands = {"seeds": seeds, "seeds_flow": [*seeds[:3], "--flow", *seeds[3:]],
                        "dueflow": [dueflow_bin(), "run", "--as-of", day.isoformat()]}
            for who in ("seeds", "seeds_flow", "dueflow"):
                if (only and who.split("_")[0] != only) or (who == "seeds_flow" and night != "first"):
                    continue
                if who == "seeds_flow":  # the flow starts from the same empty table as the process did
                    psql(url.rsplit("/", 1)[1], "DROP TABLE IF EXISTS seeds_sent")
                captured = who == "dueflow" and night == "first"
                if captured:  # what dueflow sends on its first night, for the mail path
                    capture.unlink(missing_ok=True)
                    sink.capture(str(capture))
                before = sink.received
                sink.mark()
                run = timed(commands[who], dueflow_env)
                time.sleep(0.3)
                received = sink.wait_for(before) - before
                if captured:
                    sink.end_capture()
                out[night][who].append(run.__dict__ | {"received": received} | timeline(run, sink.arrivals))
                log(f"{label} run {rep + 1} {night:6} {who:10} {run.seconds:7.2f} s  RSS {run.rss_mb:6.0f} MB"
                    f"  emails {received:,}  exit {run.returncode}")
                if run.returncode:
                    log(run.out)
                if captured:
                    path = mail_path(capture, sink, env, label)
                    out[night]["mail_path"].append(path | {"dueflow_sent": received})
                    if path["messages"] != received:
                        log(f"{label}: captured {path['messages']:,} messages, the sink counted {received:,}")
                    if delivery_alone:
                        out[night]["delivery_alone"].append(alone(url, day, dueflow_env, sink, label))
    if naive:  # its own ledger sequence: it writes dueflow_ledger rows
        reset_ledgers(url)
        for night, day in night_dates(as_of).items():
            if night not in nights:
                continue
            run = timed([sys.executable, "-m", "bench.naive", url, mail_host, mail_port, day.isoformat(),
                         MAIL_FROM, ESCALATION_TO, "[15, 30, 60]", "[7, 5, 7]"], dueflow_env)
            out[night]["naive"].append(run.__dict__)
            log(f"{label} {night:6} naive   {run.seconds:7.2f} s  RSS {run.rss_mb:6.0f} MB")
    if profile_dir:  # the first and the nothing-new night under cProfile, imports included
        reset_ledgers(url)
        day = night_dates(as_of)
        profile_dir.mkdir(parents=True, exist_ok=True)
        for night, name in (("first", "first"), ("again", "nothing_new")):
            if night not in nights:
                continue
            path = profile_dir / f"{name}_{label}.prof"
            timed([sys.executable, "-m", "bench.profile_run", str(path), "run", "--as-of",
                   day[night].isoformat()], dueflow_env)
            log(f"{label}: profile of the {night} night in {path} (and .txt)")
    return out


def median(runs: list[dict[str, Any]], field: str) -> float | None:
    values = [r[field] for r in runs if r.get("returncode", 0) == 0 and r.get(field) is not None]
    return statistics.median(values) if values else None


def summarise(nights: dict[str, Any], floor: float | None) -> dict[str, dict[str, Any]]:
    """Each night's medians and what follows from them: the mail path (measured on the first
    night; 0 for a night that sent nothing; on another night with emails, estimated from the
    first night's fastest rate), dueflow's other work = (dueflow − floor) − mail path, and the
    delivery rate against the mail path = mail path ÷ (dueflow − floor)."""
    first_paths = [m["fastest"] for m in nights.get("first", {}).get("mail_path", []) if m["fastest"]]
    rate = statistics.median(f["per_second"] for f in first_paths) if first_paths else None
    out = {}
    for night, r in nights.items():
        d, emails = median(r["dueflow"], "seconds"), median(r["dueflow"], "received")
        paths = [m["fastest"]["seconds"] for m in r["mail_path"] if m["fastest"]]
        estimated = False
        if paths:
            path: float | None = statistics.median(paths)
        elif emails == 0:
            path = 0.0
        elif emails and rate:
            path, estimated = emails / rate, True
        else:
            path = None
        over_floor = d - floor if d is not None and floor is not None else None
        pairs = [a["seconds"] / b["seconds"] for a, b in zip(r["seeds"], r["dueflow"], strict=False)]
        out[night] = {
            "emails": emails, "floor": floor, "mail_path": path, "mail_path_estimated": estimated,
            "seeds": median(r["seeds"], "seconds"), "seeds_flow": median(r["seeds_flow"], "seconds"),
            "dueflow": d, "naive": median(r["naive"], "seconds"),
            "other_work": over_floor - path if over_floor is not None and path is not None else None,
            "delivery_vs_mail_path": path / over_floor if path and over_floor and over_floor > 0 else None,
            "emails_per_second": emails / d if emails and d else None,
            "seeds_over_dueflow": statistics.median(pairs) if pairs else None,
            "rss_dueflow": median(r["dueflow"], "rss_mb"), "rss_seeds": median(r["seeds"], "rss_mb"),
            "rss_seeds_flow": median(r["seeds_flow"], "rss_mb"),
            **{part: median(r["dueflow"], part) for part in ("first_email", "last_email", "after_last")},
            "mail_path_rate": rate,
        }
    return out


def cell(value: float | None, width: int, fmt: str = ".2f", suffix: str = "") -> str:
    return f"{(format(value, fmt) + suffix) if value is not None else '—':>{width}}"


def report(results: dict[str, Any], machine: str) -> str:
    lines = [f"machine: {machine}", ""]
    floor = None
    floor_start = floor_end = None
    if results.get("floor"):
        floor = statistics.median(r["seconds"] for r in results["floor"])
        floor_start, floor_end = median(results["floor"], "start"), median(results["floor"], "end")
        lines += [f"empty Prefect flow run as a process (the floor): median {floor:.2f} s of"
                  f" {[r['seconds'] for r in results['floor']]}; up to its body {cell(floor_start, 0)} s,"
                  f" after it {cell(floor_end, 0)} s", ""]
    naive = any(r["naive"] for x in results["shapes"].values() for r in x["nights"].values())
    header = (f"{'shape':13} {'night':7} {'emails':>7} {'floor s':>8} {'mail path s':>12} {'seeds s':>8}"
              f" {'seeds flow s':>13} {'dueflow s':>10} {'other work s':>13} {'seeds/dueflow':>14}"
              f" {'RSS dueflow':>12} {'RSS seeds':>10} {'RSS seeds flow':>15}"
              + (f" {'naive s':>8} {'naive/dueflow':>14}" if naive else ""))
    lines += [header, "-" * len(header)]
    for label, shape in results["shapes"].items():
        shape["summary"] = summary = summarise(shape["nights"], floor)
        for night, x in summary.items():
            path = cell(x["mail_path"], 11, suffix="~" if x["mail_path_estimated"] else " ")
            naive_ratio = x["naive"] / x["dueflow"] if x["naive"] and x["dueflow"] else None
            lines.append(
                f"{label:13} {night:7} {cell(x['emails'], 7, ',.0f')} {cell(x['floor'], 8)} {path}"
                f" {cell(x['seeds'], 8)} {cell(x['seeds_flow'], 13)} {cell(x['dueflow'], 10)}"
                f" {cell(x['other_work'], 13)} {cell(x['seeds_over_dueflow'], 13)}×"
                f" {cell(x['rss_dueflow'], 9, '.0f')} MB {cell(x['rss_seeds'], 7, '.0f')} MB"
                f" {cell(x['rss_seeds_flow'], 12, '.0f')} MB"
                + (f" {cell(x['naive'], 8)} {cell(naive_ratio, 13)}×" if naive else ""))
    lines += ["", "mail path ~: estimated from the first night's fastest rate (not measured on that night);"
              " other work = (dueflow − floor) − mail path"]
    for label, shape in results["shapes"].items():
        for m in shape["nights"].get("first", {}).get("mail_path", []):
            by = "; ".join(f"{c} conn. {f.get('seconds', 0):.2f} s ({f.get('per_second', 0):,.0f} msg/s,"
                           f" sink counted {f['received']:,})" for c, f in m["by_connections"].items())
            fastest = f"fastest {m['fastest']['connections']} conn." if m["fastest"] else "NONE complete"
            lines.append(f"mail path {label}, first night, {m['messages']:,} messages captured of"
                         f" {m.get('dueflow_sent', 0):,} dueflow sent: {by}; {fastest}")
    lines += ["", "dueflow's timeline (medians), seconds after its process started: its first and last email"
              " at the sink and its rate in between (the mail path's fastest, whole), how long it went on"
              " after the last. Other work, in three parts: before the first email beyond the floor's start,"
              " the delivery beyond the mail path's time, after the last email beyond the floor's end"]
    for label, shape in results["shapes"].items():
        for night, x in shape["summary"].items():
            if x.get("first_email") is None:
                continue
            window = x["last_email"] - x["first_email"]
            rate = x["emails"] / window if x["emails"] and window > 0 else None
            parts = (x["first_email"] - floor_start if floor_start is not None else None,
                     window - x["mail_path"] if x["mail_path"] is not None else None,
                     x["after_last"] - floor_end if floor_end is not None else None)
            lines.append(f"timeline {label:10} {night:6}: first email {x['first_email']:6.2f} s, last"
                         f" {x['last_email']:6.2f} s ({cell(rate, 0, ',.0f')} emails/s in between; mail path"
                         f" {cell(x['mail_path_rate'], 0, ',.0f')}/s), ends {x['after_last']:.2f} s after it;"
                         f" other work {cell(parts[0], 0)} + {cell(parts[1], 0)} + {cell(parts[2], 0)} s")
    for label, shape in results["shapes"].items():
        first = shape["nights"].get("first", {})
        runs = [r for r in first.get("delivery_alone", []) if r.get("per_second")]
        if not runs:
            continue
        rate = statistics.median(r["per_second"] for r in runs)
        path = shape["summary"]["first"]["mail_path_rate"]
        share = 100 * rate / path if path else None
        lines.append(f"delivery alone {label}: tasks/deliver.py on {DELIVERY_WORKERS} threads, no Prefect, no"
                     f" composing, the first night's emails again: median {rate:,.0f} emails/s of"
                     f" {[r['per_second'] for r in runs]} = {cell(share, 0, '.0f')} % of the mail path's"
                     f" fastest ({cell(path, 0, ',.0f')}/s)")
    for label, shape in results["shapes"].items():
        x = shape["summary"].get("first")
        if shape.get("kind") != "surge" or not x:
            continue
        rate = x["delivery_vs_mail_path"] and 100 * x["delivery_vs_mail_path"]
        seeds_rate = median(shape["nights"]["first"]["seeds"], "received")
        seeds_rate = seeds_rate / x["seeds"] if seeds_rate and x["seeds"] else None
        lines.append(
            f"surge {label}, {cell(x['emails'], 0, ',.0f')} emails: dueflow {cell(x['dueflow'], 0)} s,"
            f" {cell(x['emails_per_second'], 0, ',.0f')} emails/s, peak RSS"
            f" {cell(x['rss_dueflow'], 0, '.0f')} MB;"
            f" seeds' script {cell(x['seeds'], 0)} s, {cell(seeds_rate, 0, ',.0f')} emails/s, peak RSS"
            f" {cell(x['rss_seeds'], 0, '.0f')} MB; mail path {cell(x['mail_path'], 0)} s; delivery rate vs"
            f" mail path = mail path ÷ (dueflow − floor) = {cell(rate, 0, '.0f')} %")
    labels = [x for x, shape in results["shapes"].items() if shape.get("kind") != "surge"]
    if len(labels) > 1:
        small, large = (results["shapes"][x]["nights"] for x in (labels[0], labels[-1]))
        lines.append("")
        for who in ("dueflow", "seeds"):
            for night in NIGHTS:
                if night not in small or night not in large:
                    continue
                a, b = median(small[night][who], "seconds"), median(large[night][who], "seconds")
                if a and b:
                    lines.append(f"growth {labels[0]} → {labels[-1]}, {night:6} night, {who:7}: {b / a:.2f}×"
                                 f" ({a:.2f} → {b:.2f} s)")
            rss = [max((r["rss_mb"] for n in x for r in x[n][who]), default=0) for x in (small, large)]
            lines.append(f"peak RSS {who:7}: {labels[0]} {rss[0]:.0f} MB, {labels[-1]} {rss[1]:.0f} MB")
        a, b = (results["shapes"][x]["summary"].get("again", {}).get("other_work")
                for x in (labels[0], labels[-1]))
        if a is not None and b is not None:
            lines.append(f"growth {labels[0]} → {labels[-1]}, again  night, dueflow's other work:"
                         f" {f'{b / a:.2f}×' if a > 0 else '—'} ({a:.2f} → {b:.2f} s)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.nights", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="one small shape (20k rows), for a quick check")
    parser.add_argument("--scales", default="1,5", help="scales of the issue's shape, e.g. 1 or 1,5")
    parser.add_argument("--runs", type=int, default=1, help="pairs of each night per scale (medians)")
    parser.add_argument("--reuse-data", action="store_true", 
                        help="keep each shape's database when it holds it")
    parser.add_argument("--naive", action="store_true", 
                        help="also the heavier per-row script (bench/naive.py)")
    parser.add_argument("--only", choices=("seeds", "dueflow"), default="", help="run one side only")
    parser.add_argument("--profile-dir", default=None,
                        help="cProfile the first and the nothing-new night into this folder")
    parser.add_argument("--as-of", type=date.fromisoformat, default=AS_OF)
    parser.add_argument("--tree", default=None,
                        help="a directory holding another dueflow tree as dueflow/ (e.g. the code before a"
                             " change): `dueflow run` imports it (PYTHONPATH)")
    parser.add_argument("--floor", type=int, default=3, metavar="N",
                        help="time N empty Prefect flow runs as processes, the floor of any flow (median)")
    parser.add_argument("--surge", action="append", default=[], metavar="N[,N]",
                        help="also the 1x shape (the small one with --small) with N emails due on the first"
                             " night, which alone is measured; repeatable or a comma list, e.g. 30000,100000")
    parser.add_argument("--nights", default=",".join(NIGHTS),
                        help="the nights of each scale, of first,again,steady (each follows the ones before"
                             " it as run: again without first is a first night)")
    parser.add_argument("--floor-only", action="store_true", help="only the floor (with --floor N)")
    parser.add_argument("--delivery-alone", action="store_true",
                        help="after each first night, its emails delivered again by tasks/deliver.py alone"
                             " (bench/delivery_alone.py): between the night and the mail path")
    parser.add_argument("--generate-only", action="store_true", help="make (or check) the data and stop")
    parser.add_argument("--json", default="bench/out/nights.json")
    args = parser.parse_args(argv)
    chosen = tuple(n for n in NIGHTS if n in args.nights.split(","))
    if not chosen or set(args.nights.split(",")) - set(NIGHTS):
        parser.error(f"--nights takes some of {','.join(NIGHTS)}")
    shapes = {"small": Shape.small()} if args.small else {
        f"{s}x": Shape.scaled(float(s)) for s in args.scales.split(",")}
    kinds = dict.fromkeys(shapes, "scale")
    nights = dict.fromkeys(shapes, chosen)
    base = Shape.small() if args.small else Shape.scaled(1)
    for emails in (int(n) for arg in args.surge for n in arg.split(",") if n.strip()):
        label = ("small_" if args.small else "") + (f"surge{emails // 1000}k" if emails % 1000 == 0
                                                    else f"surge{emails}")
        shapes[label], kinds[label], nights[label] = base.surge(emails), "surge", ("first",)

    from bench.smtp_sink import SinkProcess

    client_home = tempfile.mkdtemp(prefix="dueflow-nights-client-")
    scratch = Path(tempfile.mkdtemp(prefix="dueflow-nights-mail-"))  # the captured first nights
    env = dict(os.environ) | {
        "PREFECT_HOME": client_home, "PREFECT_LOGGING_LEVEL": "WARNING",
        "DUEFLOW_MAIL_FROM": MAIL_FROM, "DUEFLOW_ESCALATION_TO": ESCALATION_TO, "DUEFLOW_TIMEZONE": "UTC",
        # The nights are dates of the benchmark's own (--as-of), not today's: what the
        # setting is for (docs/parameters.md). A tree older than the setting ignores it.
        "DUEFLOW_ALLOW_ANY_AS_OF": "on",
        # A first night of thousands of emails waits for a person (docs/operations.md, "A night
        # that looks wrong"); the benchmark measures the night's work, as a company that has
        # approved it would run it. A tree older than the setting ignores it.
        "DUEFLOW_GUARD": "off",
    }
    env.pop("OPENAI_API_KEY", None)
    if args.tree:
        env["PYTHONPATH"] = str(Path(args.tree).resolve())
    os.environ.update({k: v for k, v in env.items() if k.startswith("DUEFLOW_")})
    urls = {label: ensure_data(shape, label, args.as_of, args.reuse_data) for label, shape in shapes.items()}
    if args.generate_only:
        return 0
    compile_tree(Path(args.tree).resolve() if args.tree else Path(__file__).resolve().parent.parent)
    machine = machine_line(next(iter(urls.values()))[0])
    log(f"machine: {machine}")
    results: dict[str, Any] = {"machine": machine, "shapes": {}, "as_of": args.as_of.isoformat(),
                               "tree": args.tree or "working tree"}
    server = PrefectServer()
    try:
        log(f"prefect server start: up in {server.wait():.1f} s (not counted)")
        env["PREFECT_API_URL"] = server.url
        if args.floor:
            runs = [timed([sys.executable, "-c", EMPTY_FLOW], env) for _ in range(args.floor)]
            results["floor"] = [r.__dict__ | floor_parts(r) for r in runs]
            log(f"empty Prefect flow run as a process: {[r.seconds for r in runs]} s"
                f" (exit {[r.returncode for r in runs]})")
        with SinkProcess() as sink:
            env["DUEFLOW_MAIL_URL"] = sink.url
            for label, (url, generated) in ({} if args.floor_only else urls).items():
                results["shapes"][label] = {
                    "shape": shapes[label].__dict__, "kind": kinds[label], "generated_seconds": generated,
                    "nights": measure_shape(label, url, args.as_of, args.runs, env, sink,
                                            Path(args.profile_dir) if args.profile_dir else None,
                                            args.naive, args.only, nights[label], scratch,
                                            args.delivery_alone)}
    finally:
        server.stop()
        shutil.rmtree(client_home, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
    text = report(results, machine)
    print()
    print(text)
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2), encoding="utf-8")
    path.with_suffix(".txt").write_text(text + "\n")
    print(f"\nfigures written to {path} and {path.with_suffix('.txt')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
