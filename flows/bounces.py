"""Bounce intake: `dueflow.flows.bounces:ingest_bounces` (docs/bounces.md), the flow that
reads the mailbox bounces arrive at and marks the ledger rows they are about `bounced`.
Deployed beside the nightly run (prefect.yaml, `bounces`: hourly, its own concurrency
limit); `dueflow bounces` runs it once."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from prefect import State, flow, get_run_logger
from prefect.runtime import flow_run
from pydantic import StrictInt

from dueflow.blocks.errors import ConfigError
from dueflow.blocks.settings import Settings

if TYPE_CHECKING:
    from dueflow.tasks.bounces import IntakeSummary

NEEDS_ATTENTION_EVENT = "dueflow.run.needs-attention"


@flow(name="ingest-bounces", persist_result=True)
def ingest_bounces(batch: StrictInt = 100) -> State:  # strict: True is not a batch of 1
    """Read the bounce mailbox (DUEFLOW_BOUNCE_URL): hard bounces mark their ledger rows
    `bounced`, soft ones are recorded, anything else is kept aside; processed messages are
    marked (a keyword, or moved), never deleted unless the URL asks.

    Args:
        batch: Messages read, recorded and marked at a time.

    Returns:
        The run's final state, whose result is the IntakeSummary.
    """
    from prefect.artifacts import create_markdown_artifact

    from dueflow.flows.prefect_api import quiet_own_task_runs
    from dueflow.tasks import bounces
    from dueflow.tasks.adapters import db

    quiet_own_task_runs()
    settings = Settings.from_env().with_blocks()
    config = settings.bounce_mailbox()
    if config is None:
        raise ConfigError("no bounce mailbox: set DUEFLOW_BOUNCE_URL (imaps://user:pass@host/INBOX or"
                          " maildir:///path) or DUEFLOW_BOUNCE_BLOCK")
    if batch < 1:
        raise ConfigError(f"batch must be at least 1, got {batch}")
    database = db.open_database(settings, sources=False)
    summary = bounces.intake(database, config, batch, recorder=bounces.record_batch)
    bounced = db.bounced_rows(database.engine)
    create_markdown_artifact(key="dueflow-bounces", markdown=bounces.markdown(summary, bounced))
    return finish(summary)


def finish(summary: IntakeSummary) -> State:
    """Completed, "Needs attention" (with the event) when rows bounced or messages were kept."""
    from prefect.events import emit_event
    from prefect.states import Completed

    get_run_logger().info("%s", summary.headline())
    attention = bool(summary.marked) or not summary.kept.empty
    if attention:
        run_id = flow_run.get_id()
        emit_event(event=NEEDS_ATTENTION_EVENT,
                   resource={"prefect.resource.id": "dueflow.bounces",
                             "prefect.resource.name": "dueflow bounce intake"},
                   related=[{"prefect.resource.id": f"prefect.flow-run.{run_id}",
                             "prefect.resource.role": "flow-run"}] if run_id else [],
                   payload={"headline": summary.headline(), **summary.counts()})
    return Completed(message=summary.headline(), data=summary,
                     name="Needs attention" if attention else "Completed")


def command(args: object, settings: Settings, user_error: type[Exception]) -> int:
    """`dueflow bounces` (flows/cli.py): run the intake once and print what it did, or list
    what is recorded (`--list`, `--kept`) without reading the mailbox."""
    from dueflow.tasks.adapters import db
    from dueflow.tasks.adapters.mailbox import MailboxError

    engine = db.engine_for(settings.database_url, settings.db_lock_timeout, settings.ledger_schema)
    if getattr(args, "list", False) or getattr(args, "kept", False):
        frame = db.kept_reports(engine) if getattr(args, "kept", False) else db.bounce_reports(engine)
        print(frame.fillna("").to_string(index=False) if not frame.empty else "Nothing recorded.")
        return 0
    if settings.bounce_mailbox() is None and not settings.bounce_block:
        raise user_error("no bounce mailbox: set DUEFLOW_BOUNCE_URL (imaps://user:pass@host/INBOX or"
                         " maildir:///path) or DUEFLOW_BOUNCE_BLOCK")
    try:
        # The flow ends in a State (the run's name and event); a call returns its result.
        summary = cast("IntakeSummary", ingest_bounces())
    except MailboxError as exc:
        raise user_error(f"{exc}; nothing was marked (run `dueflow bounces` again)") from None
    for key in summary.marked:
        print(f"bounced  {key}")
    for row in summary.kept.itertuples(index=False):
        print(f"kept     {row.reason}: {row.detail} ({row.source})")
    print(summary.headline())
    if summary.marked or summary.ledger_bounced:
        print("Fix the address, then `dueflow resolve KEY --as failed`: the next run sends it once"
              " (list: `dueflow ledger --status bounced`).")
    return 0
