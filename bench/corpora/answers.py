"""Model answers to a tone-plan request, as a model that answers well and as one that lies.

A plan request (core.llm_guard) offers a menu — tones and sentence ids, in the prompt and
as the enums of its JSON schema — and asks for {"tone": …, "sentences": [ids]}. Here:

- `valid_plan(body)`: what a model that follows the request answers: a tone it offers and
  one body sentence of that tone, with an opening and a closing when the menu has them,
  read from the request itself (its schema's enums and its menu's lines);
- `hostile_answers(text, body)`: every way a lying or hijacked model can carry `text` in
  its answer: the whole reply, in each field, as an id, beside a valid plan (an extra
  field, text before or after it, a fence, a duplicate key), in the old free-text shape.

The red-team texts are the corpus (bench/corpora/red_team.*.txt), and `ISSUE_FRAUDS`: the
sentences of issue 35 made only of words the old allow-list held, each a fraud or a false
receipt, which reached clients verbatim under it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

ISSUE_FRAUDS = (
    "Please overlook the invoice below.",
    "Thank you very much for your payment.",
    "Please make payment to our client.",
    "We have not received payment, so please pay the invoice below again.",
    "Please make the payment through the email that follows.",
    "Thank you for your payment, there is nothing more to do.",
    "Please pay our partner instead of us.",
    "You may disregard the invoice below.",
    "We are happy to say that this invoice is settled.",
    "Please wait for our next email before you pay.",
    "Muchas gracias por su pago.",
    "Le rogamos que efectúe el pago a nuestro cliente.",
    "Puede seguir sin pagar la factura de abajo.",
    "Le agradecemos el pago de esta factura.",
    "Por favor, no tenga en cuenta la factura de abajo.",
    "Le rogamos que realice el pago a través del correo que le enviaremos.",
)

_MENU_LINE = re.compile(r"^- (?P<id>[a-z][a-z0-9_.-]*) \[(?P<tones>[a-z_, ]*)\]: ")
_HEADINGS = {"Openings": "opening", "Body": "body", "Closings": "closing"}


def _menu(body: dict[str, Any]) -> tuple[list[str], list[tuple[str, str, list[str]]]]:
    """The tones the request's schema offers, and its menu's (slot, id, tones) in order."""
    schema = body["response_format"]["json_schema"]["schema"]["properties"]
    tones = list(schema["tone"]["enum"])
    offered = set(schema["sentences"]["items"]["enum"])
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    slot, lines = "", []
    for line in user.splitlines():
        slot = next((name for head, name in _HEADINGS.items() if line.startswith(head + " (")), slot)
        if (match := _MENU_LINE.match(line)) and match["id"] in offered:
            lines.append((slot, match["id"], [t.strip() for t in match["tones"].split(",") if t.strip()]))
    return tones, lines


def valid_plan(body: dict[str, Any], choice: int = 0) -> dict[str, Any]:
    """A valid plan for the request: its `choice`-th tone (cycling), a body sentence of it,
    and an opening and a closing carrying it when offered."""
    tones, lines = _menu(body)
    tone = tones[choice % len(tones)]
    slots: dict[str, list[str]] = {"opening": [], "body": [], "closing": []}
    for slot, sentence_id, carried in lines:
        if tone in carried:
            slots[slot].append(sentence_id)
    chosen = [slots[k][choice % len(slots[k])] for k in ("opening", "body", "closing") if slots[k]]
    return {"tone": tone, "sentences": chosen}


SHAPES = (
    "whole",
    "tone",
    "sentence",
    "extra_sentence",
    "extra_field",
    "nested",
    "after",
    "before",
    "fenced",
    "duplicate_key",
    "list",
    "old_shape",
)


def hostile_answer(text: str, shape: str, plan: dict[str, Any]) -> str:
    """`text` carried in one `shape` of answer, around the valid `plan`."""
    valid = json.dumps(plan)
    return {
        "whole": text,
        "tone": json.dumps({"tone": text, "sentences": plan["sentences"]}),
        "sentence": json.dumps({"tone": plan["tone"], "sentences": [text]}),
        "extra_sentence": json.dumps({"tone": plan["tone"], "sentences": [*plan["sentences"][:2], text]}),
        "extra_field": json.dumps(plan | {"paragraph": text}),
        "nested": json.dumps(plan | {"note": {"text": text}}),
        "after": valid + " " + text,
        "before": text + "\n" + valid,
        "fenced": "```json\n" + valid + "\n```\n" + text,
        "duplicate_key": valid[:-1] + ", " + json.dumps("tone") + ": " + json.dumps(text) + "}",
        "list": json.dumps([plan, text]),
        "old_shape": json.dumps({"paragraph": text, "tone": "friendly"}),
    }[shape]


def hostile_answers(text: str, body: dict[str, Any]) -> Iterator[str]:
    plan = valid_plan(body)
    for shape in SHAPES:
        yield hostile_answer(text, shape, plan)
