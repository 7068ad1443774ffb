"""Oracles: the rules restated plainly, to hold a faster or less obvious form to them.

`renewal_settled` is the specification of sql/fragments/renewal_settled, the quiet night's
shortcut (tests/integration/test_settled.py holds the SQL to it on generated contracts);
the row-by-row reference of every rule is tests/helpers/hostile.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

import numpy as np

from dueflow.tasks.core.decide import _duplicates, _text, due_lead
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.keys import renewal_keys
from dueflow.tasks.core.statuses import CONTRACT_ACTIVE
from dueflow.tasks.core.validate import as_dates


def renewal_settled(contracts: pd.DataFrame, history: pd.DataFrame, open_keys: dict[str, str],
                    as_of: date, leads: Sequence[int]) -> pd.Series:
    """The contract rows the ledger already settles tonight: active, id unique, tonight's
    due lead or a more urgent one of the cycle reserved (`history`: subject_id, cycle,
    handled_rank, as sql/renewal_history gives it), and tonight's key neither pending nor
    failed (`open_keys`: key → status). The specification of sql/fragments/renewal_settled,
    which lets a night skip reading and deciding them; deciding such a row would only say
    "already handled"."""
    rows = contracts.reset_index(drop=True)
    renewal = as_dates(rows["renewal_date"])
    days_left = (renewal - pd.Timestamp(as_of)).dt.days
    lead = pd.Series(due_lead(days_left.fillna(-1).to_numpy(dtype=np.int64), leads),
                     index=rows.index).where(renewal.notna(), -1)
    ids = _text(rows, "id")
    cycle = renewal.dt.strftime("%Y-%m-%d").astype("string")
    ranks = history.astype({"subject_id": "string", "cycle": "string"}).groupby(
        ["subject_id", "cycle"])["handled_rank"].min()
    pairs = pd.MultiIndex.from_arrays([ids.fillna("\x00"), cycle.fillna("\x00")])
    handled_rank = pd.to_numeric(pd.Series(ranks.reindex(pairs).to_numpy(), index=rows.index))
    key = renewal_keys(ids, cycle, lead)
    open_key = key.isin(list(open_keys)).fillna(False).astype(bool)
    return ((lead >= 0) & (_text(rows, "status") == CONTRACT_ACTIVE).fillna(False)
            & (_duplicates(ids) == 1) & ids.notna()
            & (handled_rank <= lead).fillna(False) & ~open_key).astype(bool)
