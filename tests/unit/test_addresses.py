"""Addresses parsed strictly (issue 25, finding 9): an RFC 5322 dot-atom addr-spec in
ASCII, a local part of at most 64 characters, no encoded word, a dotted LDH domain whose
xn-- labels are valid IDNA — the same rule for one setting and for a column of rows."""

from __future__ import annotations

import string
from datetime import date, timedelta
from email import policy
from email.parser import HeaderParser

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dueflow.tasks.core.addresses import address_problem, address_problems, parse_mailbox, valid_email
from dueflow.tasks.core.renewal_rule import due_renewal_alerts
from tests import examples
from tests.unit.test_renewal_rule import contracts_frame

REFUSED = {  # the finding's addresses, and why each is refused
    ".dot@x.example": "dot",
    "a..b@x.example": "two dots",
    "dot.@x.example": "dot",
    "x" * 70 + "@x.example": "longer than 64",
    "=?utf-8?b?QUJD?=@x.example": "encoded word",
    "a@xn--zz.example": "IDNA",
    "a@x.example\n": "plain ASCII",
    "a@1.2.3.4": "number",
    "a@-x.example": "domain",
}
ACCEPTED = ["a@x.example", "o'brien+tag@x-y.example", "a.b.c@mail.xn--bcher-kva.example",
            "user@example.xn--p1ai", "x" * 64 + "@x.example"]


@pytest.mark.parametrize(("value", "why"), REFUSED.items())
def test_what_rfc_5322_refuses_is_refused_with_its_reason(value, why):
    assert why in (address_problem(value) or ""), value
    assert why in address_problems(pd.Series([value])).iloc[0]
    if value == value.strip():  # a setting is stripped of surrounding blanks first
        with pytest.raises(ValueError, match="DUEFLOW_ESCALATION_TO"):
            parse_mailbox(value, "DUEFLOW_ESCALATION_TO")


@pytest.mark.parametrize("value", ACCEPTED)
def test_plain_addresses_are_accepted(value):
    assert address_problem(value) is None and valid_email(pd.Series([value])).all()


def _python_reads(value: str) -> bool:
    """Python's own header parser reads `To: value` as exactly this one address, without
    a defect, and shows it unchanged (no encoded word decoded)."""
    header = HeaderParser(policy=policy.default).parsestr(f"To: {value}\n\n")["To"]
    addresses = header.addresses
    return (len(addresses) == 1 and addresses[0].addr_spec == value and not header.defects
            and str(header) == value and len(value.partition("@")[0]) <= 64)


ADDRESSY = st.text(alphabet=string.ascii_letters[:6] + string.digits[:3] + ".@=?-+_'\"<> é\n",
                   max_size=30)


@settings(max_examples=examples(200), deadline=None)
@given(ADDRESSY | st.emails())
def test_anything_accepted_is_what_python_reads_as_one_plain_address(value):
    if address_problem(value) is None:
        assert _python_reads(value), value


@settings(max_examples=examples(100), deadline=None)
@given(st.emails())
def test_valid_addresses_are_accepted_unless_a_stricter_rule_names_why(value):
    problem = address_problem(value)
    local, _, domain = value.rpartition("@")
    if problem is not None:  # hypothesis's addresses may hold what the strict rule refuses
        assert len(local) > 64 or "=?" in local or domain.replace(".", "").isdigit() or (
            "xn--" in domain.lower()) or not domain.isascii(), (value, problem)


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(ADDRESSY | st.emails() | st.none(), max_size=20))
def test_the_column_rule_is_the_one_value_rule(values):
    column = address_problems(pd.Series(values, dtype=object))
    assert [None if pd.isna(p) else p for p in column] == [address_problem(v) for v in values]


def test_a_contract_with_a_refused_address_is_quarantined_with_the_reason():
    as_of = date(2027, 1, 1)
    emails = [*REFUSED, "owner@example.com"]
    contracts = contracts_frame([as_of + timedelta(days=30)] * len(emails), notify_email=emails)
    decision = due_renewal_alerts(contracts, pd.DataFrame(columns=["subject_id", "cycle", "handled_rank"]),
                                  as_of, [30])
    reasons = dict(zip(decision.quarantined["source_id"], decision.quarantined["reason"], strict=True))
    assert decision.to_reserve["recipient"].tolist() == ["owner@example.com"]
    for index, (value, why) in enumerate(REFUSED.items()):
        assert reasons[f"c-{index}"].startswith("notify_email is not a valid address") and why in reasons[
            f"c-{index}"], (value, reasons[f"c-{index}"])
