"""The flow's module loads without the steps' libraries: deploying, serving, a worker
and the CLI import it, and each of them pays for what it loads (issue 14). A fresh
interpreter, as a deployment's process starts."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = {"pandas", "numpy", "pyarrow", "sqlalchemy", "jinja2", "babel", "openai", "smtplib"}

PROBE = """
import json, sys
import {module}
print(json.dumps(sorted({{name.split('.')[0] for name in sys.modules}})))
"""


def loaded_by(module: str) -> set[str]:
    result = subprocess.run([sys.executable, "-c", PROBE.format(module=module)], capture_output=True,
                            text=True, timeout=120, check=True)
    return set(json.loads(result.stdout.splitlines()[-1]))


def test_the_flow_module_loads_no_step_library():
    loaded = loaded_by("dueflow.flows.nightly_alerts")
    assert "prefect" in loaded  # the probe sees what the module loads
    assert loaded & HEAVY == set()


def test_the_steps_do_load_them():
    assert {"pandas", "sqlalchemy"} <= loaded_by("dueflow.tasks.night")


def test_prefect_reads_every_parameter_annotation():
    """Prefect builds the run form from the annotations, all of them resolved in the
    module: one it cannot resolve (a name imported only when a run starts) turns every
    parameter into free text."""
    from prefect.utilities.callables import parameter_schema

    from dueflow.flows.nightly_alerts import nightly_alerts

    form = parameter_schema(nightly_alerts.fn).model_dump()["properties"]
    assert form["renewal_locale"]["enum"] == ["en", "de", "es"]  # the packaged words files
    # Empty, the form's default: DUEFLOW_DUNNING_START's (a string, never a None to switch to)
    assert (form["dunning_start"]["enum"], form["dunning_start"]["default"]) == (["", "sent", "due"], "")
    assert "anyOf" not in form["dunning_start"]
    assert form["renewal_leads"]["type"] == "array"
