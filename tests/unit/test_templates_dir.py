"""A company's own templates (DUEFLOW_TEMPLATES_DIR) and its own words (settings): an
override is used exactly where it applies, and a broken one is refused at start-up with
one line, before anything is written."""

from __future__ import annotations

from datetime import date, datetime
from email import message_from_bytes, policy
from zoneinfo import ZoneInfo

import pandas as pd
import pytest

from dueflow.blocks.errors import ConfigError
from dueflow.blocks.settings import Settings
from dueflow.tasks.core.message import message_bytes
from dueflow.tasks.core.render import compose_dunning_emails, compose_renewal_alerts

ENV = {"DUEFLOW_MAIL_FROM": "alerts@corp.example"}
NO_HISTORY = pd.DataFrame(columns=["subject_id", "step", "step_rank", "as_of", "attempt_as_of",
                                   "status"])


def settings_with(**env: str) -> Settings:
    return Settings.from_env(ENV | env)


def dunning_rows(*steps: str, locale: str = "es") -> pd.DataFrame:
    return pd.DataFrame([{
        "key": f"dunning/inv-{i}/{step}", "subject_id": f"inv-{i}", "step": step,
        "step_rank": {"REMINDED_1": 1, "REMINDED_2": 2, "OVERDUE": 3}[step],
        "recipient": "pagos@nandu.example", "number": f"F-{i}", "amount": "980.40", "currency": "EUR",
        "issue_date": date(2027, 1, 1), "due_date": date(2027, 1, 31), "client_id": "cl-1",
        "client_name": "Ñandú SL", "client_email": "pagos@nandu.example", "locale": locale,
    } for i, step in enumerate(steps)])


def test_an_override_is_used_for_its_kind_step_and_locale_only(tmp_path):
    (tmp_path / "dunning.REMINDED_2.es.subject").write_text(
        "ÚLTIMO AVISO {{ number }}: {{ amount }}, {{ overdue_for }} de retraso\n")
    (tmp_path / "renewal.en.txt").write_text("Renewal of {{ title }} {{ when }}.\n{{ company }}\n")
    settings = settings_with(DUEFLOW_TEMPLATES_DIR=str(tmp_path), DUEFLOW_COMPANY_NAME="Acme S.L.")
    settings.check_templates()
    look = settings.email_look()
    composed = compose_dunning_emails(dunning_rows("REMINDED_1", "REMINDED_2"), NO_HISTORY,
                                      settings.sender(), as_of=date(2027, 2, 10), look=look)
    first, second = composed.emails
    assert second.subject == "ÚLTIMO AVISO F-1: 980,40 €, 10 días de retraso"  # one plain line
    assert first.subject.startswith("Recordatorio de pago: factura F-0")  # packaged template
    assert "Acme S.L." in second.body_html  # the packaged HTML, with the company's name
    renewal = pd.DataFrame([{"key": "renewal/c-1/2027-03-01/30d", "recipient": "cfo@corp.example",
                             "vendor": "Globex", "title": "Support", "amount": "10", "currency": "USD",
                             "renewal_date": date(2027, 3, 1), "days_left": 1, "step_rank": 30}])
    [alert] = compose_renewal_alerts(renewal, "en", settings.sender(), look).emails
    assert alert.body_text == "Renewal of Support tomorrow.\nAcme S.L.\n"
    [spanish] = compose_renewal_alerts(renewal, "es", settings.sender(), look).emails
    assert "se renueva mañana" in spanish.body_text  # no es override: the packaged one


def test_a_lead_specific_renewal_override(tmp_path):
    (tmp_path / "renewal.15d.en.subject").write_text("Last call: {{ vendor }} renews {{ when }}\n")
    settings = settings_with(DUEFLOW_TEMPLATES_DIR=str(tmp_path))
    settings.check_templates()
    rows = pd.DataFrame([{"key": f"renewal/c-1/2027-03-01/{lead}d", "recipient": "cfo@corp.example",
                          "vendor": "Globex", "title": "Support", "amount": "10", "currency": "USD",
                          "renewal_date": date(2027, 3, 1), "days_left": days, "step_rank": lead}
                         for lead, days in ((15, 3), (30, 20))])
    urgent, earlier = compose_renewal_alerts(rows, "en", settings.sender(), settings.email_look()).emails
    assert urgent.subject == "Last call: Globex renews in 3 days"
    assert earlier.subject.startswith("Contract renews in 20 days")


@pytest.mark.parametrize(("name", "content", "expected"), [
    ("dunning.es.txt", "Hola {{ cliente }}\n",
     "DUEFLOW_TEMPLATES_DIR: dunning.es.txt, line 1 does not render: 'cliente' is undefined"),
    ("escalation.en.html", "<p>{{ number }</p>\n{% if %}",
     "DUEFLOW_TEMPLATES_DIR: escalation.en.html, line 1 does not render:"),
    ("renewal.en.subject", "{% if days_left > 1 %}Soon{% endfor %}",
     "DUEFLOW_TEMPLATES_DIR: renewal.en.subject, line 1 does not render:"),
    ("dunnig.en.html", "<p>typo in the name</p>",
     "DUEFLOW_TEMPLATES_DIR: dunnig.en.html is not a template dueflow uses"),
    ("dunning.fr.txt", "Bonjour", "DUEFLOW_TEMPLATES_DIR: dunning.fr.txt is not a template dueflow uses"),
    ("dunning.REMINDED_3.en.txt", "x",
     "DUEFLOW_TEMPLATES_DIR: dunning.REMINDED_3.en.txt is not a template"),
    ("_layout.html", "{% block content %}{% endblock %}{{ nothing.here }}",
     "DUEFLOW_TEMPLATES_DIR: _layout.html, line 1 does not render: 'nothing' is undefined"),
])
def test_a_broken_override_is_one_line_at_start_up(tmp_path, name, content, expected):
    (tmp_path / name).write_text(content)
    settings = settings_with(DUEFLOW_TEMPLATES_DIR=str(tmp_path))
    with pytest.raises(ConfigError) as raised:
        settings.check_templates()
    message = str(raised.value)
    assert message.startswith(expected), message
    assert "\n" not in message and len(message) < 400


