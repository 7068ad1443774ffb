"""`dueflow sources init` (issue 38): a first mapping file drafted from a schema's tables —
which relation is each source, which column each of dueflow's, the value maps of statuses,
flags and locales from the values seen — with every guess said, and what it could not guess
written as a TODO, so that `dueflow check --sources` reads it at once and a person corrects
what it got wrong.

Pure: the catalog (relations, columns, types, primary keys) and a sample of the distinct
values of the columns that may need a value map are read by tasks/adapters/catalog.py. The
names it knows are the common English ones of billing and procurement systems; a column it
does not recognise is left for a person, never taken at random.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from dueflow.tasks.core.casts import null_safe_reading, quoted_name, toml_string
from dueflow.tasks.core.locales import SUPPORTED_LOCALES
from dueflow.tasks.core.sources import AMOUNT_MINOR, BOOLEAN_STATUSES, SOURCES, Kind, flag_word
from dueflow.tasks.core.validate import FALSE_TEXT, TRUE_TEXT


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # the database's: pg_type.typname, or SQLite's declared type ('' for none)
    primary_key: bool = False


@dataclass(frozen=True)
class Relation:
    schema: str | None
    name: str
    kind: str  # table, view, materialized view, foreign table
    columns: tuple[Column, ...]

    def column(self, name: str) -> Column:
        return next(c for c in self.columns if c.name == name)


# -- what the names and types say ---------------------------------------------------------

# Relation names per source, most telling first (singular, lower case, words joined by _).
RELATION_NAMES: dict[str, tuple[str, ...]] = {
    "contracts": tuple("contract agreement subscription supplier_contract vendor_contract licence license"
                       " renewal".split()),
    "clients": tuple("client customer debtor account buyer".split()),
    "invoices": tuple("invoice bill receivable ar_invoice sales_invoice".split()),
}


def _names(**columns: str) -> dict[str, tuple[str, ...]]:
    return {column: tuple(names.split()) for column, names in columns.items()}


# Column names per dueflow column, most telling first. `{relation}` is the relation's
# singular name (customer: `customer_id` is its id), `{client}` the clients' (an invoice's
# `customer_id` is its client's id).
COLUMN_NAMES: dict[str, dict[str, tuple[str, ...]]] = {
    "contracts": _names(
        id="id {relation}_id contract_id agreement_id {relation}_no contract_no",
        vendor="vendor supplier vendor_name supplier_name provider counterparty",
        title="title description service subject product name",
        amount="amount fee annual_fee price value cost total amount_total",
        currency="currency currency_code ccy cur",
        renewal_date="renewal_date renews_on renewal_on renew_on renewal end_date ends_on expires_on"
                     " expiry_date expiration_date term_end",
        notify_email="notify_email owner_email contact_email responsible_email owner email",
        status="status state active is_active enabled"),
    "clients": _names(
        id="id {relation}_id client_id customer_id {relation}_no customer_no",
        name="name {relation}_name client_name customer_name company_name company display_name legal_name",
        email="email billing_email invoice_email invoicing_email ap_email email_address contact_email",
        locale="locale language lang language_code preferred_language",
        notes="notes note comments comment remarks",
        dunning_paused="dunning_paused on_hold is_on_hold paused dunning_stop dunning_blocked do_not_dun"
                       " no_dunning hold",
        dunning_paused_until="dunning_paused_until paused_until on_hold_until hold_until",
        cc_email="cc_email account_manager_email account_manager kam_email sales_rep_email",
        dunning_profile="dunning_profile dunning_level profile"),
    "invoices": _names(
        id="id {relation}_id invoice_id bill_id {relation}_no",
        client_id="client_id {client}_id customer_id debtor_id account_id {client}_no customer_no client_no",
        number="number invoice_no invoice_number {relation}_no {relation}_number no reference ref"
               " document_no",
        amount="amount total amount_due open_amount balance total_amount gross amount_gross",
        currency="currency currency_code ccy cur",
        status="status state invoice_status {relation}_status",
        sent_at="sent_at issued_at issued_on sent_on issue_date invoice_date date billed_at created_at",
        due_date="due_date due_on due due_at payment_due payment_due_date",
        paid_at="paid_at paid_on paid_date payment_date settled_at settled_on",
        dunning_hold_until="dunning_hold_until hold_until disputed_until on_hold_until",
        pdf_path="pdf_path pdf pdf_file document_path file_path",
        amount_open="amount_open amount_outstanding outstanding residual amount_residual amount_remaining",
        amount_paid="amount_paid paid_amount amount_received total_paid"),
}
MINOR_WORDS = ("cents", "cent", "minor", "pence")  # a word of an amount's name: integer minor units


def _words_to(ours: str, theirs: str) -> dict[str, str]:
    return dict.fromkeys(theirs.split(), ours)


# Status words of companies, as dueflow's; anything else is left to a person.
STATUS_WORDS: dict[str, dict[str, str]] = {
    "contracts": _words_to("active", "active live running current open valid renewing")
    | _words_to("cancelled", "cancelled canceled terminated ended expired inactive closed"),
    "invoices": _words_to("sent", "sent issued open unpaid outstanding posted due overdue billed")
    | _words_to("paid", "paid settled closed cleared")
    | _words_to("void", "void voided cancelled canceled credited written_off")
    | _words_to("draft", "draft new pending"),
}
LANGUAGE_NAMES = (_words_to("en", "english") | _words_to("es", "spanish espanol español castellano")
                  | _words_to("de", "german deutsch"))
FLAG_WORDS = _words_to("true", "j ja si oui") | _words_to("false", "nein non")  # beyond what is read as it is
# What each dueflow column is, for the TODO a person reads.
MEANING = {
    "id": "a unique id", "vendor": "the supplier's name", "title": "what the contract is for",
    "amount": "the amount (or amount_minor: integer cents)", "currency": "ISO 4217, EUR",
    "renewal_date": "the date it renews", "notify_email": "who is alerted (one address)",
    "status": "the status", "name": "the client's name", "email": "where reminders go (one address)",
    "locale": "en, es or de", "notes": "read by the model only", "dunning_paused": "a pause without an end",
    "dunning_paused_until": "a pause with an end (a date)", "cc_email": "the account manager, copied",
    "dunning_profile": "a dunning profile's name", "client_id": "the client's id",
    "number": "the invoice number", "sent_at": "when it was sent", "due_date": "its due date",
    "paid_at": "when it was paid", "dunning_hold_until": "a hold with an end (a date)",
    "pdf_path": "the invoice PDF's path", "amount_open": "what the client still owes",
    "amount_paid": "what the client paid so far",
}

_FAMILIES = (_words_to("text", "text varchar bpchar name citext") | _words_to("integer", "int2 int4 int8")
             | _words_to("float", "float4 float8") | _words_to("timestamp", "timestamp timestamptz")
             | {name: name for name in ("numeric", "bool", "date", "uuid", "money")})
# The families each kind reads as they are (PostgreSQL; SQLite reads every kind from any).
READS: dict[Kind, frozenset[str]] = {kind: frozenset(families.split()) for kind, families in {
    Kind.ID: "text integer numeric uuid", Kind.TEXT: "text", Kind.STATUS: "text", Kind.LOCALE: "text",
    Kind.AMOUNT: "text integer numeric float", Kind.DATE: "date timestamp",
    Kind.TIMESTAMP: "date timestamp text", Kind.FLAG: "bool integer text"}.items()}
# SQLite's declared types, by the word in them (its affinity rules, with dates and booleans).
_DECLARED = (("BOOL", "bool"), ("INT", "integer"), ("CHAR", "text"), ("CLOB", "text"), ("TEXT", "text"),
             ("TIMESTAMP", "timestamp"), ("DATETIME", "timestamp"), ("DATE", "date"), ("REAL", "float"),
             ("FLOA", "float"), ("DOUB", "float"))


def family(type_name: str, dialect: str) -> str:
    """A column's type as a family: text, integer, numeric, float, bool, date, timestamp,
    uuid, money, other (SQLite: by its declared type, as SQLite's affinity reads it)."""
    if dialect == "postgresql":
        return _FAMILIES.get(type_name, "other")
    declared = type_name.upper()
    for word, kind in _DECLARED:
        if word in declared:
            return kind
    return "numeric" if declared else "other"


def _words(name: str) -> str:
    """A name as the lists write it: lower case, words joined by _ (customerName, Customer-Name)."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    return re.sub(r"[^a-z0-9]+", "_", spaced.lower()).strip("_")


def singular(name: str) -> str:
    word = _words(name)
    for plural, one in (("ies", "y"), ("ses", "s"), ("s", "")):
        if word.endswith(plural) and len(word) > len(plural) + 2 and not word.endswith("ss"):
            return word[: -len(plural)] + one
    return word


# -- choosing ---------------------------------------------------------------------------------


@dataclass
class Guess:
    """One dueflow column's origin: a column of the relation (with why, and an expression
    when its type needs one), or nothing (`column` None: the TODO)."""

    column: str | None = None
    expression: str | None = None  # the mapping's SQL, when the column's type needs one
    why: str = ""


@dataclass
class SourceDraft:
    source: str
    relation: Relation | None
    why: str
    columns: dict[str, Guess] = field(default_factory=dict)
    values: dict[str, dict[str, str | None]] = field(default_factory=dict)  # column -> theirs: ours (None: ?)
    minor: bool = False  # the amount is amount_minor


def _relation_score(source: str, relation: Relation) -> int:
    word = singular(relation.name)
    names = (singular(source), *RELATION_NAMES[source])
    if word in names:
        return 100 - names.index(word)
    tokens = word.split("_")
    return 50 if any(name in tokens for name in names) else 0


def _column_fit(source: str, relation: Relation) -> int:
    have = {_words(c.name) for c in relation.columns}
    return sum(1 for names in COLUMN_NAMES[source].values() if have & {_words(n) for n in names})


def choose_relation(source: str, relations: Sequence[Relation]) -> tuple[Relation | None, str]:
    """The relation that is most likely the source, and why (or why none)."""
    scored = sorted(((_relation_score(source, r), _column_fit(source, r), r) for r in relations),
                    key=lambda s: (-s[0], -s[1], s[2].name))
    scored = [s for s in scored if s[0] > 0]
    if not scored:
        return None, "no table or view is named like it (" + ", ".join(RELATION_NAMES[source][:4]) + ", …)"
    best = scored[0][2]
    others = [s[2].name for s in scored[1:4]]
    return best, f"its name; also seen: {', '.join(others)}" if others else "its name"


def _names_for(source: str, column: str, relation: Relation, client_relation: str) -> list[str]:
    return [_words(n.format(relation=singular(relation.name), client=client_relation))
            for n in COLUMN_NAMES[source][column]]


def _column_guess(source: str, column: str, relation: Relation, taken: set[str], dialect: str,
                  client_relation: str) -> Guess:
    kind = SOURCES[source][column].kind
    free = [c for c in relation.columns if c.name not in taken]
    by_word = {_words(c.name): c for c in free}
    names = _names_for(source, column, relation, client_relation)
    found = next((by_word[n] for n in names if n in by_word), None)
    why = "its name"
    if found is None and column == "id":
        keys = [c for c in free if c.primary_key]
        found, why = (keys[0], "the primary key") if len(keys) == 1 else (None, "")
    if found is None:
        return Guess()
    if found.primary_key and column == "id":
        why = "its name, the primary key" if why == "its name" else why
    kin = family(found.type, dialect)
    guess = Guess(found.name, None, f"{why} ({found.type or 'no declared type'})")
    if dialect == "postgresql" and kin not in READS[kind] and not (kind == Kind.STATUS and kin == "bool"):
        reading = null_safe_reading(quoted_name(found.name), kind, found.type)
        if reading is None:
            return Guess(why=f"{found.name} is {found.type}: dueflow does not read it as {kind.value}")
        guess.expression = reading
        guess.why += f": read NULL-safe as {kind.value}; a value it cannot read quarantines its row"
    return guess


def _is_minor(column: Column, dialect: str) -> bool:
    return family(column.type, dialect) in ("integer", "numeric", "text") and any(
        word in _words(column.name).split("_") for word in MINOR_WORDS)


Samples = Mapping[tuple[str, str], Sequence[str]]  # distinct values seen, per (relation, column)


def draft_source(source: str, relation: Relation | None, why: str, dialect: str, samples: Samples,
                 client_relation: str = "client") -> SourceDraft:
    """The guesses for one source in `relation`; `samples`: distinct values seen per
    (relation, column), for the value maps."""
    draft = SourceDraft(source, relation, why)
    if relation is None:
        return draft
    taken: set[str] = set()
    for column in SOURCES[source]:
        if column == "amount":
            minor = [c for c in relation.columns if c.name not in taken and _is_minor(c, dialect)]
            if minor:
                draft.minor = True
                draft.columns[column] = Guess(minor[0].name, None, f"integer minor units ({minor[0].type})")
                taken.add(minor[0].name)
                continue
        guess = _column_guess(source, column, relation, taken, dialect, client_relation)
        draft.columns[column] = guess
        if guess.column:
            taken.add(guess.column)
    for column, info in SOURCES[source].items():
        guess = draft.columns[column]
        if not guess.column or not info.vocabulary or guess.expression:
            continue
        kin = family(relation.column(guess.column).type, dialect)
        seen = samples.get((relation.name, guess.column), ())
        if kin == "bool" and (bool_map := BOOLEAN_STATUSES.get((source, column))):
            draft.values[column] = dict(bool_map)
        elif kin != "bool":
            value_map = _value_guesses(source, column, seen)
            if value_map:
                draft.values[column] = value_map
    return draft


def _value_guesses(source: str, column: str, seen: Sequence[str]) -> dict[str, str | None]:
    """theirs = ours for each value seen that is not already dueflow's word (None: not
    guessed); {} when every value is dueflow's own, or there are too many to be a status."""
    vocabulary = SOURCES[source][column].vocabulary
    kind = SOURCES[source][column].kind
    out: dict[str, str | None] = {}
    for value in seen:
        word = _words(value)
        as_it_is = value.strip().lower()
        if value in vocabulary or (kind == Kind.FLAG and as_it_is in TRUE_TEXT + FALSE_TEXT) or (
                kind == Kind.LOCALE and as_it_is in vocabulary):
            continue  # read as it is
        if kind == Kind.STATUS:
            out[value] = STATUS_WORDS[source].get(word)
        elif kind == Kind.FLAG:
            out[value] = flag_word(value) or FLAG_WORDS.get(word)
        elif kind == Kind.LOCALE:
            out[value] = LANGUAGE_NAMES.get(word) or (word[:2] if word[:2] in SUPPORTED_LOCALES else None)
    return out


