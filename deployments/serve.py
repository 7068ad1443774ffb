"""Serve the nightly flow from this process, without a work pool.

    python -m dueflow.deployments.serve

One definition: the deployment served is `nightly` of the project's prefect.yaml (this
folder links to it, and the package carries it) — its name, description, tags,
parameters, schedule and concurrency limit of 1 that cancels a run started while another
is active. DUEFLOW_SCHEDULE_CRON and DUEFLOW_SCHEDULE_TIMEZONE, when set, replace its
schedule's cron and time zone.
"""

from __future__ import annotations

from importlib.resources import files
from typing import Any

import yaml
from prefect.client.schemas.objects import ConcurrencyLimitConfig, ConcurrencyLimitStrategy
from prefect.deployments.runner import RunnerDeployment
from prefect.schedules import Cron

from dueflow.blocks.settings import Settings
from dueflow.flows.nightly_alerts import nightly_alerts

DEPLOYMENT_NAME = "nightly"


def defined(name: str = DEPLOYMENT_NAME) -> dict[str, Any]:
    """The deployment `name` as prefect.yaml defines it."""
    text = files("dueflow.deployments").joinpath("prefect.yaml").read_text(encoding="utf-8")
    return next(d for d in yaml.safe_load(text)["deployments"] if d["name"] == name)


def served(settings: Settings) -> RunnerDeployment:
    """prefect.yaml's nightly deployment, for `serve` (no work pool), its schedule as the
    settings may replace it."""
    spec = defined()
    limit = spec["concurrency_limit"]
    schedules = [Cron(settings.schedule_cron or s["cron"],
                      timezone=settings.schedule_timezone or s["timezone"], slug=s["slug"],
                      active=s.get("active", True)) for s in spec["schedules"]]
    deployment = nightly_alerts.to_deployment(
        name=spec["name"], description=spec["description"], tags=spec["tags"],
        parameters=spec.get("parameters", {}), schedules=schedules,
        concurrency_limit=ConcurrencyLimitConfig(
            limit=limit["limit"], collision_strategy=ConcurrencyLimitStrategy(limit["collision_strategy"])))
    assert isinstance(deployment, RunnerDeployment)  # to_deployment, called from sync code
    return deployment


def main() -> None:
    from prefect import serve

    serve(served(Settings.from_env()))


if __name__ == "__main__":
    main()