def test_a_missing_templates_dir_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"DUEFLOW_TEMPLATES_DIR=.* is not a directory"):
        settings_with(DUEFLOW_TEMPLATES_DIR=str(tmp_path / "nope")).check_templates()


def test_the_packaged_templates_pass_the_check():
    settings_with().check_templates()


@pytest.mark.parametrize(("env", "expected"), [
    ({"DUEFLOW_PAYMENT_LINK": "pay.example/{number}"},
     "DUEFLOW_PAYMENT_LINK='pay.example/{number}' is not an http(s) URL"),
    ({"DUEFLOW_PAYMENT_LINK": "https://pay.example/{numero}"}, "has an unknown or malformed field"),
    ({"DUEFLOW_REPLY_TO": "cobros"}, "DUEFLOW_REPLY_TO='cobros' is not an email address"),
    ({"DUEFLOW_MAIL_FROM_NAME": "Bad <name>"},
     "DUEFLOW_MAIL_FROM_NAME='Bad <name>' is not a usable name"),
])
def test_bad_email_settings_are_one_line_each(env, expected):
    with pytest.raises(ConfigError) as raised:
        settings_with(**env)
    assert expected in str(raised.value) and "\n" not in str(raised.value)


def test_the_company_settings_reach_the_email_and_its_headers(tmp_path):
    settings = settings_with(
        DUEFLOW_MAIL_FROM="alerts@corp.example", DUEFLOW_MAIL_FROM_NAME="Acme Cobros",
        DUEFLOW_REPLY_TO="Cuentas a cobrar <ar@corp.example>", DUEFLOW_COMPANY_NAME="Acme S.L.",
        DUEFLOW_SIGNATURE="Ana García\\nCuentas a cobrar", DUEFLOW_TIMEZONE="Europe/Madrid",
        DUEFLOW_PAYMENT_INSTRUCTIONS="IBAN ES91 2100 0418 4502 0005 1332\\nIndique el número de factura",
        DUEFLOW_PAYMENT_LINK="https://pay.example/i/{invoice_id}?n={number}&a={amount}&c={currency}",
    )
    sender = settings.sender()
    [email] = compose_dunning_emails(dunning_rows("REMINDED_1"), NO_HISTORY, sender,
                                     as_of=date(2027, 2, 10), look=settings.email_look()).emails
    assert "Ana García\nCuentas a cobrar\n" in email.body_text
    assert "IBAN ES91 2100 0418 4502 0005 1332\nIndique el número de factura" in email.body_text
    link = "https://pay.example/i/inv-0?n=F-0&a=980.40&c=EUR"
    assert f"Pagar en línea: {link}" in email.body_text
    assert f'href="{link.replace("&", "&amp;")}"' in email.body_html
    assert "Acme S.L." in email.body_html and "Ana García<br>Cuentas a cobrar" in email.body_html
    raw = message_bytes(email, sender, datetime(2027, 7, 1, 8, 0, tzinfo=ZoneInfo("UTC")))
    message = message_from_bytes(raw, policy=policy.strict)
    assert message["From"].addresses[0].display_name == "Acme Cobros"
    assert message["Reply-To"].addresses[0].addr_spec == "ar@corp.example"
    assert message["Reply-To"].addresses[0].display_name == "Cuentas a cobrar"
    assert message["Date"] == "Thu, 01 Jul 2027 08:00:00 +0000"  # a given time keeps its zone
    now = message_from_bytes(message_bytes(email, sender), policy=policy.strict)["Date"]
    assert now.endswith(("+0100", "+0200")), now  # Madrid's real offset, never -0000
    assert b"Content-Transfer-Encoding: quoted-printable" in raw and b"base64" not in raw
    assert b"\r\nPagar en l=C3=ADnea: " in raw  # readable in an editor
    assert b"\r\nIBAN ES91 2100 0418 4502 0005 1332\r\n" in raw


def test_a_template_changed_between_runs_of_one_process_is_checked_and_used_again(tmp_path):
    """A worker runs night after night in one process: templates are compiled once, yet an
    edited override is what the next run checks and sends, and a broken edit is refused."""
    subject = tmp_path / "renewal.en.subject"
    subject.write_text("First {{ vendor }}\n")
    settings = settings_with(DUEFLOW_TEMPLATES_DIR=str(tmp_path))
    rows = pd.DataFrame([{"key": "renewal/c-1/2027-03-01/30d", "recipient": "cfo@corp.example",
                          "vendor": "Globex", "title": "Support", "amount": "10", "currency": "USD",
                          "renewal_date": date(2027, 3, 1), "days_left": 20, "step_rank": 30}])

    def subject_sent() -> str:
        settings.check_templates()
        [alert] = compose_renewal_alerts(rows, "en", settings.sender(), settings.email_look()).emails
        return alert.subject

    assert subject_sent() == "First Globex"
    assert subject_sent() == "First Globex"
    subject.write_text("Second {{ vendor }}\n")
    assert subject_sent() == "Second Globex"
    subject.write_text("Broken {{ vendor \n")
    with pytest.raises(ConfigError, match=r"renewal\.en\.subject"):
        settings.check_templates()
