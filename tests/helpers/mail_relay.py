"""A real Postfix as the company's relay, for the bounce tests that read what a real MTA
writes (docs/bounces.md, tests/e2e/test_postfix_bounces.py).

Debian's `postfix`, started by the test as an instance of its own: `main.cf`, `master.cf`,
queue, data and log under one temporary directory (`postfix -c DIR start`). Nothing leaves
the machine: listeners on 127.0.0.1 only, no DNS (`smtp_dns_support_level = disabled`),
every next hop numeric, and anything not routed here goes to `error:`. It plays every
server a reminder meets after dueflow's `250 OK`:

- the relay itself (`port`): what `DUEFLOW_MAIL_URL` points at. It accepts any recipient of
  its virtual domains, known or not, so an unknown user is bounced *after* acceptance;
- virtual mailboxes for the company's domain (`dueflow.test`: the bounce address, the
  escalation address) and the clients' (`clients.test`); the bounce mailbox is the Maildir a
  Dovecot serves (tests/helpers/imap_server.py);
- a full mailbox: one client's mbox, already at its size limit (`virtual_mailbox_limit` on a
  delivery agent of its own): the next email does not fit (5.2.2);
- a remote MX that refuses at RCPT (`refusing.test`: a second smtpd of the same instance,
  550 5.1.1), and a dead MX (`dead.test`: a closed port, the connection refused) whose mail
  is delayed, then expired when the queue lifetime is over.

The tests wait on Postfix's own log (`maillog_file`), never on a sleep.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers.smtp_server import free_port

POSTFIX = shutil.which("postfix") or ("/usr/sbin/postfix" if Path("/usr/sbin/postfix").exists() else None)
POSTQUEUE = shutil.which("postqueue") or "/usr/sbin/postqueue"
COMPANY, CLIENTS, REFUSING, DEAD = "dueflow.test", "clients.test", "refusing.test", "dead.test"
NOBODY = 65534  # who owns the virtual mailboxes (Dovecot reads them as nobody too)
FULL_LIMIT = 64_000  # bytes of the full mailbox: what it holds already, less than one email


def missing_reason() -> str | None:
    """Why a private Postfix cannot run here, in one line; None when it can."""
    if POSTFIX is None:
        return "postfix is not installed (apt-get install -y postfix; .ci/run installs it)"
    if os.geteuid() != 0:
        return "a private Postfix needs root (its master process starts as root): run the MTA tier as root"
    return None


def _closed_port() -> int:
    """A loopback port nothing listens on: a mail exchanger that never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


MASTER_CF = """\
# service type  private unpriv  chroot  wakeup  maxproc command
127.0.0.1:{port} inet n   -       n       -       -       smtpd
  -o smtpd_reject_unlisted_recipient=no
127.0.0.1:{mx_port} inet n -      n       -       -       smtpd
  -o myhostname=mx.{refusing}
  -o smtpd_recipient_restrictions=$refusing_mx_restrictions
pickup    unix  n       -       n       60      1       pickup
cleanup   unix  n       -       n       -       0       cleanup
qmgr      unix  n       -       n       300     1       qmgr
rewrite   unix  -       -       n       -       -       trivial-rewrite
bounce    unix  -       -       n       -       0       bounce
defer     unix  -       -       n       -       0       bounce
trace     unix  -       -       n       -       0       bounce
verify    unix  -       -       n       -       1       verify
flush     unix  n       -       n       1000?   0       flush
proxymap  unix  -       -       n       -       -       proxymap
smtp      unix  -       -       n       -       -       smtp
showq     unix  n       -       n       -       -       showq
error     unix  -       -       n       -       -       error
retry     unix  -       -       n       -       -       error
discard   unix  -       -       n       -       -       discard
virtual   unix  -       n       n       -       -       virtual
full      unix  -       n       n       -       -       virtual
  -o virtual_mailbox_limit={full_limit}
  -o message_size_limit={full_limit}
anvil     unix  -       -       n       -       1       anvil
scache    unix  -       -       n       -       1       scache
postlog   unix-dgram n  -       n       -       1       postlogd
"""


