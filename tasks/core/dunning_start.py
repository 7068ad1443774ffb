"""What the first reminder's delay counts from, said to a person (docs/configuration.md,
"Dunning rules"): which start is in force and where it comes from, and how many of the
night's reminders go out before their invoice's due date because of it.

One reading of its three places (Settings.with_parameters, tasks/core/profiles.py): a
client's profile's `start` wins for that client; otherwise the run's `dunning_start`
parameter (`dueflow run --dunning-start`) when given; otherwise DUEFLOW_DUNNING_START;
otherwise `sent`.
"""

from __future__ import annotations

from datetime import date

from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.keys import CLIENT_STEPS
from dueflow.tasks.core.profiles import Profiles

VARIABLE = "DUEFLOW_DUNNING_START"
WHICH_WINS = (f"which wins: a client's profile's start, then a run's dunning_start (`dueflow run"
              f" --dunning-start`), then {VARIABLE}")
OTHER = {"sent": "due", "due": "sent"}
COLUMN = {"sent": "sent_at", "due": "due_date"}


def start_in_force(start: str, chosen: bool, profiles: Profiles | None = None) -> str:
    """One line: the start in force (`chosen`: DUEFLOW_DUNNING_START is set; otherwise it is
    the default), what it counts from, how to change it, which of the three places wins, and
    the profiles that count from the other day."""
    line = f"{start} ({VARIABLE if chosen else 'the default'}): a first reminder counts from {COLUMN[start]}"
    if start == "sent":
        line += ", so it may go before the due date"
    line += f"; {VARIABLE}={OTHER[start]} counts from {COLUMN[OTHER[start]]}"
    other = sorted(name for name, p in (profiles.named.items() if profiles else ()) if p.start != start)
    if other:
        line += f"; profile(s) {', '.join(other)} count from {COLUMN[OTHER[start]]}"
    return f"{line}. {WHICH_WINS[0].upper()}{WHICH_WINS[1:]}"


def before_due(due: pd.DataFrame, as_of: date) -> int:
    """How many of the due dunning rows (`due`: step, due_date) are reminders to the client
    that go out on `as_of`, before their invoice's due date."""
    if due.empty:
        return 0
    due_date = pd.to_datetime(due["due_date"], errors="coerce")
    early = due["step"].astype("string").isin(list(CLIENT_STEPS)) & (due_date > pd.Timestamp(as_of))
    return int(early.fillna(False).sum())


def before_due_line(count: int, start: str, would: bool = True) -> str:
    """What a count of `before_due` means and how to change it ('' for none); `start`: the
    run's (when it is `due`, the early ones are of clients whose profile counts from sent)."""
    if not count:
        return ""
    go = "would go" if would else "go"
    fix = (f"{VARIABLE}=due, or `dueflow run --dunning-start due`, counts from the due date"
           if start == "sent" else "their clients' profile counts from sent: set its start = \"due\"")
    return f"{count:,} reminder(s) {go} out before their invoice's due date (counted from sent_at); {fix}"
