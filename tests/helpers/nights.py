"""Whole nights in the unit layer: the night of tasks/night.py on the in-memory store
(tasks/adapters/memory.py), its steps called directly (`Direct`), its mail handed to an
in-memory transport (tests/helpers/fakes.py). Milliseconds a night, no server anywhere."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import date
from typing import Any

from dueflow.blocks.endpoints import parse_mail_url
from dueflow.blocks.settings import Settings
from dueflow.tasks.core import defaults
from dueflow.tasks.core.guard import Approval, Bounds
from dueflow.tasks.core.parameters import run_parameters
from dueflow.tasks.core.ports import Store
from dueflow.tasks.core.report import RunSummary
from dueflow.tasks.deliver import DeliverySettings
from dueflow.tasks.jobs import night_jobs
from dueflow.tasks.night import Direct, Night, run_night
from tests.helpers.fakes import FakeTransport

ENV = {"DUEFLOW_MAIL_FROM": "alerts@corp.example", "DUEFLOW_ESCALATION_TO": "collections@corp.example"}
QUIET = logging.getLogger("dueflow.tests.night")


def parameters(**given: Any) -> Any:
    return run_parameters(**({
        "renewal_leads": list(defaults.RENEWAL_LEADS), "dunning_delays": list(defaults.DUNNING_DELAYS),
        "dunning_start": "sent", "renewal_locale": "en", "retry_max_attempts": defaults.RETRY_MAX_ATTEMPTS,
        "retry_backoff_minutes": 0, "send_cap": None, "adopt": False, "dry_run": False} | given))


def night_of(store: Store, as_of: date, transport: FakeTransport, env: Mapping[str, str] | None = None,
             flow_run_id: str = "run", bounds: Bounds | str | None = "settings",
             approval: Approval | None = None, **params: Any) -> Night:
    """One night on `store`, sending through `transport`, with the flow's parameters; the
    guard's bounds the settings give unless `bounds` says otherwise (None: no guard)."""
    settings = Settings.from_env(ENV | dict(env or {}))
    checked = parameters(**params)
    delivery = DeliverySettings(parse_mail_url("smtp://127.0.0.1:1"), settings.sender(), store.ledger, as_of,
                                checked.retry_backoff, settings.smtp_max_failures,
                                transports=lambda mail, sender, breaker: transport)
    return Night(night_jobs(settings, checked, "secret"), store, delivery, as_of, checked, flow_run_id,
                 settings.retain_bodies_days, as_of, QUIET,
                 settings.guard_bounds() if bounds == "settings" else bounds, approval)  # type: ignore[arg-type]


def run(store: Store, as_of: date, transport: FakeTransport | None = None, **kwargs: Any) -> RunSummary:
    """One whole night; what it sent is in `transport.handed`."""
    return run_night(night_of(store, as_of, transport or FakeTransport(), **kwargs), Direct())
