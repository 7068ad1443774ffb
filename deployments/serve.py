"""Serve the nightly flow from this process, without a work pool.

    python -m dueflow.deployments.serve    # cron and time zone from the environment

The served deployment has the same fence as `prefect.yaml`: a deployment
concurrency limit of 1 that cancels a run started while another is active.
"""

from __future__ import annotations

from prefect.client.schemas.objects import ConcurrencyLimitConfig, ConcurrencyLimitStrategy
from prefect.schedules import Cron

from dueflow.blocks.settings import Settings
from dueflow.flows.nightly_alerts import nightly_alerts

DEPLOYMENT_NAME = "nightly"
ONE_AT_A_TIME = ConcurrencyLimitConfig(
    limit=1, collision_strategy=ConcurrencyLimitStrategy.CANCEL_NEW
)


def main() -> None:
    settings = Settings.from_env()
    timezone = settings.schedule_timezone or settings.timezone
    deployment = nightly_alerts.to_deployment(
        name=DEPLOYMENT_NAME,
        schedules=[Cron(settings.schedule_cron, timezone=timezone, slug="nightly")],
        concurrency_limit=ONE_AT_A_TIME,
        description="Renewal alerts, exactly once per key.",
    )
    from prefect import serve

    serve(deployment)  # type: ignore[arg-type]  # to_deployment, called from sync code, is not a coroutine


if __name__ == "__main__":
    main()
