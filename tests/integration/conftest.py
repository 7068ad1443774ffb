"""Fixtures of the integration layer."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.imap_server import self_signed_certificate


@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> Path:
    """A self-signed certificate for 127.0.0.1 (it is its own CA), key included."""
    return self_signed_certificate(tmp_path_factory.mktemp("tls") / "server.pem")
