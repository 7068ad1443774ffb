"""Forecast: every email the coming nights would send, decided by the nightly run's own code.

For each night from `start`, the forecast extracts and decides exactly as a nightly run
does — the same extract, decide and compose steps of `tasks/steps.py`, with the arguments
`tasks/jobs.py` gives them — and takes what a run would reserve as that night's emails.
It assumes that the nightly run happens every night, that every email goes out and that
nothing is paid, renewed or changed: each later night sees the ledger as it is plus what
the earlier forecast nights reserved (`core.forecast`).

It writes nothing (no ledger row, no quarantine row), sends nothing, and never calls the
LLM: a reminder's subject does not depend on its paragraph, and the template paragraph
stands in for it. Rows that earlier runs left in the ledger (never handed to SMTP, failed,
in doubt) are not forecast: `dueflow ledger --status pending|failed` lists them. The
steps run as plain functions (`.fn`): no Prefect server is needed, and the `forecast`
flow (flows/forecast.py) publishes the same frame as an artifact.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, timedelta

from dueflow.blocks.settings import ConfigError, Settings
from dueflow.tasks import steps
from dueflow.tasks.adapters import db
from dueflow.tasks.core import defaults
from dueflow.tasks.core.decide import DunningStart
from dueflow.tasks.core.forecast import (
    forecast_rows,
    no_forecast_rows,
    with_reserved_renewals,
    with_sent_dunning_steps,
)
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.keys import Job
from dueflow.tasks.core.llm_guard import DRAFTED_STEPS, reminders, template_draft
from dueflow.tasks.core.parameters import (
    MAX_FORECAST_DAYS,
    ParameterError,
    delays_of,
    dunning_start_of,
    forecast_days,
    forecast_start,
    leads_of,
    locale_of,
)
from dueflow.tasks.core.render import Composed

FORECAST_NOTE = "forecast: template paragraph (the LLM is never asked for a forecast)"
MAX_DAYS = MAX_FORECAST_DAYS


def _subjects(composed: Composed) -> dict[str, str]:
    """The subject of each rendered email, and for a row that could not be rendered the
    reason (what a dry run shows for it, and what a real run records as `failed`)."""
    return {email.key: email.subject for email in composed.emails} | dict(composed.failures)


def forecast(
    start: date | None = None,
    days: int = 7,
    *,
    settings: Settings | None = None,
    renewal_leads: Sequence[int] = defaults.RENEWAL_LEADS,
    renewal_locale: str = "en",
    dunning_delays: Sequence[int] = defaults.DUNNING_DELAYS,
    dunning_start: DunningStart = "sent",
) -> pd.DataFrame:
    """The emails each of `days` nights from `start` (default: today in DUEFLOW_TIMEZONE)
    would send, one row each: night, job, key, step, recipient, name (vendor or client),
    amount, currency, subject. The parameters are the nightly flow's."""
    settings = settings or Settings.from_env()
    try:  # the nightly flow's own checks, with the forecast's own range of nights
        days = forecast_days(days)
        leads = leads_of(renewal_leads)
        dunning_delays = delays_of(dunning_delays)
        dunning_start = dunning_start_of(dunning_start)
        renewal_locale = locale_of(renewal_locale)
        start = forecast_start(start or settings.today())
    except ParameterError as exc:
        raise ConfigError(str(exc)) from None
    database = db.open_database(settings)
    sender = settings.sender()
    escalation_to = settings.escalation_address()
    look = settings.email_look()

    # The dunning extraction takes no date: one read serves every night.
    dunning = steps.dunning_sources(database)
    dunning_history = dunning["history"]
    renewals_reserved = pd.DataFrame(columns=["subject_id", "cycle", "step_rank"])
    parts: list[pd.DataFrame] = []
    for night in (start + timedelta(days=n) for n in range(days)):
        renewals = steps.renewal_sources(database, night, leads)
        renewals["history"] = with_reserved_renewals(renewals["history"], renewals_reserved)
        due = steps.decide_renewals.fn(renewals, night, leads).to_reserve
        if not due.empty:
            composed = steps.compose_renewals(due, renewal_locale, sender, look)
            parts.append(forecast_rows(night, Job.RENEWAL, due, due["vendor"], _subjects(composed)))
            renewals_reserved = pd.concat(
                [renewals_reserved, due.loc[:, ["subject_id", "cycle", "step_rank"]]], ignore_index=True)

        extracted = dunning | {"history": dunning_history}
        due = steps.decide_dunning.fn(extracted, night, dunning_delays, settings.timezone,
                                      escalation_to, dunning_start).to_reserve
        if not due.empty:
            drafts = [template_draft(reminder, FORECAST_NOTE)
                      for reminder in reminders(due[due["step"].isin(DRAFTED_STEPS)])]
            composed = steps.compose_dunning(due, dunning_history, sender, drafts, night, look)
            parts.append(forecast_rows(night, Job.DUNNING, due, due["client_name"], _subjects(composed)))
            dunning_history = with_sent_dunning_steps(dunning_history, due, night)
    kept = [part for part in parts if not part.empty]
    return pd.concat(kept, ignore_index=True) if kept else no_forecast_rows()
