"""The probe of the Prefect API at the end of a night (flows/prefect_api.unreachable) checks
the API's certificate as Prefect's own client does, and builds nothing for plain HTTP."""

from __future__ import annotations

import ssl
from pathlib import Path

import certifi
from prefect.settings import (
    PREFECT_API_SSL_CERT_FILE,
    PREFECT_API_TLS_INSECURE_SKIP_VERIFY,
    temporary_settings,
)

from dueflow.flows.prefect_api import _tls


def test_plain_http_needs_no_tls_context():
    assert _tls("http://127.0.0.1:4200/api") is False
    assert _tls("HTTP://prefect.internal/api") is False


def test_https_is_verified_against_certifi_or_the_configured_ca_file(tmp_path):
    with temporary_settings(updates={PREFECT_API_SSL_CERT_FILE: None}):
        default = _tls("https://api.prefect.cloud/api")
    assert isinstance(default, ssl.SSLContext)
    assert default.verify_mode == ssl.CERT_REQUIRED and default.check_hostname
    assert default.cert_store_stats()["x509_ca"] > 0  # certifi's bundle

    one_ca = tmp_path / "ca.pem"  # a CA file of one certificate: the first of certifi's
    bundle = Path(certifi.where()).read_text(encoding="utf-8")
    one_ca.write_text(bundle[: bundle.index("-----END CERTIFICATE-----") + 26])
    with temporary_settings(updates={PREFECT_API_SSL_CERT_FILE: str(one_ca)}):
        own = _tls("https://prefect.internal/api")
    assert isinstance(own, ssl.SSLContext) and own.cert_store_stats()["x509_ca"] == 1


def test_https_with_verification_turned_off_in_prefect_is_not_verified():
    with temporary_settings(updates={PREFECT_API_TLS_INSECURE_SKIP_VERIFY: True}):
        assert _tls("https://prefect.internal/api") is False
