"""pandas as dueflow uses it, configured in one place: every dueflow module takes `pd`
from here (tests/unit/test_imports.py holds them to it), so the setting below is in force
before any frame exists, and modules that need no frame load no pandas (the flow's module
loads in a fraction of a second: deploying, serving and `dueflow --help` import it).
"""

from typing import Any

import pandas as pd

# Text that is not valid UTF-8 reaches the core as surrogate escapes, so that its row is
# quarantined (G6). pandas 3 stores the "string" dtype in pyarrow when pyarrow is installed
# (the `parquet` extra), and pyarrow refuses such text: the rules would stop on one bad row.
# Python storage keeps them whole, whatever else is installed.
pd.set_option("mode.string_storage", "python")



def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """`frame.to_dict("records")`, typed as it is: dueflow's columns are named by text
    (pandas-stubs type the keys Hashable)."""
    return frame.to_dict("records")  # type: ignore[return-value]


__all__ = ["pd", "records"]
