"""A source whose ids changed spelling between nights (issue 36, case 2).

Keys are made from an id's text (docs/design.md, Keys). The text of a value is read the
same way whatever type holds it (tasks/adapters/sources.py `id_text`: numeric 1.00 and an
integer 1 are both `1`), so a change of numeric type keeps every key. A change of spelling
does not: a view recreated to give `0001` for `1`, a uuid in capitals, a padded text id.
Under its new spelling an invoice has no history, and without this check the next night
would send its first reminder again — to the same client, for the same invoice.

So before anything is written, a night looks at the rows it would start a history for
(`new_subjects`: no ledger row under their id) and asks the ledger for ids of the same
form apart from spelling (`id_forms`, kept on every ledger row). A pair is a changed
spelling (`respelled`) when the old id is gone from the source; an old id the source still
has names another record, and a pair an operator kept apart (`dueflow rekey
--keep-apart`) is not asked about again. Any pair stops the night with one line
(`stop_line`); `dueflow rekey --apply` moves the old ids' history to the new spelling.
"""

from __future__ import annotations

from collections.abc import Collection

from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.keys import id_forms, printable_id

PAIR_COLUMNS = ("job", "source", "old_id", "new_id")
SHOWN_PAIRS = 3  # pairs a stop line names; `dueflow rekey` lists them all


def new_subjects(to_reserve: pd.DataFrame, history: pd.DataFrame) -> pd.DataFrame:
    """The subjects of tonight's rows to reserve that have no ledger row under their id:
    subject_id and its form."""
    ids = to_reserve["subject_id"].astype("string").drop_duplicates()
    known = history["subject_id"].astype("string") if "subject_id" in history else pd.Series(dtype="string")
    ids = ids[~ids.isin(known)]
    return pd.DataFrame({"subject_id": ids, "subject_form": id_forms(ids)}).reset_index(drop=True)


def respelled(job: str, source: str, new: pd.DataFrame, known: pd.DataFrame,
              still_in_source: Collection[str], kept_apart: pd.DataFrame) -> pd.DataFrame:
    """The pairs (old_id in the ledger, new_id tonight) of one job that are one subject
    spelled two ways: same form, different text, the old id gone from the source, and not
    kept apart by an operator. `known`: the ledger's subject_id and subject_form for the
    forms of `new`; `kept_apart`: job, old_id, new_id."""
    pairs = new.merge(known.rename(columns={"subject_id": "old_id"}), on="subject_form").rename(
        columns={"subject_id": "new_id"})
    pairs = pairs[pairs["old_id"].astype("string") != pairs["new_id"].astype("string")]
    pairs = pairs[~pairs["old_id"].isin(list(still_in_source))]
    apart = kept_apart[kept_apart["job"] == job]
    if not apart.empty:
        marked = pairs.merge(apart[["old_id", "new_id"]], on=["old_id", "new_id"], how="left", indicator=True)
        pairs = pairs[(marked["_merge"] == "left_only").to_numpy()]
    return pd.DataFrame({"job": job, "source": source, "old_id": pairs["old_id"].astype("string"),
                         "new_id": pairs["new_id"].astype("string")}, columns=list(PAIR_COLUMNS)
                        ).sort_values(["old_id", "new_id"]).reset_index(drop=True)


def pair_text(pairs: pd.DataFrame, shown: int = SHOWN_PAIRS) -> str:
    """`1.00 → 1, 4.00 → 4 and 7 more`: the first pairs, readable whatever the ids hold."""
    named = [f"{printable_id(old)} → {printable_id(new)}"
             for old, new in zip(pairs["old_id"][:shown], pairs["new_id"][:shown], strict=True)]
    more = len(pairs) - shown
    return ", ".join(named) + (f" and {more} more" if more > 0 else "")


def stop_line(pairs: pd.DataFrame) -> str:
    """What a night whose source ids changed spelling says, in one line, before anything is
    written."""
    parts = []
    for source, of_source in pairs.groupby("source", sort=True):
        parts.append(f"{source}: {len(of_source):,} id(s) of tonight's rows are ids the ledger knows"
                     f" spelled another way ({pair_text(of_source)})")
    return ("; ".join(parts) + ": the source's ids changed (a new type or format?), and under the new"
            " spelling their history is not found, so their emails would go again. Nothing was reserved"
            " or sent. Fix: `dueflow rekey` lists every pair; `dueflow rekey --apply` moves their history"
            " to the new ids (or restore the old spelling; `dueflow rekey --keep-apart` when they are"
            " other records)")
