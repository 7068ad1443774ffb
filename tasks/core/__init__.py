"""The pure core: named types, keys, text and money rules, the email's wire format.

Nothing here does I/O or imports SQLAlchemy, Prefect, smtplib or openai: every
function is a function of its arguments, tested directly and with generated inputs.
"""

import pandas as _pd

# Text that is not valid UTF-8 reaches the core as surrogate escapes, so that its row is
# quarantined (G6). pandas 3 stores the "string" dtype in pyarrow when pyarrow is installed
# (the `parquet` extra), and pyarrow refuses such text: the rules would stop on one bad row.
# Python storage keeps them whole, whatever else is installed.
_pd.set_option("mode.string_storage", "python")
