"""The phrasebook (G7): dueflow's reviewed sentences pass their own lint and cover every
locale, step, tone and kind of client; a company's own file extends, rewords or replaces
them and is refused, in one line naming the sentence and the fix, when it cannot be used;
the lint refuses what could not be rendered as written."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.corpora import load
from bench.corpora.answers import ISSUE_FRAUDS
from dueflow.blocks.errors import ConfigError
from dueflow.blocks.settings import Settings
from dueflow.tasks.core.locales import SUPPORTED_LOCALES
from dueflow.tasks.core.phrasebook import (
    DRAFTED_STEPS,
    STEP_TONES,
    PhrasebookError,
    Relationship,
    Slot,
    Tone,
    build_phrasebook,
    default_phrasebook,
    load_phrasebook,
    packaged_files,
    parse_phrasebook,
    sentence_problem,
)
from tests import examples

BOOK = default_phrasebook()


# --------------------------------------------------------------------------- dueflow's own


def test_every_locale_has_a_phrasebook_of_at_least_sixty_sentences_in_en_and_es():
    sizes = {locale: len(BOOK.of(locale)) for locale in SUPPORTED_LOCALES}
    assert set(sizes) == set(SUPPORTED_LOCALES) and len(SUPPORTED_LOCALES) >= 3
    assert sizes["en"] >= 60 and sizes["es"] >= 60, sizes


def test_dueflows_sentences_pass_the_lint_and_mean_the_same_id_in_every_locale():
    for book in packaged_files():
        for sentence in book.sentences:
            assert sentence_problem(sentence.text) is None, (sentence.locale, sentence.id)
    by_locale = {
        locale: [(s.id, s.slot, s.tones, s.steps, s.fits) for s in BOOK.of(locale)]
        for locale in SUPPORTED_LOCALES
    }
    assert all(shape == by_locale["en"] for shape in by_locale.values())


def test_every_step_tone_and_client_is_covered_in_every_locale():
    assert BOOK.gaps() == []
    for locale in SUPPORTED_LOCALES:
        for step in DRAFTED_STEPS:
            for relationship in Relationship:
                for tone in STEP_TONES[step]:
                    slots = Counter(
                        s.slot for s in BOOK.menu(locale, step, relationship, [tone]) if tone in s.tones
                    )
                    assert slots[Slot.BODY] >= 2 and slots[Slot.OPENING] >= 1 and slots[Slot.CLOSING] >= 2, (
                        locale,
                        step,
                        relationship,
                        tone,
                        slots,
                    )


def test_the_sizes_per_locale_step_and_slot_add_up():
    sizes = BOOK.sizes()
    for locale in SUPPORTED_LOCALES:
        for step in DRAFTED_STEPS:
            assert sum(sizes[(locale, step, slot)] for slot in Slot) == sum(
                1 for s in BOOK.of(locale) if step in s.steps
            )


def _sentences(text: str) -> list[str]:
    return [part.strip() for part in re.split(r"(?<=[.!?])\s+", " ".join(text.split())) if part.strip()]


def test_no_hostile_sentence_is_a_phrasebook_sentence():
    """Every sentence of the red-team corpus, and the issue's frauds made of harmless words,
    are not among the reviewed sentences: a model can only choose these, never write one."""
    ours = {unicodedata.normalize("NFKC", s.text).casefold() for s in BOOK.sentences}
    hostile = {
        sentence
        for locale in ("en", "es")
        for _, text in load("red_team", locale)
        for sentence in _sentences(text)
    } | set(ISSUE_FRAUDS)
    frames = {"We truly value our relationship with you.", "Thank you for your attention."}
    assert not {h for h in hostile - frames if unicodedata.normalize("NFKC", h).casefold() in ours}


# --------------------------------------------------------------------------- the lint


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("Please pay {amount} today.", "placeholder"),
        ("Please pay {{ amount }} today.", "placeholder"),
        ("Please see <b>the invoice</b> now.", "placeholder"),
        ("Pay us at pay.example for this.", "link"),
        ("Visit www dot example for this.", "link"),
        ("Please write to billing@example now.", "placeholder"),
        ("Please pay within 7 days.", "digit"),
        ("Please pay within ٧ days.", "digit"),
        ("Please pay within Ⅶ days.", "plain form"),
        ("Please pay within ⅶ days.", "plain form"),
        ("Please pay within 𝟕 days.", "plain form"),
        ("Please pay the in\u200bvoice below.", "invisible"),
        ("Please pay \u202ethe invoice below.", "invisible"),
        ("Please pay the invoice\u00a0below.", "plain form"),
        ("Please pay the invoice\u2009below.", "plain form"),
        ("Please pay the invoice\u3000below.", "plain form"),
        ("Please pay the invoice\u2028below.", "invisible"),
        ("Please pay the іnvoice below.", "Latin"),  # Cyrillic і
        ("Ｐlease pay the invoice below.", "NFKC"),
        ("please pay the invoice.", "capital"),
        ("Please pay the invoice", "end"),
        ("Thank you. Please pay the invoice.", "more than one"),
        ("Thanks, please.", "words"),
        (" Please pay the invoice.", "spaces"),
        ("Please  pay the invoice.", "spaces"),
        ("Please pay — the invoice.", "only Latin letters"),
        ("Please pay the invoice" + " now" * 40 + ".", "words"),
        ("", "empty"),
    ],
)
def test_the_lint_refuses_what_cannot_be_rendered_as_written(text, why):
    problem = sentence_problem(text)
    assert problem is not None and why in problem, (text, problem)


@pytest.mark.parametrize(
    "text",
    [
        "We hope this message finds you well.",
        "¿Tiene alguna duda sobre esta factura?",
        "Wir danken Ihnen für Ihre Aufmerksamkeit.",
        "Merci d’avance, c’est très aimable.",
    ],
)
def test_the_lint_takes_plain_sentences_of_any_latin_language(text):
    assert sentence_problem(text) is None


ALLOWED = set(".,;:!?¿¡'’- ")


@settings(max_examples=examples(200))
@given(
    st.text(min_size=1, max_size=3).filter(
        lambda t: any(
            not (
                c in ALLOWED
                or (unicodedata.category(c).startswith("L") and "LATIN" in unicodedata.name(c, ""))
            )
            for c in t
        )
    )
)
def test_any_character_outside_latin_letters_and_the_marks_is_refused(inserted):
    assert sentence_problem(f"We hope this {inserted} finds you well.") is not None


# --------------------------------------------------------------------------- a company's own

OWN = """
mode = "extend"
locale = "en"
disabled = ["open.any.well"]

