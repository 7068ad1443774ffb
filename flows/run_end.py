"""How a night's end reaches the command that ran it: as a value (docs/prefect-api.md).

The flow ends in its final state, whose result is the night's summary. A command reads it
from what the flow call returns — or, when the Prefect API was lost during the night, from
RunEndUnrecorded, which the flow raises with that state instead of returning it: Prefect's
engine would spend a minute a state failing to record it. Called from Python (a notebook, a
worker), the flow returns as Prefect returns it. This module loads Prefect: the flow and
the command import it when a run starts.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

from prefect.exceptions import Abort

from dueflow.flows.prefect_api import unreachable, was_lost

if TYPE_CHECKING:
    from prefect import State

    from dueflow.tasks.core.report import RunSummary

LOST_END = ("the Prefect API was lost before the run's end was recorded: Prefect shows it 'Running'"
            " until the next run on this ledger marks it Crashed (docs/prefect-api.md); the ledger"
            " holds what was done")


class RunEndUnrecorded(Abort):
    """The end of a night whose Prefect API is gone, raised by the flow with its final state
    in place of returning it. Prefect's engine lets an Abort through without proposing a
    state (and keeps `state` as the run's, locally); only a command that awaits its night's
    end (`night_end`) is handed one."""

    def __init__(self, state: State) -> None:
        super().__init__(LOST_END)
        self.state = state


@dataclass
class NightEnd:
    """A command's night's final state, as the flow reached it: read from here when Prefect
    fails to record it after all (the API lost after the flow's end)."""

    state: State | None = None


# The command awaiting a night in this context (set around its call of the flow, in the
# same thread); None when the flow is called from Python or run by a worker.
_awaited: ContextVar[NightEnd | None] = ContextVar("dueflow_night_end", default=None)


@contextmanager
def night_end() -> Iterator[NightEnd]:
    """For a command, around its call of the flow."""
    token = _awaited.set(end := NightEnd())
    try:
        yield end
    finally:
        _awaited.reset(token)


def ended(state: State, summary: RunSummary) -> State:
    """The flow's final state, `summary` in it: returned, unless a command awaits it and the
    Prefect API is lost — then raised to the command in RunEndUnrecorded, LOST_END among
    the summary's warnings. Lost: Prefect's clients or the probe found it gone during the
    night, and it still does not answer (one request: an API back is left to record it)."""
    end = _awaited.get()
    if end is None:
        return state
    end.state = state
    if was_lost() and unreachable() is not None:
        summary.warnings.append(LOST_END)
        raise RunEndUnrecorded(state)
    return state
