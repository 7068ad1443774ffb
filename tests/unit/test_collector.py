"""The `dueflow` command and Python's cycle collector (flows/collector.py): a
night's process loads ~400,000 objects that live as long as it does, and every full
collection of the night scanned them again — 0.9–1.5 s of CPU of a 3,000-email first night
(docs/performance.md, "The collector"). Each case runs in a process of its own: the
collector's state is the process's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def python(code: str, cwd: Path, **environ: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DUEFLOW_", "PREFECT__"))}
    env |= {"PYTHONPATH": str(ROOT), "HOME": str(cwd), **environ}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, text=True, capture_output=True,
                          timeout=60)


def test_a_night_freezes_what_it_loaded_and_turns_the_collector_back_on(tmp_path):
    done = python("import gc\n"
                  "from dueflow.flows.collector import loaded\n"
                  "gc.disable(); held = [object() for _ in range(10)]\n"
                  "loaded()\n"
                  "print(gc.isenabled(), gc.get_freeze_count() > 1_000)\n"
                  "frozen = gc.get_freeze_count(); more = [[] for _ in range(1000)]\n"
                  "loaded()  # the collector is on: called from Python, nothing happens\n"
                  "print(gc.get_freeze_count() == frozen)\n", tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "True"]


def test_a_short_command_runs_with_the_collector_on(tmp_path):
    # `main()` as the installed command calls it (no argv); a command that is not a night
    # turns the collector back on at once, with nothing frozen.
    done = python("import atexit, gc, sys\n"
                  "atexit.register(lambda: print('collector', gc.isenabled(), gc.get_freeze_count()))\n"
                  "sys.argv = ['dueflow', 'ledger']\n"
                  "from dueflow.flows.cli import main\n"
                  "sys.exit(main())\n", tmp_path)
    assert "Traceback" not in done.stderr
    assert done.stdout.splitlines()[-1] == "collector True 0"


def test_a_night_command_that_stops_before_its_night_says_one_line(tmp_path):
    # The collector is off while the night's modules load: a bad setting still stops the
    # command with its one line, before anything is loaded or written.
    done = python("import os, sys\n"
                  "os.environ['DUEFLOW_MAIL_URL'] = 'smtp://'\n"
                  "sys.argv = ['dueflow', 'run']\n"
                  "from dueflow.flows.cli import main\n"
                  "sys.exit(main())\n", tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("dueflow: error:") and "Traceback" not in done.stderr


def test_a_flow_run_freezes_only_in_a_process_started_for_it(tmp_path):
    # A worker (or `serve`) starts a process per flow run and names the run in
    # PREFECT__FLOW_RUN_ID; a notebook, the tests or a process of another run do not.
    code = ("import gc\n"
            "from dueflow.flows.collector import run_started\n"
            "run_started('{run}'); print(gc.get_freeze_count() > 0)\n")
    own = python(code.format(run="a1b2"), tmp_path, PREFECT__FLOW_RUN_ID="a1b2")
    other = python(code.format(run="a1b2"), tmp_path, PREFECT__FLOW_RUN_ID="c3d4")
    unnamed = python(code.format(run="a1b2"), tmp_path)
    assert [own.stdout.strip(), other.stdout.strip(), unnamed.stdout.strip()] == ["True", "False", "False"]