[[sentence]]
id = "acme.open.partner"
slot = "opening"
fits = ["long_standing"]
text = "Thank you for being an Acme partner for so long."

[[sentence]]
id = "body.warm.radar"
slot = "body"
tones = ["warm"]
steps = ["REMINDED_1"]
text = "Here is a friendly reminder from all of us at Acme."
"""


def test_a_company_phrasebook_adds_rewords_and_turns_off_sentences():
    book = load_phrasebook(OWN, "DUEFLOW_PHRASEBOOK_FILE own.toml")
    assert book.get("en", "acme.open.partner").origin == "DUEFLOW_PHRASEBOOK_FILE own.toml"
    assert book.get("en", "body.warm.radar").text == "Here is a friendly reminder from all of us at Acme."
    assert book.get("en", "open.any.well") is None and book.get("es", "open.any.well") is None
    assert len(book.of("es")) == len(BOOK.of("es")) - 1
    assert "own.toml" in book.origin


def test_a_replacing_phrasebook_takes_the_locales_it_covers_and_needs_every_step_and_tone():
    one = """mode = "replace"
[[sentence]]
id = "b1"
locale = "es"
slot = "body"
tones = ["warm"]
text = "Le escribimos por esta factura."
"""
    with pytest.raises(PhrasebookError, match=r"own\.toml: no body sentence for es REMINDED_1"):
        load_phrasebook(one, "own.toml")
    word = {"REMINDED_1": "uno", "REMINDED_2": "dos"}
    full = 'mode = "replace"\n' + "".join(
        f'[[sentence]]\nid = "b.{step.lower()}.{tone.value}"\nlocale = "es"\nslot = "body"\n'
        f'tones = ["{tone.value}"]\nsteps = ["{step}"]\n'
        f'text = "Le escribimos por esta factura, {tone.value}, {word[step]}."\n'
        for step in DRAFTED_STEPS
        for tone in STEP_TONES[step]
    )
    book = load_phrasebook(full, "own.toml")
    assert {s.origin for s in book.of("es")} == {"own.toml"} and len(book.of("es")) == 7
    assert book.of("en") == BOOK.of("en")
    assert any("es REMINDED_1: no opening" in gap for gap in book.gaps())


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("mode = [", "not valid TOML"),
        ('colour = "red"', "unknown setting 'colour'"),
        ('mode = "merge"', 'use "extend"'),
        (
            '[[sentence]]\nid = "x"\nlocale = "en"\nslot = "body"\ntext = "We hope you are well."\nsize = 3',
            "sentence 'x': unknown field 'size'",
        ),
        (
            '[[sentence]]\nid = "x"\nlocale = "en"\nslot = "middle"\ntext = "We hope you are well."',
            "unknown slot",
        ),
        (
            '[[sentence]]\nid = "x"\nlocale = "en"\nslot = "body"\ntones = ["angry"]\n'
            'text = "We hope you are well."',
            "unknown tones 'angry'",
        ),
        (
            '[[sentence]]\nid = "x"\nlocale = "en"\nslot = "body"\nsteps = ["OVERDUE"]\n'
            'text = "We hope you are well."',
            "unknown steps 'OVERDUE'",
        ),
        (
            '[[sentence]]\nid = "x"\nlocale = "en"\nslot = "body"\nfits = ["new"]\n'
            'text = "We hope you are well."',
            "only an opening has fits",
        ),
        (
            '[[sentence]]\nid = "x"\nlocale = "fr"\nslot = "body"\ntext = "Nous esperons que tout va bien."',
            "locale 'fr' is not one dueflow writes in",
        ),
        (
            '[[sentence]]\nid = "X Y"\nlocale = "en"\nslot = "body"\ntext = "We hope you are well."',
            "the id must be",
        ),
        (
            '[[sentence]]\nid = "x"\nlocale = "en"\nslot = "body"\ntext = "Pay {amount} now, please."',
            "sentence 'x': the text holds '{'",
        ),
        (
            '[[sentence]]\nid = "x"\nlocale = "en"\nslot = "body"\ntext = "We hope you are well."\n'
            '[[sentence]]\nid = "x"\nlocale = "en"\nslot = "body"\ntext = "We hope all is fine."',
            "written twice",
        ),
        (
            '[[sentence]]\nid = "x"\nlocale = "en"\nslot = "body"\ntext = "We hope you are well."\n'
            '[[sentence]]\nid = "y"\nlocale = "en"\nslot = "body"\ntext = "We hope you are well."',
            "the same text",
        ),
        ('[[sentence]]\nlocale = "en"\nslot = "body"\ntext = "We hope you are well."', "needs id"),
        ('disabled = ["no.such.sentence"]', "disabled names 'no.such.sentence'"),
    ],
)
def test_a_phrasebook_that_cannot_be_used_is_one_line_naming_where_and_the_fix(text, message):
    with pytest.raises(PhrasebookError) as caught:
        load_phrasebook(text, "DUEFLOW_PHRASEBOOK_FILE own.toml")
    line = str(caught.value)
    assert message in line and line.startswith("DUEFLOW_PHRASEBOOK_FILE own.toml") and "\n" not in line


def test_the_setting_reads_the_file_and_a_bad_one_stops_before_anything_is_written(tmp_path):
    own = tmp_path / "phrasebook.toml"
    own.write_text(OWN, encoding="utf-8")
    book = Settings.from_env({"DUEFLOW_PHRASEBOOK_FILE": str(own)}).phrasebook()
    assert book.get("en", "acme.open.partner") is not None
    own.write_text(OWN.replace("Acme partner", "Acme partner at acme.example"), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"acme\.open\.partner.*looks like a link"):
        Settings.from_env({"DUEFLOW_PHRASEBOOK_FILE": str(own)})
    with pytest.raises(ConfigError, match=r"DUEFLOW_PHRASEBOOK_FILE=.*cannot be read"):
        Settings.from_env({"DUEFLOW_PHRASEBOOK_FILE": str(tmp_path / "missing.toml")})


def test_parsing_keeps_defaults_and_order():
    parsed = parse_phrasebook(
        '[[sentence]]\nid = "o"\nlocale = "de"\nslot = "opening"\ntext = "Wir hoffen, es geht Ihnen gut."',
        "x",
    )
    (sentence,) = parsed.sentences
    assert sentence.tones == frozenset(Tone) and sentence.steps == frozenset(DRAFTED_STEPS)
    assert sentence.fits == frozenset(Relationship) and not parsed.replace
    assert build_phrasebook(parsed, "x").get("de", "o").text == "Wir hoffen, es geht Ihnen gut."