@dataclass
class Postfix:
    """One private Postfix instance. `mailboxes` are the virtual users (address → Maildir);
    `bounce_maildir` is where bounces@dueflow.test is delivered (the Dovecot's)."""

    bounce_maildir: Path
    mailboxes: tuple[str, ...] = ()
    full: str = f"full@{CLIENTS}"  # the mailbox that is full
    delay_warning: int = 1  # seconds before a deferred message is reported delayed
    lifetime: int = 4  # seconds a deferred message is kept before it is returned (expired)
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="dueflow-postfix-")))
    port: int = field(default_factory=free_port)
    mx_port: int = field(default_factory=free_port)
    dead_port: int = field(default_factory=_closed_port)
    _flushed: float = 0.0

    @property
    def url(self) -> str:
        return f"smtp://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.root / "maillog"

    def maildir(self, address: str) -> Path:
        local, _, domain = address.partition("@")
        return self.root / "vmail" / domain / local

    def _main_cf(self) -> str:
        return f"""\
compatibility_level = 3.6
mail_owner = postfix
setgid_group = postdrop
queue_directory = {self.root}/queue
data_directory = {self.root}/data
maillog_file = {self.log_path}
maillog_file_prefixes = {self.root}
myhostname = mail.{COMPANY}
mydomain = {COMPANY}
myorigin = $myhostname
mydestination =
local_recipient_maps =
relay_domains =
mynetworks = 127.0.0.0/8
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
smtpd_banner = $myhostname ESMTP
biff = no
# Nothing leaves the machine: no DNS, numeric next hops only, the rest refused.
smtp_dns_support_level = disabled
default_transport = error:5.7.1 nothing leaves the test machine
relay_transport = error:5.7.1 nothing leaves the test machine
transport_maps = texthash:{self.root}/transport
smtpd_relay_restrictions = permit_mynetworks, reject_unauth_destination
virtual_mailbox_domains = {COMPANY} {CLIENTS}
virtual_mailbox_base = /
virtual_mailbox_maps = texthash:{self.root}/vmailbox
virtual_uid_maps = static:{NOBODY}
virtual_gid_maps = static:{NOBODY}
# The remote MX refuses every recipient at RCPT, as a server that knows no such user.
refusing_mx_restrictions = check_recipient_access texthash:{self.root}/refuse, reject
# Short lives, so that a dead MX is reported delayed, then given up, within seconds.
delay_warning_time = {self.delay_warning}s
maximal_queue_lifetime = {self.lifetime}s
bounce_queue_lifetime = {self.lifetime}s
minimal_backoff_time = 3600s
maximal_backoff_time = 3600s
queue_run_delay = 3600s
smtp_connect_timeout = 5s
notify_classes =
"""

    def start(self) -> None:
        """Write the instance's configuration and start it; returns when the relay answers."""
        self.root.chmod(0o755)  # Postfix's own user reaches its queue under it
        vmail = self.root / "vmail"
        vmail.mkdir()
        shutil.chown(vmail, NOBODY, NOBODY)
        boxes = {address: f"{str(self.maildir(address)).lstrip('/')}/" for address in self.mailboxes}
        boxes[f"bounces@{COMPANY}"] = f"{str(self.bounce_maildir).lstrip('/')}/"
        boxes[self.full] = str(self.maildir(self.full)).lstrip("/")  # an mbox file: no slash
        mbox = self.maildir(self.full)
        mbox.parent.mkdir(parents=True)
        head = "From old@clients.test Thu Jan  7 06:00:00 2027\nSubject: old\n\n"
        body = ("Old mail. " * 7 + "\n") * FULL_LIMIT
        mbox.write_text(head + body[: FULL_LIMIT - len(head) - 100] + "\n")  # 100 bytes are left
        for made in (mbox.parent, mbox):
            shutil.chown(made, NOBODY, NOBODY)
        (self.root / "vmailbox").write_text("".join(f"{a} {p}\n" for a, p in boxes.items()))
        (self.root / "transport").write_text(
            f"{REFUSING} smtp:[127.0.0.1]:{self.mx_port}\n"
            f"{DEAD} smtp:[127.0.0.1]:{self.dead_port}\n"
            f"{self.full} full:\n")
        (self.root / "refuse").write_text(
            f"{REFUSING} 550 5.1.1 User unknown in local recipient table\n")
        (self.root / "main.cf").write_text(self._main_cf())
        (self.root / "master.cf").write_text(MASTER_CF.format(
            port=self.port, mx_port=self.mx_port, refusing=REFUSING, full_limit=FULL_LIMIT))
        self.log_path.touch()
        (self.root / "queue").mkdir(mode=0o755)
        self._postfix("check")  # makes the queue's folders, owned as Postfix wants them
        self._postfix("start")
        self.wait_for(lambda: _answers(self.port) and _answers(self.mx_port), "the relay to listen", 30)

    def _postfix(self, *args: str) -> None:
        done = subprocess.run([str(POSTFIX), "-c", str(self.root), *args], capture_output=True, text=True,
                              timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"postfix {' '.join(args)} failed: {(done.stderr or done.stdout)[-800:]}")

    def flush(self) -> None:
        """`postqueue -f`: try every deferred message now (what an administrator would run)."""
        subprocess.run([POSTQUEUE, "-c", str(self.root), "-f"], check=True, capture_output=True, timeout=30)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for(self, ready: Callable[[], bool], what: str, timeout: float = 60) -> None:
        """Until `ready()` (read from the log, or a socket); RuntimeError with the log's tail."""
        deadline = time.monotonic() + timeout
        while not ready():
            if time.monotonic() > deadline:
                raise RuntimeError(f"Postfix: no {what} within {timeout} s; its log ends:\n"
                                   + self.log()[-3000:])
            time.sleep(0.05)

    def queue(self) -> MailLog:
        return MailLog.read(self.log())

    def settle(self, message_ids: list[str], timeout: float = 60) -> MailLog:
        """Wait on the log until every one of these messages is done — delivered, bounced,
        or deferred with its delay notice written — and every notice Postfix wrote is
        delivered to its mailbox. A deferred message gets its notice at the first attempt
        after `delay_warning` seconds: the queue is flushed (`postqueue -f`) until it has."""
        def done() -> bool:
            log = self.queue()
            for message_id in message_ids:
                message = log.by_message_id(message_id)
                if message is None or not message.status:
                    return False
                deferred = "deferred" in message.status.values()
                if deferred and not any(kind == "delay" for kind, _ in message.notices):
                    if time.monotonic() >= self._flushed + self.delay_warning:
                        self._flushed = time.monotonic()
                        self.flush()
                    return False
                if not deferred and not message.removed:
                    return False
            return all(log.delivered(qid) for message in log.messages.values() for _, qid in message.notices)

        self.wait_for(done, "end to the messages " + ", ".join(message_ids), timeout)
        return self.queue()

    def expire(self, message_id: str, timeout: float = 60) -> MailLog:
        """Flush the queue (`postqueue -f`) and wait on the log for the attempt it makes,
        until Postfix finds the message's queue lifetime over, gives up and returns it
        (`status=expired`); then until that report is delivered."""
        deadline = time.monotonic() + timeout
        while True:
            before = self.queue().by_message_id(message_id)
            if before is None:
                raise RuntimeError(f"Postfix never queued {message_id}")
            if before.expired:
                break
            self.flush()
            tried = before.attempts
            self.wait_for(lambda: (m := self.queue().by_message_id(message_id)) is not None
                          and (m.attempts > tried or m.expired),  # noqa: B023 (waited on here, in the loop)
                          f"delivery attempt of {message_id}", max(1.0, deadline - time.monotonic()))
            if not self.queue().by_message_id(message_id).expired:  # type: ignore[union-attr]
                time.sleep(0.5)  # its lifetime is not over yet: the next attempt in half a second

        def returned() -> bool:
            log = self.queue()
            message = log.by_message_id(message_id)
            notices = [qid for kind, qid in (message.notices if message else []) if kind == "non-delivery"]
            return bool(notices) and log.delivered(notices[-1])

        self.wait_for(returned, f"report of the expiry of {message_id}",
                      max(1.0, deadline - time.monotonic()))
        return self.queue()

    def stop(self) -> None:
        try:
            self._postfix("stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), 0.5) as sock:
            return sock.recv(64).startswith(b"220")
    except OSError:
        return False


_QUEUE_LINE = re.compile(r"postfix/(?P<program>[\w/-]+)\[\d+\]: (?P<qid>[0-9A-F]{6,}): (?P<text>.*)$")
_TO = re.compile(r"to=<(?P<to>[^>]*)>.*? status=(?P<status>\w+)")


@dataclass
class Message:
    """What Postfix's log says of one queue file."""

    qid: str
    message_id: str | None = None
    sender: str | None = None
    status: dict[str, str] = field(default_factory=dict)  # recipient → last status
    attempts: int = 0  # delivery attempts logged (one line per recipient each)
    notices: list[tuple[str, str]] = field(default_factory=list)  # (delay|non-delivery, its queue id)
    expired: bool = False
    removed: bool = False


@dataclass
class MailLog:
    """Postfix's log, read into messages by queue id."""

    messages: dict[str, Message]

    @classmethod
    def read(cls, text: str) -> MailLog:
        messages: dict[str, Message] = {}
        for line in text.splitlines():
            found = _QUEUE_LINE.search(line)
            if not found:
                continue
            message = messages.setdefault(found["qid"], Message(found["qid"]))
            said = found["text"]
            if said.startswith("message-id=") and found["program"].endswith("cleanup"):
                message.message_id = said.removeprefix("message-id=").strip()
            elif said.startswith("from=<"):
                message.sender = said[6:said.index(">")]
                message.expired = message.expired or "status=expired" in said
            elif said == "removed":
                message.removed = True
            elif (notice := re.match(r"sender (delay|non-delivery) notification: ([0-9A-F]+)", said)):
                message.notices.append((notice[1], notice[2]))
            elif (to := _TO.search(said)):
                message.status[to["to"]] = to["status"]
                message.attempts += 1
        return cls(messages)

    def by_message_id(self, message_id: str) -> Message | None:
        found = [m for m in self.messages.values() if m.message_id == message_id]
        return found[-1] if found else None

    def delivered(self, qid: str) -> bool:
        """A notice (or any message) delivered everywhere and gone from the queue."""
        message = self.messages.get(qid)
        return bool(message and message.removed and message.status
                    and all(s == "sent" for s in message.status.values()))


# --------------------------------------------------------------------------- unit fixtures
# `python -m tests.helpers.mail_relay tests/data/postfix` (as root, Postfix installed) writes
# the reports this Postfix returns for each case, as the unit layer reads them
# (tests/unit/test_real_reports.py): the bytes Postfix wrote, in every environment.

CASES = {  # name: (To, Cc, NOTIFY)
    "unknown-user": (f"nobody@{CLIENTS}", None, None),
    "refused-at-rcpt": (f"ap@{REFUSING}", None, None),
    "mailbox-full": (f"full@{CLIENTS}", None, None),
    "copy-failed": (f"ap@{CLIENTS}", f"gone.manager@{COMPANY}", None),
    "client-and-copy-failed": (f"nobody@{CLIENTS}", f"gone.manager@{COMPANY}", None),
    "expired": (f"ap@{DEAD}", None, None),
    "delivered": (f"ap@{CLIENTS}", None, "SUCCESS"),
}


def capture(target: Path) -> None:
    import smtplib
    from email.message import EmailMessage

    bounces = Path(tempfile.mkdtemp(prefix="dueflow-capture-"))
    shutil.chown(bounces, NOBODY, NOBODY)
    relay = Postfix(bounces / "Maildir", mailboxes=(f"ap@{CLIENTS}",))
    relay.start()
    try:
        ids = {}
        for name, (to, cc, notify) in CASES.items():
            msg = EmailMessage()
            msg["From"], msg["To"] = f"Finance <alerts@{COMPANY}>", to
            if cc:
                msg["Cc"] = cc
            msg["Subject"] = "Reminder: invoice F-1001"
            ids[name] = msg["Message-ID"] = f"<{name}.0f3a9c@{COMPANY}>"
            msg["X-Dueflow-Key"] = f"dunning/inv-{name}/REMINDED_1"
            msg.set_content("Dear client, invoice F-1001 is overdue.\n")
            with smtplib.SMTP("127.0.0.1", relay.port) as smtp:
                smtp.send_message(msg, f"bounces@{COMPANY}", [to, *([cc] if cc else [])],
                                  rcpt_options=[f"NOTIFY={notify}"] if notify else [])
        relay.settle(list(ids.values()))
        relay.expire(ids["expired"])
        target.mkdir(parents=True, exist_ok=True)
        for path in sorted((bounces / "Maildir" / "new").iterdir()):
            raw = path.read_bytes()
            name = next(n for n, i in ids.items() if i.encode() in raw)
            kind = "delayed" if b"Subject: Delayed Mail" in raw else None
            (target / f"{kind or name}.eml").write_bytes(raw)
            print(f"{kind or name}.eml")
    finally:
        relay.stop()
        shutil.rmtree(bounces, ignore_errors=True)


if __name__ == "__main__":
    import sys

    capture(Path(sys.argv[1]))
