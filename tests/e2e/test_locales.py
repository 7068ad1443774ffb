"""One night run under two locales writes the same bytes (issue 45): the emails, what the
command prints, the run's artifacts, logs and final state, the ledger, and the forecast that
names the holidays — apart from run ids and times. Each night is a real `dueflow` process
started as a worker's shell starts it, on a copy of one database (so the Message-IDs, keyed
with its secret, are the same), with a business calendar (Madrid's holidays, a closure).

The locales: C (Python's UTF-8 mode, gettext's untranslated names) and es_ES.UTF-8 with
LANGUAGE=es (the holidays package names Madrid's 19 March "San José" there when it is left
to guess), its terminal Latin-1 (PYTHONIOENCODING, as a Latin-1 locale sets it: the first €
was a UnicodeEncodeError). Where es_ES.UTF-8 is not generated (`locale -a`), what reads the
variables still reads Spanish ones; .ci/run generates it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from datetime import date
from email.utils import parsedate_to_datetime
from pathlib import Path

from dueflow.tasks.adapters import db
from dueflow.tasks.adapters.sample_data import seed_sample_data

ROOT = Path(__file__).resolve().parents[2]
SEEDED = date(2027, 3, 15)  # a Monday: the sample invoice sent on the 12th falls due on Friday 19th
LOCALES = {"C": {"LC_ALL": "C"},
           "es_ES": {"LANG": "es_ES.UTF-8", "LANGUAGE": "es", "PYTHONIOENCODING": "latin-1"}}
LOCALE_VARIABLES = ("LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "LC_TIME", "LC_NUMERIC",
                    "LC_MONETARY", "LC_COLLATE", "LANG", "PYTHONIOENCODING", "PYTHONUTF8")
CALENDAR = {"DUEFLOW_HOLIDAYS": "ES-MD", "DUEFLOW_BUSINESS_DAYS": "mon-fri",
            "DUEFLOW_ESCALATION_TO": "cobros@harbour-supplies.example",
            "DUEFLOW_COMPANY_NAME": "Suministros del Puerto S.L. — Área de cobros"}
RUN_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
TIMES = [re.compile(p) for p in (
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?",  # ISO 8601 instants
    r"(?m)^Date: .*$",  # the email's Date header: checked apart, below
    r"\b\d{2}:\d{2}:\d{2}\.\d{3}\b",  # Prefect's console log lines
    r"\b[0-9a-f]{32}\b")]  # the storage key of the run's persisted result


def masked(text: str, folder: Path) -> str:
    text = text.replace(str(folder), "<folder>")
    text = RUN_ID.sub("<run id>", text)
    for pattern in TIMES:
        text = pattern.sub("<time>", text)
    return text


def environment(folder: Path, locale: dict[str, str], api: str) -> dict[str, str]:
    kept = {k: v for k, v in os.environ.items()
            if not k.startswith("DUEFLOW_") and k not in LOCALE_VARIABLES}
    return kept | locale | CALENDAR | {
        "PYTHONPATH": str(ROOT), "HOME": str(folder), "PREFECT_API_URL": api,
        "DUEFLOW_ALLOW_ANY_AS_OF": "on", "DUEFLOW_DATABASE_URL": f"sqlite:///{folder / 'dueflow.db'}",
        # Relative to the night's folder, as an operator writes them, so that what the night
        # prints about them is the same; the database's own path tells the ledgers apart.
        "DUEFLOW_MAIL_URL": "file://outbox", "DUEFLOW_CLOSED_DAYS_FILE": "closed.txt"}


def in_both(args: list[str], folders: dict[str, Path], api: str) -> dict[str, bytes]:
    """`dueflow ARGS` in each locale's folder at once; what each printed, as bytes."""
    started = {name: subprocess.Popen([sys.executable, "-m", "dueflow.flows.cli", *args], cwd=folder,
                                      env=environment(folder, LOCALES[name], api),
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)
               for name, folder in folders.items()}
    printed = {}
    for name, process in started.items():
        out, err = process.communicate(timeout=180)
        assert process.returncode == 0, (name, err.decode("utf-8", "replace")[-3000:])
        printed[name] = out + b"\n--- stderr ---\n" + err
    return printed