def draft_sources(relations: Sequence[Relation], dialect: str, samples: Samples | None = None
                  ) -> list[SourceDraft]:
    """A draft of each source: the relation most likely to be it (a relation is one source
    at most: the clients first, so that the invoices' client id is named after them), and
    its columns."""
    drafts: dict[str, SourceDraft] = {}
    free = list(relations)
    for source in ("clients", "invoices", "contracts"):
        relation, why = choose_relation(source, free)
        clients = drafts["clients"].relation if "clients" in drafts else None
        drafts[source] = draft_source(source, relation, why, dialect, samples or {},
                                      singular(clients.name) if clients else "client")
        free = [r for r in free if r is not relation]
    return [drafts[name] for name in SOURCES if name in drafts]  # payments: only when mapped


def value_columns(drafts: Sequence[SourceDraft]) -> list[tuple[Relation, str]]:
    """The (relation, column) of each guessed column that may take a value map: the ones
    whose distinct values the draft wants to see."""
    return [(d.relation, guess.column) for d in drafts if d.relation
            for column, info in SOURCES[d.source].items()
            if info.vocabulary and (guess := d.columns.get(column)) and guess.column and not guess.expression]


# -- the file ---------------------------------------------------------------------------------


def mapping_text(drafts: Sequence[SourceDraft], where: str, dialect: str, seen: Sequence[Relation]) -> str:
    """The commented TOML of the drafts: each guess with why, each gap a TODO."""
    lines = [
        f"# A first mapping of dueflow's sources to the tables of {where}, drafted by `dueflow sources init`",
        "# from their names, columns, types and values. Read every guess: a wrong one reads the wrong",
        "# column. TODO marks what it could not guess (a required column left out is named by the check).",
        "# Then: DUEFLOW_SOURCES_FILE=<this file> and `dueflow check --sources` (docs/your-data.md).",
    ]
    for draft in drafts:
        lines += ["", *_source_lines(draft, dialect, seen)]
    return "\n".join(lines) + "\n"


