"""Night-by-night dunning scenarios with holds, pauses with an end, business days, holidays,
closures, minimums, profiles that change between nights, and payments and credit notes that
arrive between nights (instalments, paid in full, a credit note; issue 43) — drawn by
hypothesis, and read two ways: as the source rows of each night (for the pure rule and for
both databases, the payments in the company's own relation) and as the facts the oracle
(tests/helpers/oracles.py, expected_dunning_emails) decides from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal

from hypothesis import strategies as st

from dueflow.tasks.core.calendar import BusinessCalendar, parse_business_days, parse_closed_days
from dueflow.tasks.core.dunning_rule import DunningRules
from dueflow.tasks.core.money import parse_minimums
from dueflow.tasks.core.profiles import default_profile, parse_profiles
from tests.helpers.oracles import InvoiceFacts

START = date(2027, 3, 1)  # a Monday; ES-MD: 19 March (Friday), 25–26 March (a long weekend)
ESCALATION = "collections@corp.example"
PROFILES = """
[profiles.gentle]
delays = [4, 3, 5]
unit = "business"
escalation_to = "kam@corp.example"

[profiles.brisk]
delays = [2, 2, 2]
last_step = "REMINDED_2"
"""
PROFILE_FACTS = {None: ((3, 2, 3), 3), "gentle": ((4, 3, 5), 3), "brisk": ((2, 2, 2), 2)}


def day(offset: int | None) -> date | None:
    return None if offset is None else START + timedelta(days=offset)


@dataclass
class Scenario:
    """Invoices (one client each), what changes on which night, the calendar and settings."""

    sent: list[int]  # offsets from START
    amounts: list[str]  # EUR
    holds: list[list[tuple[int, int | None]]]  # per invoice: (from night offset, hold end offset or None)
    pauses: list[list[tuple[int, int | None]]]  # per client: the same for dunning_paused_until
    profiles: list[list[tuple[int, str | None]]]  # per client: (from night offset, profile)
    unit: str  # the run's dunning_delay_unit (the default profile's)
    weekdays: str | None  # DUEFLOW_BUSINESS_DAYS
    holidays: bool  # DUEFLOW_HOLIDAYS=ES-MD
    closed: list[int]  # DUEFLOW_CLOSED_DAYS_FILE's days (offsets)
    minimum: str | None  # DUEFLOW_DUNNING_MINIMUM
    nights: list[int]  # the nights run (offsets), in order, repeats allowed
    # per invoice: (received offset, amount; negative: a credit note), recorded on that day
    payments: list[list[tuple[int, str]]] = field(default_factory=list)
    calendar: BusinessCalendar = field(init=False)

    def __post_init__(self) -> None:
        self.payments = self.payments or [[] for _ in self.sent]
        closed_text = "\n".join(f"{day(d)} closure" for d in self.closed)
        self.calendar = BusinessCalendar(parse_business_days(self.weekdays), *(("ES", "MD") if self.holidays
                                                                             else (None, None)),
                                         parse_closed_days(closed_text, "closures"))

    @property
    def ids(self) -> list[str]:
        return [f"inv-{i}" for i in range(len(self.sent))]

    def rules(self) -> DunningRules:
        default = default_profile((3, 2, 3), "sent", self.unit, ESCALATION)
        return DunningRules(parse_profiles(PROFILES, "profiles", default),
                            self.calendar if self.calendar.active else None, parse_minimums(self.minimum))

    @staticmethod
    def _on(changes: list[tuple[int, object]], night: date) -> object:
        value = None
        for since, changed in changes:
            if day(since) <= night:  # type: ignore[operator]
                value = changed
        return value

    def invoices(self, night: date) -> list[dict]:
        return [{"id": f"inv-{i}", "client_id": f"cl-{i}", "number": f"F-{i}", "amount": amount,
                 "currency": "EUR", "status": "sent", "sent_at": f"{day(sent)}T09:00:00+00:00",
                 "due_date": str(day(sent + 30)), "paid_at": None,
                 "dunning_hold_until": None if (h := self._on(self.holds[i], night)) is None
                 else str(day(h))}  # type: ignore[arg-type]
                for i, (sent, amount) in enumerate(zip(self.sent, self.amounts, strict=True))]

    def paid(self, night: date) -> list[dict]:
        """The company's payments relation as it stands on `night`: what was received by then."""
        return [{"invoice_id": f"inv-{i}", "amount": amount, "currency": "EUR", "received_at": str(day(on))}
                for i, made in enumerate(self.payments) for on, amount in made if day(on) <= night]  # type: ignore[operator]

    def open_amount(self, night: date, i: int) -> Decimal:
        """The oracle's open amount: the invoice's less every payment and credit note by then."""
        return Decimal(self.amounts[i]) - sum((abs(Decimal(p["amount"])) for p in self.paid(night)
                                               if p["invoice_id"] == f"inv-{i}"), Decimal(0))

    def clients(self, night: date) -> list[dict]:
        return [{"id": f"cl-{i}", "name": f"Client {i}", "email": f"ap{i}@client.example", "locale": "en",
                 "notes": None, "dunning_paused": False,
                 "dunning_paused_until": None if (p := self._on(self.pauses[i], night)) is None
                 else str(day(p)),  # type: ignore[arg-type]
                 "dunning_profile": self._on(self.profiles[i], night)}
                for i in range(len(self.sent))]

    def facts(self, night: date, invoice: str) -> InvoiceFacts:
        i = int(invoice.removeprefix("inv-"))
        profile = self._on(self.profiles[i], night)
        delays, last_rank = PROFILE_FACTS[profile]  # type: ignore[index]
        ends = [day(x) for x in (self._on(self.holds[i], night), self._on(self.pauses[i], night))
                if x is not None]  # type: ignore[arg-type]
        minimums = parse_minimums(self.minimum)
        owed = self.open_amount(night, i)
        below = "EUR" in minimums and owed < minimums["EUR"]
        return InvoiceFacts(delays=delays, last_rank=last_rank,
                            # what a profile leaves out (brisk: its unit) is the run's
                            unit="business" if profile == "gentle" else self.unit,
                            hold_end=max(ends) if ends else None,  # type: ignore[type-var]
                            paid=owed == 0, below_minimum=below)

    def open_day(self, night: date) -> bool:
        return self.calendar.why_closed(night) is None

    def escalation_of(self, night: date, invoice: str) -> str:
        profile = self._on(self.profiles[int(invoice.removeprefix("inv-"))], night)
        return "kam@corp.example" if profile == "gentle" else ESCALATION


