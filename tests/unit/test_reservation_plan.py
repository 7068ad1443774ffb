"""The reservation's classification (tasks/core/reservation.py), pure: what becomes of every
row a job decided — quarantined, already handled (by what the ledger says of it), deferred
by the send cap, won, taken by another run, no longer due, adopted. The INSERT … ON
CONFLICT that decides who wins meets real databases in tests/integration/test_reservation.py."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dueflow.tasks.core.decide import Decision
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.reservation import plan_reservation, reservation_outcome
from tests import examples


def renewal(key: str, lead: int, days_left: int, handled: bool = False) -> dict[str, object]:
    return {"key": key, "recipient": f"{key}@owner.example", "step_rank": lead, "days_left": days_left,
            "handled": handled}


def decision(due: list[dict[str, object]], bad: dict[str, str] | None = None) -> Decision:
    frame = pd.DataFrame(due, columns=["key", "recipient", "step_rank", "days_left", "handled"])
    return Decision(frame.astype({"handled": bool}),
                    pd.DataFrame({"source_id": pd.Series(list(bad or {}), dtype=object),
                                  "reason": pd.Series(list((bad or {}).values()), dtype=object)}))


def by_key(rows: pd.DataFrame) -> dict[str, tuple[str, str]]:
    return {key: (str(status), detail) for key, status, detail in
            zip(rows["key"], rows["status"], rows["detail"], strict=True)}


def test_the_plan_quarantines_reports_what_the_ledger_holds_and_applies_the_cap():
    decided = decision([renewal("r/a", 30, 20), renewal("r/b", 15, 10), renewal("r/c", 60, 50),
                        renewal("r/h1", 30, 25, handled=True), renewal("r/h2", 30, 25, handled=True),
                        renewal("r/h3", 30, 25, handled=True)],
                       {"C-9": "renewal_date missing"})
    plan = plan_reservation("renewal", "contracts", decided, {"r/h1": "failed", "r/h2": "pending"},
                            send_cap=2)
    assert list(plan.quarantined["source_id"]) == ["C-9"]
    assert list(plan.candidates["key"]) == ["r/b", "r/a"]  # the most urgent lead first
    assert by_key(plan.rows) == {
        "contracts/C-9": ("quarantined", "renewal_date missing"),
        "r/h1": ("failed earlier", "failed in an earlier run; not retried tonight"
                                   " (see `dueflow ledger --status failed`)"),
        "r/h2": ("pending earlier", "handed to SMTP by an earlier run, outcome unknown"
                                    " (see `dueflow ledger --status pending`)"),
        "r/h3": ("already handled", "already in the ledger"),
        "r/c": ("deferred", "send cap of 2 reached: a later run picks it up"),
    }
    assert set(plan.rows["job"]) == {"renewal"}


def test_without_a_cap_every_due_row_not_in_the_ledger_is_a_candidate():
    plan = plan_reservation("renewal", "contracts", decision([renewal("r/a", 30, 20), renewal("r/b", 15, 1)]),
                            {}, send_cap=None)
    assert list(plan.candidates["key"]) == ["r/a", "r/b"] and plan.rows.empty


def test_the_outcome_names_why_each_candidate_not_won_was_not():
    candidates = decision([renewal("r/won", 30, 20), renewal("r/taken", 30, 20),
                           renewal("r/changed", 30, 20)]).to_reserve
    reserved = reservation_outcome("renewal", candidates, won={"r/won"}, taken={"r/taken"}, adopt=False)
    assert list(reserved.winners["key"]) == ["r/won"]
    assert by_key(reserved.rows) == {
        "r/taken": ("already handled", "reserved by another run"),
        "r/changed": ("no longer due", "not reserved: the source row changed after extraction (paid,"
                                       " paused, or its dunning step moved)")}


def test_adopting_records_the_winners_as_handled_and_sends_none():
    candidates = decision([renewal("r/a", 30, 20), renewal("r/b", 15, 1)]).to_reserve
    reserved = reservation_outcome("renewal", candidates, won={"r/a", "r/b"}, taken=set(), adopt=True)
    assert reserved.winners.empty
    assert by_key(reserved.rows) == {"r/a": ("adopted", "recorded as handled; not sent"),
                                     "r/b": ("adopted", "recorded as handled; not sent")}


@settings(max_examples=examples(25), deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 90), st.booleans(), st.sampled_from(
    ["won", "taken", "changed", "failed", "pending", "sent"])), max_size=12),
    cap=st.none() | st.integers(0, 12), adopt=st.booleans())
def test_every_due_row_ends_in_exactly_one_place(rows, cap, adopt):
    due = [renewal(f"r/{n}", lead, n, handled=fate in ("failed", "pending", "sent") and handled)
           for n, (lead, handled, fate) in enumerate(rows)]
    fates = {f"r/{n}": fate for n, (_, _, fate) in enumerate(rows)}
    decided = decision(due)
    open_keys = {key: fate for key, fate in fates.items() if fate in ("failed", "pending")}
    plan = plan_reservation("renewal", "contracts", decided, open_keys, cap)
    won = {k for k in plan.candidates["key"] if fates[k] not in ("taken", "changed")}
    reserved = reservation_outcome("renewal", plan.candidates, won,
                                   {k for k, f in fates.items() if f == "taken"}, adopt)
    placed = [*plan.rows["key"], *reserved.rows["key"], *reserved.winners["key"]]
    assert sorted(placed) == sorted(fates)  # every row once, none twice, none lost
    assert cap is None or len(plan.candidates) <= cap
    assert reserved.winners.empty or not adopt
