"""A real IMAP server for the bounce tests: Debian's Dovecot (`dovecot-imapd`), started by
the test with its own configuration in a temporary directory — implicit TLS on an
unprivileged port, one user in a passwd-file, Maildir storage — and stopped afterwards.
And a TCP relay in front of it that can cut the connection mid-response (the fault)."""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers.smtp_server import free_port

DOVECOT = shutil.which("dovecot") or ("/usr/sbin/dovecot" if Path("/usr/sbin/dovecot").exists() else None)
USER, PASSWORD = "bounces", "imap-s3cret-Pw"


def self_signed_certificate(path: Path) -> Path:
    """A throw-away certificate for 127.0.0.1 that is its own CA, key included (PEM), at
    `path`: what a test gives Dovecot, and its clients as `?cafile=`."""
    import datetime as dt
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1)).not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                       critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                          serialization.NoEncryption())
        + cert.public_bytes(serialization.Encoding.PEM)
    )
    return path


def missing_reason() -> str | None:
    if DOVECOT is None:
        return "dovecot is not installed (apt-get install -y dovecot-imapd; .ci/run installs it)"
    return None


def _config(root: Path, port: int, cert: Path, *, as_root: bool) -> str:
    # As root, Dovecot's login processes must run as another user (dovenull) and mail may
    # not be owned by uid 0; as anyone else, everything runs as that user.
    me = pwd.getpwuid(os.getuid()).pw_name
    internal, login, owner = ("dovecot", "dovenull", "nobody") if as_root else (me, me, me)
    group = "nogroup" if as_root else grp.getgrgid(os.getgid()).gr_name
    return f"""
base_dir = {root}/run
state_dir = {root}/state
log_path = {root}/dovecot.log
instance_name = dueflow-test-{port}
protocols = imap
listen = 127.0.0.1
ssl = required
ssl_cert = <{root}/cert.pem
ssl_key = <{root}/key.pem
mail_location = maildir:{root}/mail/%u
default_internal_user = {internal}
default_internal_group = {"dovecot" if as_root else group}
default_login_user = {login}
first_valid_uid = 1
auth_mechanisms = plain
# A refused login is answered at once (Dovecot waits 2 s by default, against guessing).
auth_failure_delay = 0
disable_plaintext_auth = yes
service imap-login {{
  chroot =
  inet_listener imap {{
    port = 0
  }}
  inet_listener imaps {{
    port = {port}
    ssl = yes
  }}
}}
service anvil {{
  chroot =
}}
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {root}/users
}}
userdb {{
  driver = static
  args = uid={owner} gid={group} home={root}/mail/%u
}}
"""


@dataclass
class Dovecot:
    """One Dovecot, listening with implicit TLS on 127.0.0.1:`port`."""

    cert: Path  # PEM with key and certificate (its own CA)
    port: int = field(default_factory=free_port)
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="dueflow-dovecot-")))
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"imaps://{USER}:{PASSWORD}@127.0.0.1:{self.port}/INBOX?cafile={self.cert}"

    def start(self) -> None:
        as_root = os.geteuid() == 0
        self.root.chmod(0o755)  # the login processes run as another user
        for sub in ("run", "state", "mail"):
            (self.root / sub).mkdir(exist_ok=True)
        if as_root:
            shutil.chown(self.root / "mail", "nobody")
        # Dovecot reads the key and the certificate from files of their own.
        pem = self.cert.read_text()
        cut = pem.index("-----BEGIN CERTIFICATE-----")
        (self.root / "key.pem").write_text(pem[:cut])
        (self.root / "cert.pem").write_text(pem[cut:])
        self.cert = self.root / "cert.pem"
        (self.root / "users").write_text(f"{USER}:{{PLAIN}}{PASSWORD}::::::\n")
        (self.root / "dovecot.conf").write_text(_config(self.root, self.port, self.cert, as_root=as_root))
        self.process = subprocess.Popen([DOVECOT, "-F", "-c", str(self.root / "dovecot.conf")],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"dovecot did not start: {self.process.stderr.read().decode()[:500]}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 0.5):
                return
            time.sleep(0.1)
        raise RuntimeError("dovecot did not listen within 20 s: " + self.log()[-500:])

    def log(self) -> str:
        path = self.root / "dovecot.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def client(self):
        from imapclient import IMAPClient

        client = IMAPClient("127.0.0.1", self.port, ssl=True,
                            ssl_context=ssl.create_default_context(cafile=str(self.cert)), timeout=10)
        client.login(USER, PASSWORD)
        return client

    def deliver(self, *messages: bytes, folder: str = "INBOX") -> None:
        """Messages arrive in the folder (IMAP APPEND, as a delivery agent would put them)."""
        client = self.client()
        try:
            for raw in messages:
                client.append(folder, raw)
        finally:
            client.logout()

    def flags(self, folder: str = "INBOX") -> list[tuple[bytes, ...]]:
        client = self.client()
        try:
            client.select_folder(folder, readonly=True)
            uids = client.search(["ALL"])
            return [v[b"FLAGS"] for _, v in sorted(client.fetch(uids, ["FLAGS"]).items())] if uids else []
        finally:
            client.logout()

    def stop(self) -> None:
        """SIGTERM; Dovecot takes about a second to end its children, which a thread waits
        out (then removes the folder) while the next test runs: each Dovecot has a port and
        a folder of its own."""
        process, root = self.process, self.root
        if process is not None and process.poll() is None:
            process.terminate()
        threading.Thread(target=_reap, args=(process, root), name="dovecot-reaper").start()


def _reap(process: subprocess.Popen | None, root: Path) -> None:
    if process is not None:
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
    shutil.rmtree(root, ignore_errors=True)


@dataclass
class CuttingRelay:
    """A TCP relay to `target` that closes both sides once `cut_after` bytes have come back
    from the server on a connection (None: never): an IMAP connection dropped mid-fetch."""

    target: int
    cut_after: int | None = None
    port: int = field(default_factory=free_port)
    cuts: int = 0
    _server: socket.socket | None = None

    def start(self) -> None:
        self._server = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        assert self._server is not None
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            threading.Thread(target=self._pipe, args=(client, upstream, None), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, self.cut_after), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, limit: int | None) -> None:
        passed = 0
        try:
            while data := source.recv(65536):
                if limit is not None and passed + len(data) > limit:
                    sink.sendall(data[: limit - passed])
                    self.cuts += 1
                    break
                sink.sendall(data)
                passed += len(data)
        except OSError:
            pass
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def stop(self) -> None:
        if self._server is not None:
            self._server.close()
