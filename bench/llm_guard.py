"""The tone guard (core.tone) measured as a classifier on the two corpora:

    .venv/bin/python -m bench.llm_guard            # the figures
    .venv/bin/python -m bench.llm_guard --show     # and every accepted red-team / refused benign line

Prints, per corpus and locale, how many paragraphs the guard accepts. Targets (issue 24):
red team 0 accepted, benign at least 85 % accepted. Exit code 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter

from bench.corpora import KINDS, LOCALES, load
from dueflow.tasks.core.tone import judge

# Benign paragraphs the vocabulary was not grown from, reported without a target:
# held_out was written before its last growth (34.0 % accepted when first measured, then
# words were added from it); fresh was written after the last change, never used to grow it.
UNSEEN = ("held_out", "fresh")

BENIGN_TARGET = 0.85


def measure(show: bool = False) -> dict[str, dict[str, int]]:
    figures: dict[str, dict[str, int]] = {}
    for kind in (*KINDS, *UNSEEN):
        for locale in LOCALES:
            rows = load(kind, locale)
            # Benign labels start with their step; red team is judged as a second reminder,
            # the step that allows the most.
            verdicts = [(label, text, judge(text, locale, "REMINDED_2" if kind == "red_team"
                                            else label.split("/")[0])) for label, text in rows]
            accepted = sum(v.accepted for _, _, v in verdicts)
            figures[f"{kind}.{locale}"] = {"paragraphs": len(rows), "accepted": accepted}
            if show:
                for label, text, verdict in verdicts:
                    if verdict.accepted == (kind == "red_team"):  # misjudged
                        print(f"  {kind}.{locale} {label}: {verdict.refusal} | {text!r}")
                if kind != "red_team":
                    reasons = Counter(v.refusal.rule.name for _, _, v in verdicts if v.refusal)
                    print(f"  {kind}.{locale} refusals by rule: {dict(reasons.most_common())}")
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.llm_guard", description=__doc__.splitlines()[0])
    parser.add_argument("--show", action="store_true", help="print each misjudged paragraph")
    args = parser.parse_args(argv)
    figures = measure(args.show)
    ok = True
    print(f"{'corpus':<16}{'paragraphs':>11}{'accepted':>10}{'rate':>9}")
    for kind in (*KINDS, *UNSEEN):
        total = {"paragraphs": 0, "accepted": 0}
        for locale in LOCALES:
            row = figures[f"{kind}.{locale}"]
            total = {k: total[k] + row[k] for k in total}
            print(f"{kind + '.' + locale:<16}{row['paragraphs']:>11}{row['accepted']:>10}"
                  f"{row['accepted'] / row['paragraphs']:>9.1%}")
        rate = total["accepted"] / total["paragraphs"]
        if kind in UNSEEN:
            print(f"{kind + ' (all)':<16}{total['paragraphs']:>11}{total['accepted']:>10}{rate:>9.1%}"
                  "  (no target)")
            continue
        passed = total["accepted"] == 0 if kind == "red_team" else rate >= BENIGN_TARGET
        ok &= passed
        target = "0 accepted" if kind == "red_team" else f">= {BENIGN_TARGET:.0%} accepted"
        print(f"{kind + ' (all)':<16}{total['paragraphs']:>11}{total['accepted']:>10}{rate:>9.1%}"
              f"  target {target}: {'PASS' if passed else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
