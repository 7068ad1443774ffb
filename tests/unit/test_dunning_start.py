"""What the first reminder counts from, said where a person decides it (issue 38): `check`
and `init-db` say which start is in force and which of its three places wins; `check
--sources` and the dry run count the reminders that would go before their due date."""

from __future__ import annotations

from datetime import date, timedelta

from dueflow.tasks.adapters.memory import memory_store
from dueflow.tasks.core.dunning_start import before_due, before_due_line, start_in_force
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.profiles import default_profile, parse_profiles
from tests.helpers.factories import client, invoice
from tests.helpers.nights import run

AS_OF = date(2027, 3, 10)
SENT = (AS_OF - timedelta(days=8)).isoformat()  # with start=sent, the first reminder is due tonight


def test_before_due_counts_the_reminders_to_the_client_whose_due_date_is_ahead():
    due = pd.DataFrame({"step": ["REMINDED_1", "REMINDED_2", "OVERDUE", "REMINDED_1", "REMINDED_1"],
                        "due_date": [AS_OF + timedelta(days=6), AS_OF + timedelta(days=1),
                                     AS_OF + timedelta(days=9), AS_OF, None]})
    assert before_due(due, AS_OF) == 2  # the escalation goes to a colleague; on the day is not before
    assert before_due(due.iloc[0:0], AS_OF) == 0
    assert before_due_line(0, "sent") == ""
    line = before_due_line(2, "sent")
    assert line.startswith("2 reminder(s) would go out before their invoice's due date")
    assert "DUEFLOW_DUNNING_START=due" in line and "--dunning-start due" in line
    assert "profile counts from sent" in before_due_line(1, "due")  # the run's start is due already


def test_the_start_in_force_says_where_it_comes_from_how_to_change_it_and_which_wins():
    default = start_in_force("sent", chosen=False)
    assert default.startswith("sent (the default): a first reminder counts from sent_at, so it may go"
                              " before the due date; DUEFLOW_DUNNING_START=due counts from due_date")
    assert default.endswith("Which wins: a client's profile's start, then a run's dunning_start (`dueflow"
                            " run --dunning-start`), then DUEFLOW_DUNNING_START")
    profiles = parse_profiles("[profiles.key]\nstart = 'sent'\n[profiles.plain]\ndelays = [1, 2, 3]\n", "f",
                              default_profile((7, 5, 7), "due"))
    chosen = start_in_force("due", chosen=True, profiles=profiles)
    assert chosen.startswith("due (DUEFLOW_DUNNING_START): a first reminder counts from due_date;")
    assert "profile(s) key count from sent_at" in chosen and "plain" not in chosen


def test_a_dry_run_counts_the_reminders_that_would_go_before_their_due_date():
    ahead = (AS_OF + timedelta(days=6)).isoformat()
    store = memory_store(clients=[client("cl1")], invoices=[
        invoice("early", "cl1", SENT, due_date=ahead), invoice("late", "cl1", SENT, due_date="2027-02-28")])
    preview = run(store, AS_OF, dry_run=True)
    assert (preview.rows["status"] == "would send").sum() == 2
    assert [w for w in preview.warnings if "before their invoice's due date" in w] == [
        before_due_line(1, "sent")]
    by_due = run(store, AS_OF, dry_run=True, dunning_start="due")  # the late one only: nothing early
    assert (by_due.rows["status"] == "would send").sum() == 1
    assert not [w for w in by_due.warnings if "due date" in w]
    real = run(store, AS_OF)  # a real night says nothing of it: the choice was made
    assert real.sent == 2 and not [w for w in real.warnings if "due date" in w]
