"""dueflow's tests: unit/ (pure, seconds), integration/ (one real part each), e2e/ (flows,
processes, servers). Helpers shared by the layers live in helpers/: the local servers (SMTP,
OpenAI-compatible HTTP, IMAP), the in-memory fakes of the unit layer, row factories, the
row-by-row reference of the rules (hostile) and other oracles."""

from __future__ import annotations

import os

# How hard the property tests search: DUEFLOW_TEST_DEPTH=10 runs ten times the examples
# of the default, which is sized for the whole unit layer to take seconds.
DEPTH = float(os.environ.get("DUEFLOW_TEST_DEPTH", "1"))


def examples(default: int) -> int:
    """The number of examples a property test generates at this depth."""
    return max(1, round(default * DEPTH))
