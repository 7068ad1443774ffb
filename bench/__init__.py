"""dueflow's benchmarks, run from the repository root (docs/performance.md):

- `python -m bench.nights` — whole nights as processes against a real Prefect server, each
  beside the seeds' own per-row script (bench/seeds.py) on the same data: the benchmark of
  record, with each ratio, the growth with the tables and peak memory;
- `python -m bench.reserve_check` — the reservation against its floor, for information;
- `python -m bench.ledger_export` — memory and time of `dueflow ledger` exports;
- `python -m bench.tone_plans` — reminders' paragraphs end to end: a valid model's plan, the rule
  without one, and a lying model's red team (bench/corpora/), none of whose words reach an email.
"""
