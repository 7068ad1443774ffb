"""`python -m bench.profile_run OUT.prof ARGS…`: `dueflow ARGS…` under cProfile, imports
included (the profiler starts before dueflow is imported); writes OUT.prof and a text
summary OUT.txt (cumulative and own time, top 60)."""

from __future__ import annotations

import cProfile
import io
import pstats
import sys
from pathlib import Path


def main() -> int:
    path, args = Path(sys.argv[1]), sys.argv[2:]
    sys.argv = ["dueflow", *args]
    profile = cProfile.Profile()
    code = 0

    def night() -> None:
        nonlocal code
        from dueflow.flows.cli import main as dueflow

        try:
            code = dueflow() or 0
        except SystemExit as exc:
            code = int(exc.code or 0)

    profile.runcall(night)
    profile.dump_stats(str(path))
    out = io.StringIO()
    stats = pstats.Stats(profile, stream=out)
    stats.sort_stats("cumulative").print_stats(60)
    stats.sort_stats("tottime").print_stats(40)
    path.with_suffix(".txt").write_text(out.getvalue())
    return code


if __name__ == "__main__":
    sys.exit(main())
