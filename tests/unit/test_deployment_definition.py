"""One deployment definition: `python -m dueflow.deployments.serve` serves prefect.yaml's
`nightly` deployment — what `prefect deploy --name nightly` deploys — read from the file,
so the two cannot disagree on its description, tags, parameters, schedule or fence (G5)."""

from __future__ import annotations

from pathlib import Path

import yaml

from dueflow.blocks.settings import Settings
from dueflow.deployments.serve import served

ROOT = Path(__file__).resolve().parents[2]


def nightly() -> dict:
    spec = yaml.safe_load((ROOT / "prefect.yaml").read_text(encoding="utf-8"))
    return next(d for d in spec["deployments"] if d["name"] == "nightly")


def test_the_served_deployment_is_prefect_yamls():
    spec = nightly()
    deployment = served(Settings.from_env({}))
    assert (deployment.name, deployment.description, deployment.tags, deployment.parameters) == (
        spec["name"], spec["description"], spec["tags"], spec["parameters"])
    assert [(s.schedule.cron, s.schedule.timezone, s.slug, s.active) for s in deployment.schedules] == [
        (s["cron"], s["timezone"], s["slug"], s["active"]) for s in spec["schedules"]]
    assert deployment.concurrency_limit == spec["concurrency_limit"]["limit"] == 1
    strategy = deployment.concurrency_options.collision_strategy
    assert strategy == spec["concurrency_limit"]["collision_strategy"]
    assert deployment.entrypoint.replace("\\", "/").endswith(spec["entrypoint"])


def test_the_environment_may_replace_its_schedule_only():
    deployment = served(Settings.from_env({"DUEFLOW_SCHEDULE_CRON": "30 5 * * 1-5",
                                           "DUEFLOW_SCHEDULE_TIMEZONE": "America/New_York"}))
    assert [(s.schedule.cron, s.schedule.timezone, s.slug) for s in deployment.schedules] == [
        ("30 5 * * 1-5", "America/New_York", nightly()["schedules"][0]["slug"])]
    assert deployment.description == nightly()["description"]
