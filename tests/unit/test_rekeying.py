"""Ids that change spelling between nights (issue 36, case 2): the form an id has apart
from its spelling, and the pairs that stop a night (tasks/core/rekeying.py)."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.keys import id_forms
from dueflow.tasks.core.rekeying import new_subjects, respelled, stop_line


def forms(*ids: str | None) -> list[object]:
    return list(id_forms(pd.Series(list(ids), dtype="string")))


def spellings(number: int) -> st.SearchStrategy[str]:
    """`number` as a company's views may write it: padded, with a zero fraction, signed,
    surrounded by spaces."""
    return st.builds(
        lambda zeros, fraction, plus, left, right: f"{left}{'+' if plus and number >= 0 else ''}"
        f"{'-' if number < 0 else ''}{'0' * zeros}{abs(number)}{fraction}{right}",
        st.integers(0, 6), st.sampled_from(["", ".", ".0", ".00", ".000"]), st.booleans(),
        st.sampled_from(["", " ", "  "]), st.sampled_from(["", " ", "\u3000"]))


@given(st.integers(-10**30, 10**30).flatmap(lambda n: st.tuples(st.just(n), spellings(n))))
def test_every_spelling_of_a_number_has_the_numbers_form(case: tuple[int, str]) -> None:
    number, spelled = case
    assert forms(spelled) == [str(number)]


@given(st.integers(0, 10**12), st.integers(0, 10**12))
def test_two_numbers_never_share_a_form(a: int, b: int) -> None:
    assert (forms(str(a)) == forms(str(b))) == (a == b)


@given(st.uuids(), st.sampled_from([str.upper, str.lower]), st.booleans(), st.booleans())
def test_a_uuid_in_any_spelling_is_its_32_hex_digits(value: uuid.UUID, case, hyphens: bool,
                                                     braces: bool) -> None:
    spelled = case(str(value) if hyphens else value.hex)
    assert forms("{" + spelled + "}" if braces else spelled) == [value.hex]


@given(st.text(max_size=30))
def test_a_form_is_its_own_form(text: str) -> None:
    once = forms(text)
    assert forms(*once) == once


def test_other_text_is_trimmed_and_case_folded_and_decimals_keep_their_digits() -> None:
    assert forms("INV-7 ", "inv-7", "1.50", "1.5", "-0.0", "1e5", "1.2.3", None) == [
        "inv-7", "inv-7", "1.5", "1.5", "0", "1e5", "1.2.3", pd.NA]


def frame(**columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame({name: pd.Series(values, dtype="string") for name, values in columns.items()})


APART = frame(job=[], old_id=[], new_id=[])


def test_a_pair_is_one_subject_gone_from_the_source_under_its_old_spelling() -> None:
    new = new_subjects(frame(subject_id=["000001", "000002", "7", "9"]), frame(subject_id=["9"]))
    assert list(new["subject_id"]) == ["000001", "000002", "7"]  # 9 has history under its own id
    known = frame(subject_id=["1", "2", "07"], subject_form=["1", "2", "7"])
    pairs = respelled("dunning", "invoices", new, known, still_in_source={"07"}, kept_apart=APART)
    # 07 is still in the source: another invoice than 7, not a changed spelling.
    assert pairs.to_dict("records") == [
        {"job": "dunning", "source": "invoices", "old_id": "1", "new_id": "000001"},
        {"job": "dunning", "source": "invoices", "old_id": "2", "new_id": "000002"}]
    apart = frame(job=["dunning", "renewal"], old_id=["1", "2"], new_id=["000001", "000002"])
    kept = respelled("dunning", "invoices", new, known, set(), apart)
    assert list(kept["old_id"]) == ["07", "2"]  # the renewal job's decision is not the dunning job's


def test_the_stop_line_counts_per_source_and_shows_what_tells_two_ids_apart() -> None:
    pairs = pd.DataFrame({"job": ["dunning"] * 5 + ["renewal"],
                          "source": ["invoices"] * 5 + ["contracts"],
                          "old_id": ["1", "2", "3", "4", "5", "c"],
                          "new_id": ["1 ", "2 ", "3 ", "4 ", "5 ", "C"]})
    line = stop_line(pairs)
    assert line.startswith("contracts: 1 id(s) of tonight's rows are ids the ledger knows spelled"
                           " another way (c → C); invoices: 5 id(s)")
    assert "(1 → '1 ', 2 → '2 ', 3 → '3 ' and 2 more)" in line
    assert "\n" not in line and "Nothing was reserved or sent" in line and "dueflow rekey --apply" in line
