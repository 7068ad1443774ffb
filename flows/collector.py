"""Python's cycle collector in a process that runs one night (docs/performance.md, "The
collector").

Such a process loads Prefect, pandas, SQLAlchemy and the steps: about 400,000 objects that
live as long as it does. Every full collection of the night scanned them all again: a
3,000-email first night on the benchmark's machine spent 0.9–1.5 s more CPU than it does
now. Once they are loaded, they are moved out of the collector's sight for good
(`gc.freeze`): the night's collections scan only the night's own objects. Only where the
process is the night's alone: a notebook, the tests or any process that runs several nights
keeps the collector as it is.
"""

from __future__ import annotations

import gc
import os


def loading() -> None:
    """The `dueflow` command, as it starts: no collection while the night's modules load
    (`loaded` turns the collector back on)."""
    gc.disable()


def loaded() -> None:
    """The night's modules are loaded: if the command started with the collector off
    (`loading`), freeze what the process holds and turn the collector back on. Called from
    Python, where the collector was never turned off, nothing happens."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def not_a_night() -> None:
    """A command that runs no night loads little: the collector back on at once, nothing
    frozen."""
    gc.enable()


def run_started(flow_run_id: object) -> None:
    """A flow run in a process a Prefect worker or `serve` started for it alone (it names the
    run in PREFECT__FLOW_RUN_ID): what it loaded is frozen. Any other process: nothing."""
    if flow_run_id is not None and os.environ.get("PREFECT__FLOW_RUN_ID") == str(flow_run_id):
        gc.freeze()
