"""dueflow benchmark: synthetic data at scale, each step measured, targets checked.

Run `python -m bench.run --help` from the repository root.
"""
