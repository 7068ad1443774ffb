"""SMTP transports against a real aiosmtpd server: STARTTLS and implicit TLS with a
private CA, authentication, and the file outbox."""

from __future__ import annotations

import pytest
from prefect_email import EmailServerCredentials
from prefect_email.credentials import SMTPServer, SMTPType

from dueflow.blocks.endpoints import mail_url_from_credentials, parse_mail_url
from dueflow.blocks.errors import ConfigError
from dueflow.tasks.adapters.mail import open_transport
from dueflow.tasks.core.addresses import parse_mailbox
from dueflow.tasks.core.message import OutgoingEmail
from tests.helpers.smtp_server import SmtpSink

SENDER = parse_mailbox("alerts@corp.example", "DUEFLOW_MAIL_FROM")
EMAIL = OutgoingEmail("renewal/c-1/2027-03-01/30d", "owner@example.com", "Renewal", "text\n",
                      "<p>html</p>", "<abc@example.com>")


@pytest.mark.parametrize(("tls", "scheme"), [("starttls", "smtp+starttls"), ("ssl", "smtps")])
def test_tls_with_login(certificate, tls, scheme):
    sink = SmtpSink(tls=tls, login=("alerts@corp.example", "p@ss:word"), certfile=str(certificate))
    sink.start()
    try:
        url = f"{scheme}://alerts%40corp.example:p%40ss%3Aword@127.0.0.1:{sink.port}?cafile={certificate}"
        config = parse_mail_url(url)
        assert "p@ss:word" not in repr(config) and "p@ss:word" not in config.describe()
        with open_transport(config, SENDER) as transport:
            result = transport.send(EMAIL)
        assert result.status == "sent", result
        assert sink.keys() == [EMAIL.key]

        wrong = url.replace("p%40ss%3Aword", "nope")
        with open_transport(parse_mail_url(wrong), SENDER) as transport:
            refused = transport.send(EMAIL)
        assert refused.status == "failed" and refused.fault == "login"
        assert "login refused: 535" in (refused.error or "") and sink.logins == 2  # one per login
        untrusted = url.split("?")[0]  # without our CA the certificate is not trusted
        with open_transport(parse_mail_url(untrusted), SENDER) as transport:
            assert transport.send(EMAIL).status == "failed"
        assert sink.keys() == [EMAIL.key]
    finally:
        sink.stop()


def test_connection_is_reused_across_messages():
    sink = SmtpSink()
    sink.start()
    try:
        emails = [OutgoingEmail(f"k{n}", "x@example.com", "s", "t", "h", f"<{n}@b>") for n in range(5)]
        with open_transport(parse_mail_url(f"smtp://127.0.0.1:{sink.port}"), SENDER) as t:
            assert [t.send(email).status for email in emails] == ["sent"] * 5
        assert len(sink.keys()) == 5 and sink.ehlos == 1  # one conversation for all five
    finally:
        sink.stop()


def test_file_outbox_writes_one_eml_per_key(tmp_path):
    outbox = tmp_path / "outbox"
    with open_transport(parse_mail_url(f"file://{outbox}"), SENDER) as transport:
        assert transport.send(EMAIL).status == "sent"
    [eml] = outbox.glob("*.eml")
    text = eml.read_text()
    assert "X-Dueflow-Key: renewal/c-1/2027-03-01/30d" in text and "Message-ID: <abc@example.com>" in text
    assert not list(outbox.glob("*.part"))


@pytest.mark.parametrize("server", list(SMTPServer))
def test_every_named_server_of_the_mail_block_becomes_its_host(server):
    by_member = EmailServerCredentials(smtp_server=server, smtp_type=SMTPType.SSL)
    by_name = EmailServerCredentials(smtp_server=server.name.lower(), smtp_type="STARTTLS")
    assert parse_mail_url(mail_url_from_credentials(by_member)) == parse_mail_url(
        f"smtps://{server.value}:465")
    assert parse_mail_url(mail_url_from_credentials(by_name)).host == server.value


@pytest.mark.parametrize(("tls", "smtp_type"), [("starttls", SMTPType.STARTTLS), ("ssl", SMTPType.SSL)])
def test_the_mail_block_reaches_a_tls_server_and_honours_verify(certificate, tls, smtp_type):
    sink = SmtpSink(tls=tls, login=("alerts@corp.example", "p@ss:word"), certfile=str(certificate))
    sink.start()
    try:
        def send(verify: bool) -> str:
            block = EmailServerCredentials(smtp_server="127.0.0.1", smtp_port=sink.port, smtp_type=smtp_type,
                                           username="alerts@corp.example", password="p@ss:word",
                                           verify=verify)
            url = mail_url_from_credentials(block)
            assert "p@ss:word" not in parse_mail_url(url).describe()
            with open_transport(parse_mail_url(url), SENDER) as transport:
                return transport.send(EMAIL).status

        assert send(verify=True) == "failed"  # a self-signed certificate is not trusted…
        assert sink.keys() == []
        assert send(verify=False) == "sent"  # …unless the block says not to verify it
        assert sink.keys() == [EMAIL.key]
    finally:
        sink.stop()


def test_insecure_mail_block_uses_port_25_and_a_bad_verify_is_refused():
    block = EmailServerCredentials(smtp_server="relay.corp.example", smtp_type=SMTPType.INSECURE)
    assert mail_url_from_credentials(block) == "smtp://relay.corp.example:25"
    with pytest.raises(ConfigError, match=r"DUEFLOW_MAIL_URL \?verify='maybe' is not on or off: write one"):
        parse_mail_url("smtps://relay.corp.example?verify=maybe")
