"""Dunning profiles (docs/configuration.md, "Dunning profiles"): named sets of delays, start,
steps, delay unit, escalation address and statements, chosen per client (`clients.dunning_profile`).

A client without a profile (the column absent, NULL or blank) is dunned by the run's own
parameters: the default profile. A profile leaves out what it does not change, and takes
it from the default. The TOML text (DUEFLOW_PROFILES_FILE, or a DueflowProfiles block) is
parsed here; reading the file is the settings' (blocks/settings.py).

    [profiles.key-account]
    delays = [14, 14, 30]
    start = "due"                    # sent | due
    last_step = "OVERDUE"            # REMINDED_1 | REMINDED_2 | OVERDUE: where it stops
    unit = "business"                # calendar | business
    escalation_to = "kam@corp.example"
    # Opt-in, per step (docs/configuration.md, "Fees, interest and pay-by dates"):
    fees = { REMINDED_2 = "EUR 10, GBP 8" }          # a fixed fee, per currency
    interest = ["REMINDED_2", "OVERDUE"]            # statutory interest and compensation
    pay_within = { REMINDED_1 = 14, REMINDED_2 = 14 }  # business days after the send date
    statements = "reminders"         # off | reminders | all: its clients' emails of a night as one
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from dueflow.tasks.core.addresses import is_address
from dueflow.tasks.core.charges import StepCharges
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.keys import DUNNING_STEPS
from dueflow.tasks.core.money import parse_minimums
from dueflow.tasks.core.parameters import DUNNING_STARTS, MAX_DELAY_DAYS, STATEMENT_CHOICES, DunningStart

DelayUnit = Literal["calendar", "business"]
DELAY_UNITS: tuple[DelayUnit, ...] = ("calendar", "business")
DEFAULT_PROFILE = "default"
MAX_PROFILES = 100
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
_KEYS = frozenset({"delays", "start", "last_step", "unit", "escalation_to", "fees", "interest", "pay_within",
                   "statements"})
MAX_PAY_WITHIN = 365
STEP_NAMES = tuple(s.value for s in DUNNING_STEPS)


class ProfileError(ValueError):
    """A profiles file that cannot be used: one line naming where, and the fix."""


@dataclass(frozen=True)
class Profile:
    name: str
    delays: tuple[int, int, int]
    start: DunningStart
    last_rank: int  # 1..3: the last step this profile takes (3: the escalation)
    unit: DelayUnit
    escalation_to: str | None  # None: DUEFLOW_ESCALATION_TO
    charges: Mapping[str, StepCharges] = field(default_factory=dict)  # per step: fees, interest, pay-by
    statements: str | None = None  # off | reminders | all; None: DUEFLOW_STATEMENTS


@dataclass(frozen=True)
class Profiles:
    """The default profile (the run's parameters) and the named ones."""

    default: Profile
    named: Mapping[str, Profile]

    def frame(self) -> pd.DataFrame:
        """One row per profile, indexed by name ('' is the default): d1, d2, d3, start,
        last_rank, unit, escalation_to — what the decision merges per client."""
        every = [replace(self.default, name=""), *self.named.values()]
        return pd.DataFrame({
            "name": pd.array([p.name for p in every], dtype="string"),
            "d1": [p.delays[0] for p in every], "d2": [p.delays[1] for p in every],
            "d3": [p.delays[2] for p in every], "start": [p.start for p in every],
            "last_rank": [p.last_rank for p in every], "unit": [p.unit for p in every],
            "escalation_to": pd.array([p.escalation_to for p in every], dtype="string"),
            "statements": pd.array([p.statements for p in every], dtype="string"),
        }, index=pd.Index([p.name for p in every], dtype="string", name="profile"))

    def step_charges(self) -> dict[tuple[str, str], StepCharges]:
        """(profile, step) → what that step states besides the open amount ('' is the default)."""
        return {(name, step): said for name, profile in [("", self.default), *self.named.items()]
                for step, said in profile.charges.items()}

    def interest(self) -> bool:
        """Some profile states statutory interest (DUEFLOW_REFERENCE_RATES is then needed)."""
        return any(said.interest for said in self.step_charges().values())

    def said(self) -> str:
        """The delays in force, as the run's log says them: the run's own (clients without
        a profile), then each profile's — what the run form's dunning_delays cannot show."""
        def one(p: Profile) -> str:
            unit = " business" if p.unit == "business" else ""
            return f"{', '.join(map(str, p.delays))}{unit} days from {p.start}"

        named = "; ".join(f"profile {name!r} {one(p)}" for name, p in self.named.items())
        return f"clients without a profile {one(self.default)}" + (f"; {named}" if named else "")

    def starts(self) -> set[str]:
        return {self.default.start, *(p.start for p in self.named.values())}

    def shortest_delays(self) -> tuple[int, int, int]:
        every = [self.default, *self.named.values()]
        return (min(p.delays[0] for p in every), min(p.delays[1] for p in every),
                min(p.delays[2] for p in every))


def default_profile(delays: Sequence[int], start: DunningStart, unit: str = "calendar",
                    escalation_to: str | None = None) -> Profiles:
    return Profiles(Profile(DEFAULT_PROFILE, (delays[0], delays[1], delays[2]), start,
                            len(STEP_NAMES), "business" if unit == "business" else "calendar",
                            escalation_to), {})


def parse_profiles(text: str, origin: str, default: Profiles) -> Profiles:
    """`default` with the named profiles of `text` (TOML) added; ProfileError otherwise."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{origin}: not valid TOML ({exc})") from None
    extra = set(data) - {"profiles"}
    table = data.get("profiles", {})
    if extra or not isinstance(table, dict):
        raise ProfileError(f"{origin}: only [profiles.NAME] tables are allowed, found {sorted(extra)[:3]}")
    if len(table) > MAX_PROFILES:
        raise ProfileError(f"{origin}: at most {MAX_PROFILES} profiles")
    named = {}
    for name, body in table.items():
        where = f"{origin}, profile {name[:40]!r}"
        if not _NAME.fullmatch(name) or name == DEFAULT_PROFILE:
            raise ProfileError(f"{where}: a profile name is 1 to 63 letters, digits, '.', '_' or '-',"
                               f" not {DEFAULT_PROFILE!r} (the run's own parameters)")
        if not isinstance(body, dict) or set(body) - _KEYS:
            raise ProfileError(f"{where}: a profile is a table of {', '.join(sorted(_KEYS))} (no other"
                               " keys)")
        named[name] = _profile(name, body, default.default, where)
    return Profiles(default.default, named)


def _profile(name: str, body: dict, base: Profile, where: str) -> Profile:
    delays = body.get("delays", list(base.delays))
    if (not isinstance(delays, list) or len(delays) != len(STEP_NAMES)
            or any(isinstance(d, bool) or not isinstance(d, int) or not 1 <= d <= MAX_DELAY_DAYS
                   for d in delays)):
        raise ProfileError(f"{where}: delays must be three whole numbers of days, each 1 to"
                           f" {MAX_DELAY_DAYS}, e.g. [14, 14, 30]")
    start = body.get("start", base.start)
    if start not in DUNNING_STARTS:
        raise ProfileError(f"{where}: start must be 'sent' or 'due'")
    last = body.get("last_step", STEP_NAMES[base.last_rank - 1])
    if last not in STEP_NAMES:
        raise ProfileError(f"{where}: last_step must be one of {', '.join(STEP_NAMES)}")
    unit = body.get("unit", base.unit)
    if unit not in DELAY_UNITS:
        raise ProfileError(f"{where}: unit must be 'calendar' or 'business'")
    escalation = body.get("escalation_to", base.escalation_to)
    if escalation is not None and (not isinstance(escalation, str) or not is_address(escalation.strip())):
        raise ProfileError(f"{where}: escalation_to must be one plain address, e.g. kam@corp.example")
    statements = body.get("statements", base.statements)
    if statements is not None and statements not in STATEMENT_CHOICES:
        raise ProfileError(f"{where}: statements must be one of {', '.join(STATEMENT_CHOICES)}")
    return Profile(name, (delays[0], delays[1], delays[2]), start, STEP_NAMES.index(last) + 1, unit,
                   escalation.strip() if escalation else None, _charges(body, where), statements)


def _charges(body: dict, where: str) -> dict[str, StepCharges]:
    """A profile's fees, interest and pay-by days, per step (none unless asked)."""
    fees, interest, within = body.get("fees", {}), body.get("interest", []), body.get("pay_within", {})
    if not isinstance(fees, dict) or set(fees) - set(STEP_NAMES) or not all(isinstance(v, str) for v in
                                                                            fees.values()):
        raise ProfileError(f"{where}: fees is a table of steps ({', '.join(STEP_NAMES)}) to amounts per"
                           ' currency, e.g. fees = { REMINDED_2 = "EUR 10, GBP 8" }')
    if not isinstance(interest, list) or set(interest) - set(STEP_NAMES):
        raise ProfileError(f"{where}: interest is a list of the steps that state statutory interest, e.g."
                           ' interest = ["REMINDED_2", "OVERDUE"]')
    if not isinstance(within, dict) or set(within) - set(STEP_NAMES) or any(
            isinstance(d, bool) or not isinstance(d, int) or not 1 <= d <= MAX_PAY_WITHIN
            for d in within.values()):
        raise ProfileError(f"{where}: pay_within is a table of steps to business days (1 to"
                           f" {MAX_PAY_WITHIN}), e.g. pay_within = {{ REMINDED_1 = 14 }}")
    charges = {}
    for step in STEP_NAMES:
        if step in fees or step in interest or step in within:
            try:
                per_currency = parse_minimums(fees.get(step), f"{where}: fees.{step}", "fee")
            except ValueError as exc:
                raise ProfileError(str(exc)) from None
            charges[step] = StepCharges(per_currency, step in interest, within.get(step))
    return charges