def _source_lines(draft: SourceDraft, dialect: str, seen: Sequence[Relation]) -> list[str]:
    source, relation = draft.source, draft.relation
    if relation is None:
        names = ", ".join(r.name for r in seen[:12]) or "none"
        return [f"# TODO [{source}]: {draft.why}; relations seen: {names}", f"# [{source}]",
                '# relation = "…"']
    lines = [f"[{source}]",
             f"relation = {toml_string(relation.name)}  # {relation.kind}, chosen by {draft.why}"]
    if relation.schema and dialect == "postgresql":
        lines.append(f"schema = {toml_string(relation.schema)}")
    lines += ["", f"[{source}.columns]"]
    used = {g.column for g in draft.columns.values() if g.column}
    for column, info in SOURCES[source].items():
        guess = draft.columns[column]
        name = AMOUNT_MINOR if column == "amount" and draft.minor else column
        if guess.column is None:
            need = "required" if info.required else "optional"
            left = [c.name for c in relation.columns if c.name not in used]
            hint = f"; columns not used: {', '.join(left[:10])}" if left and info.required else ""
            why = f"; {guess.why}" if guess.why else ""
            prefix = "# TODO " if info.required else "# "
            lines.append(f'{prefix}{name} = "…"  # {need}: {MEANING[column]}{why}{hint}')
            continue
        origin = f"{{ sql = {toml_string(guess.expression)} }}" if guess.expression else toml_string(
            guess.column)
        lines.append(f"{name} = {origin}  # {guess.why}")
    for column, value_map in draft.values.items():
        vocabulary = ", ".join(SOURCES[source][column].vocabulary)
        lines += ["", f"[{source}.values.{column}]  # theirs = ours (one of {vocabulary}); others are kept"]
        for theirs, ours in value_map.items():
            key = toml_string(theirs)
            lines.append(f"{key} = {toml_string(ours)}" if ours else f'# TODO {key} = "…"')
    return lines
