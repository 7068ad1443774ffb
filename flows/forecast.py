"""The `forecast` flow: the emails of the coming nights as a Prefect table artifact.

The same forecast as `dueflow forecast` and `tasks.forecast.forecast` (the nightly run's
own decide code, nothing written, nothing sent, no LLM), run where Prefect can show it —
e.g. as a deployment the data team triggers before a campaign.
"""

from __future__ import annotations

from datetime import date

from prefect import flow
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from pydantic import StrictBool, StrictInt

from dueflow.blocks.settings import Settings
from dueflow.flows.nightly_alerts import Start
from dueflow.tasks.core import defaults
from dueflow.tasks.core.frames import pd, records
from dueflow.tasks.forecast import forecast

ARTIFACT_ROWS = 1000


def per_night(rows: pd.DataFrame) -> pd.DataFrame:
    """How many emails each night would send, per job (0 where none)."""
    if rows.empty:
        return pd.DataFrame(columns=["night", "renewal", "dunning", "total"])
    counts = rows.groupby(["night", "job"]).size().unstack("job", fill_value=0)
    counts = counts.reindex(columns=["renewal", "dunning"], fill_value=0)
    return counts.assign(total=counts.sum(axis=1)).reset_index()


@flow(name="forecast")
def forecast_flow(
    start: date | None = None,
    # Strict: pydantic would read True as 1 day (the nightly flow checks its raw values itself).
    days: StrictInt = 7,
    renewal_leads: list[StrictInt] = list(defaults.RENEWAL_LEADS),  # noqa: B006 - Prefect copies it
    renewal_locale: str = "en",
    dunning_delays: list[StrictInt] = list(defaults.DUNNING_DELAYS),  # noqa: B006
    dunning_start: Start = "",
    dunning_delay_unit: str = "calendar",
    renewal_on_any_day: StrictBool = False,
) -> pd.DataFrame:
    """Every email the nightly run would send on each of `days` nights from `start`
    (default: today), assuming it runs every night and nothing is paid, renewed or
    changed. Publishes a table artifact of the emails and a markdown count per night;
    writes nothing to the database and sends nothing."""
    settings = Settings.from_env().with_blocks()
    rows = forecast(start, days, settings=settings, renewal_leads=renewal_leads,
                    renewal_locale=renewal_locale, dunning_delays=dunning_delays,
                    dunning_start=dunning_start, dunning_delay_unit=dunning_delay_unit,
                    renewal_on_any_day=renewal_on_any_day)
    first = start or settings.today()
    headline = (f"Forecast of {days} night(s) from {first}: {len(rows)} email(s) would go out"
                " (assuming a run every night and no data changes)")
    shown = rows.head(ARTIFACT_ROWS).astype({"night": str})
    create_table_artifact(
        key="dueflow-forecast",
        table=records(shown.astype(object).where(shown.notna(), None)),
        description=headline + (f" (first {ARTIFACT_ROWS} rows)" if len(rows) > ARTIFACT_ROWS else ""),
    )
    counts = per_night(rows)
    lines = [f"# {headline}", "", "| night | renewal | dunning | total |", "|---|---|---|---|"]
    lines += [f"| {r.night} | {r.renewal} | {r.dunning} | {r.total} |" for r in counts.itertuples()]
    create_markdown_artifact(key="dueflow-forecast-summary", markdown="\n".join(lines),
                             description=headline)
    return rows