def _changes(values: st.SearchStrategy) -> st.SearchStrategy[list[tuple[int, object]]]:
    """A value from the first night, and maybe another from a later one (None: deleted)."""
    return st.tuples(values, st.one_of(st.none(), st.tuples(st.integers(1, 30), values))).map(
        lambda t: [(-60, t[0])] + ([t[1]] if t[1] is not None else []))


@st.composite
def scenarios(draw: st.DrawFn, max_invoices: int = 4, max_nights: int = 36) -> Scenario:
    n = draw(st.integers(1, max_invoices))
    hold = st.one_of(st.none(), st.none(), st.integers(-3, 25))
    nights, offset = [], draw(st.integers(0, 2))
    for step in draw(st.lists(st.sampled_from([0, 1, 1, 1, 1, 2, 3]), min_size=5, max_size=max_nights)):
        offset += step
        nights.append(offset)
    amounts = [draw(st.sampled_from(["4.99", "5.00", "5.01", "120.00"])) for _ in range(n)]
    return Scenario(
        sent=[draw(st.integers(-12, 8)) for _ in range(n)],
        amounts=amounts,
        holds=[draw(_changes(hold)) for _ in range(n)],
        pauses=[draw(_changes(st.one_of(st.none(), st.none(), st.none(), st.integers(-3, 20))))
                for _ in range(n)],
        profiles=[draw(_changes(st.sampled_from([None, None, "gentle", "brisk"]))) for _ in range(n)],
        unit=draw(st.sampled_from(["calendar", "business"])),
        weekdays=draw(st.sampled_from([None, "mon-fri", "mon-sat"])),
        holidays=draw(st.booleans()),
        closed=draw(st.lists(st.integers(0, 40), max_size=4, unique=True)),
        minimum=draw(st.sampled_from([None, "EUR 5", "EUR 5.01, USD 5"])),
        nights=nights,
        payments=[_payments(draw, amount) for amount in amounts],
    )


def _payments(draw: st.DrawFn, amount: str) -> list[tuple[int, str]]:
    """Instalments and credit notes that never take more than the invoice (an overpayment is
    quarantined: tests/helpers/payments.py): a quarter, a half, the rest, or 0.01."""
    made, left = [], Decimal(amount)
    for on, part, credit in draw(st.lists(st.tuples(st.integers(-5, 30), st.sampled_from(
            ["quarter", "half", "rest", "cent"]), st.booleans()), max_size=3)):
        value = {"quarter": left / 4, "half": left / 2, "rest": left, "cent": Decimal("0.01")}[part]
        value = value.quantize(Decimal("0.01"))
        if not 0 < value <= left:
            continue
        left -= value
        made.append((on, str(-value if credit else value)))
    return made