def what_prefect_kept(api: str, run_id: str) -> str:
    """The run's final state, artifacts and logs (log order across threads is not the locale's)."""
    import httpx

    run = httpx.get(f"{api}/flow_runs/{run_id}", timeout=30).json()
    artifacts = httpx.post(f"{api}/artifacts/filter", timeout=30,
                           json={"artifacts": {"flow_run_id": {"any_": [run_id]}}}).json()
    logs = httpx.post(f"{api}/logs/filter", timeout=30,
                      json={"logs": {"flow_run_id": {"any_": [run_id]}}}).json()
    return json.dumps({
        "state": [run["name"], run["state"]["type"], run["state"]["name"], run["state"]["message"]],
        "artifacts": sorted(json.dumps([a["key"], a["type"], a["description"], a["data"]], sort_keys=True)
                            for a in artifacts),
        "logs": sorted(f"{log['level']} {log['name']} {log['message']}" for log in logs),
    }, indent=1, ensure_ascii=False)


def test_one_night_under_two_locales_writes_the_same_bytes(tmp_path, prefect_server):
    seeded = tmp_path / "seeded.db"
    engine = db.engine_for(f"sqlite:///{seeded}")
    db.init_db(engine, sample_tables=True)
    seed_sample_data(engine, SEEDED)
    engine.dispose()
    folders = {name: tmp_path / f"night-{n}" for n, name in enumerate(LOCALES)}  # paths of one length
    for folder in folders.values():
        folder.mkdir()
        shutil.copy(seeded, folder / "dueflow.db")
        (folder / "closed.txt").write_text("2027-03-23 inventario anual — almacén\n", encoding="utf-8")

    night = in_both(["run", "--as-of", SEEDED.isoformat()], folders, prefect_server)
    forecast = in_both(["forecast", "--from", SEEDED.isoformat(), "--days", "10"], folders, prefect_server)

    produced: dict[str, dict[str, str]] = {}
    for name, folder in folders.items():
        [run_id] = set(re.findall(r"flow-run/(" + RUN_ID.pattern + ")", night[name].decode("utf-8")))
        files = {f"outbox/{p.name}": p.read_bytes().decode("utf-8")
                 for p in sorted((folder / "outbox").iterdir())}
        for eml in files.values():  # the Date header in RFC 5322's own English, whatever the locale
            parsedate_to_datetime(re.search(r"(?m)^Date: (.*)\r?$", eml).group(1))
        ledger = db.read_frame(db.engine_for(f"sqlite:///{folder / 'dueflow.db'}"),
                               "SELECT * FROM dueflow_ledger ORDER BY key", {})
        produced[name] = {
            "night (stdout, stderr)": night[name].decode("utf-8"),
            "forecast (stdout, stderr)": forecast[name].decode("utf-8"),
            "Prefect: state, artifacts, logs": what_prefect_kept(prefect_server, run_id),
            "ledger": ledger.to_json(orient="records", lines=True, force_ascii=False),
            **files}
        produced[name] = {what: masked(text, folder) for what, text in produced[name].items()}

    c, spanish = produced["C"], produced["es_ES"]
    assert sum(what.endswith(".eml") for what in c) == 10  # the sample night: every kind of email
    assert "10 sent" in c["night (stdout, stderr)"]
    table = c["forecast (stdout, stderr)"].splitlines()
    why = " ".join(" ".join(line[table[0].index("why"):] for line in table).split())  # its last column
    # (a wrapped cell joined again: a line may end before the colon, whatever the width)
    assert "moved from 2027-03-19: holiday: Saint Joseph's Day, Saturday, Sunday" in why.replace(" :", ":")
    assert "hace 21 días" in c["ledger"] and "980,40 €" in c["ledger"]  # the Spanish client's own
    assert c.keys() == spanish.keys()
    for what in c:
        assert c[what] == spanish[what], f"{what} differs between the locales"
