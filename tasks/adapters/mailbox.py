"""The bounce mailbox (DUEFLOW_BOUNCE_URL; docs/bounces.md): IMAP over TLS with a login
(IMAPClient over the real protocol), or a local Maildir or mbox folder.

A message is read without changing it (BODY.PEEK: not even \\Seen) and marked processed
only after what it says is committed to the ledger: with the keyword `DueflowProcessed`
(the default), moved to another folder (`?move_to=Processed`), or deleted only when asked
(`?delete=yes`). A message read but not yet marked when the run died is read again by the
next run, and its report (recorded by its identity) changes nothing twice.
"""

from __future__ import annotations

import contextlib
import mailbox as stdlib_mailbox
import ssl
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from dueflow.blocks.endpoints import BounceConfig
from dueflow.tasks.core.defaults import MAX_REPORT_BYTES

PROCESSED_KEYWORD = "DueflowProcessed"
MAILDIR_FLAG = "S"  # Maildir's "seen": the mark a processed message carries


@dataclass(frozen=True)
class Fetched:
    """One message of the bounce mailbox: its reference there, the bytes read (at most
    MAX_REPORT_BYTES), its full size and when it arrived."""

    ref: str
    raw: bytes
    size: int
    arrived: datetime | None
    source: str


class MailboxError(Exception):
    """The bounce mailbox could not be reached or read; the message is one line, no secret."""


class BounceMailbox:
    """The interface: list what is not processed, read it, mark it processed."""

    def unprocessed(self) -> list[str]:
        raise NotImplementedError

    def fetch(self, refs: Sequence[str]) -> list[Fetched]:
        raise NotImplementedError

    def mark(self, refs: Sequence[str]) -> None:
        raise NotImplementedError

    def check(self) -> str:
        raise NotImplementedError

    def close(self) -> None:
        pass


@contextlib.contextmanager
def open_mailbox(config: BounceConfig) -> Iterator[BounceMailbox]:
    box: BounceMailbox = ImapMailbox(config) if config.is_imap else LocalMailbox(config)
    try:
        yield box
    finally:
        box.close()


def _one_line(exc: BaseException) -> str:
    text = exc.args[0] if exc.args else exc
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return " ".join(str(text).split())[:300] or type(exc).__name__


class ImapMailbox(BounceMailbox):
    """One folder of an IMAP server, by UID."""

    def __init__(self, config: BounceConfig) -> None:
        self.config = config
        self._client = None
        self._uidvalidity: int | None = None

    def _connect(self):  # imapclient's IMAPClient
        from imapclient import IMAPClient

        cfg = self.config
        try:
            client = IMAPClient(cfg.host, cfg.port, ssl=cfg.scheme == "imaps",
                                ssl_context=cfg.tls_context() if cfg.scheme == "imaps" else None,
                                timeout=cfg.timeout)
            if cfg.scheme == "imap+starttls":
                client.starttls(cfg.tls_context())
            client.login(cfg.username or "", cfg.password or "")
        except (TimeoutError, OSError, ssl.SSLError) as exc:
            raise MailboxError(f"cannot reach the bounce mailbox {cfg.describe()}:"
                               f" {_one_line(exc)}") from None
        except Exception as exc:  # imapclient's LoginError and protocol errors
            raise MailboxError(f"the bounce mailbox {cfg.describe()} refused the login of"
                               f" {cfg.username!r}: {_one_line(exc)}") from None
        return client

    @property
    def client(self):
        if self._client is None:
            client = self._connect()
            try:
                selected = client.select_folder(self.config.folder)
            except Exception as exc:
                with contextlib.suppress(Exception):
                    client.logout()
                raise MailboxError(f"the bounce mailbox {self.config.describe()}: cannot open the folder"
                                   f" {self.config.folder!r}: {_one_line(exc)}") from None
            self._uidvalidity = int(selected.get(b"UIDVALIDITY", 0))
            self._client = client
        return self._client

    def _source(self, uid: int) -> str:
        cfg = self.config
        return f"imap://{cfg.host}/{cfg.folder};UIDVALIDITY={self._uidvalidity}/;UID={uid}"

    @contextlib.contextmanager
    def _talking(self, doing: str) -> Iterator[None]:
        """A connection dropped or a refusal mid-conversation: one line; the connection is
        dropped (a rerun starts afresh)."""
        try:
            yield
        except MailboxError:
            raise
        except Exception as exc:
            self._client = None
            raise MailboxError(f"the bounce mailbox {self.config.describe()}: {doing} failed:"
                               f" {type(exc).__name__}: {_one_line(exc)}") from None

    def unprocessed(self) -> list[str]:
        criteria = ["UNKEYWORD", PROCESSED_KEYWORD] if self.config.processed == "flag" else ["ALL"]
        with self._talking("searching"):
            return [str(uid) for uid in sorted(self.client.search(criteria))]

    def fetch(self, refs: Sequence[str]) -> list[Fetched]:
        with self._talking("reading"):
            return self._fetch(refs)

    def _fetch(self, refs: Sequence[str]) -> list[Fetched]:
        if not refs:
            return []
        part = f"BODY.PEEK[]<0.{MAX_REPORT_BYTES}>"
        data = self.client.fetch([int(r) for r in refs], ["RFC822.SIZE", "INTERNALDATE", part])
        fetched = []
        for ref in refs:
            item = data.get(int(ref))
            if item is None:  # expunged meanwhile by someone else: nothing to read
                continue
            raw = next((v for k, v in item.items() if k.startswith(b"BODY[")), b"") or b""
            arrived = item.get(b"INTERNALDATE")
            if isinstance(arrived, datetime):
                arrived = arrived if arrived.tzinfo else arrived.astimezone()
            fetched.append(Fetched(ref, raw, int(item.get(b"RFC822.SIZE", len(raw))), arrived,
                                   self._source(int(ref))))
        return fetched

    def mark(self, refs: Sequence[str]) -> None:
        with self._talking("marking processed messages"):
            self._mark(refs)

    def _mark(self, refs: Sequence[str]) -> None:
        if not refs:
            return
        uids = [int(r) for r in refs]
        cfg = self.config
        if cfg.processed == "flag":
            self.client.add_flags(uids, [PROCESSED_KEYWORD.encode()], silent=True)
        elif cfg.processed == "move":
            self.client.move(uids, cfg.move_to)
        else:  # deleting was asked for in the URL (?delete=yes)
            self.client.delete_messages(uids, silent=True)
            self.client.uid_expunge(uids) if self.client.has_capability("UIDPLUS") else self.client.expunge()

    def check(self) -> str:
        """Log in and look the folder up (STATUS): no message is read."""
        client = self._connect()
        try:
            if not client.folder_exists(self.config.folder):
                raise MailboxError(f"the bounce mailbox {self.config.describe()} has no folder"
                                   f" {self.config.folder!r}")
            if self.config.processed == "move" and not client.folder_exists(self.config.move_to):
                raise MailboxError(f"the bounce mailbox {self.config.describe()} has no folder"
                                   f" {self.config.move_to!r} to move processed messages to")
            status = client.folder_status(self.config.folder, ["MESSAGES"])
            return (f"logged in as {self.config.username!r}, folder {self.config.folder!r} has"
                    f" {int(status.get(b'MESSAGES', 0))} message(s)")
        except MailboxError:
            raise
        except Exception as exc:
            raise MailboxError(f"the bounce mailbox {self.config.describe()}: {_one_line(exc)}") from None
        finally:
            with contextlib.suppress(Exception):
                client.logout()

    def close(self) -> None:
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.logout()
            self._client = None


class LocalMailbox(BounceMailbox):
    """A Maildir (read by its file names: a message's flags are in its name) or an mbox file
    on this machine: the embedded default."""

    def __init__(self, config: BounceConfig) -> None:
        self.config = config
        self.root = Path(config.path or ".")
        self._mbox: stdlib_mailbox.mbox | None = None

    # Maildir ------------------------------------------------------------------------
    def _maildir_files(self) -> dict[str, Path]:
        if not (self.root / "cur").is_dir() and not (self.root / "new").is_dir():
            raise MailboxError(f"the bounce mailbox {self.config.describe()} is not a Maildir"
                               " (no cur/ or new/)")
        files: dict[str, Path] = {}
        for sub in ("new", "cur"):
            folder = self.root / sub
            if folder.is_dir():
                files |= {path.name.partition(":")[0]: path for path in folder.iterdir()
                          if not path.name.startswith(".")}
        return files

    @staticmethod
    def _flags(path: Path) -> str:
        _, _, info = path.name.partition(":")
        return info.partition(",")[2] if info.startswith("2,") else ""

    # mbox ---------------------------------------------------------------------------
    @property
    def mbox(self) -> stdlib_mailbox.mbox:
        if self._mbox is None:
            if not self.root.is_file():
                raise MailboxError(f"the bounce mailbox {self.config.describe()} is not an mbox file")
            self._mbox = stdlib_mailbox.mbox(self.root, create=False)
        return self._mbox

    @property
    def is_maildir(self) -> bool:
        return self.config.scheme == "maildir"

    def unprocessed(self) -> list[str]:
        flagging = self.config.processed == "flag"
        if self.is_maildir:
            return sorted(key for key, path in self._maildir_files().items()
                          if not flagging or MAILDIR_FLAG not in self._flags(path))
        return [str(key) for key in sorted(self.mbox.keys())
                if not flagging or "R" not in self.mbox.get_message(key).get_flags()]

    def fetch(self, refs: Sequence[str]) -> list[Fetched]:
        fetched = []
        files = self._maildir_files() if self.is_maildir else {}
        for ref in refs:
            try:
                handle = open(files[ref], "rb") if self.is_maildir else self.mbox.get_file(int(ref))  # type: ignore[arg-type]  # noqa: SIM115
            except (KeyError, FileNotFoundError):  # gone meanwhile
                continue
            with handle:
                raw = handle.read(MAX_REPORT_BYTES)
                size = len(raw)
                while chunk := handle.read(1 << 20):  # the size of the rest, never held
                    size += len(chunk)
            arrived = datetime.fromtimestamp(files[ref].stat().st_mtime, UTC) if self.is_maildir else None
            fetched.append(Fetched(ref, raw, size, arrived, f"{self.config.scheme}://{self.root}#{ref}"))
        return fetched

    def mark(self, refs: Sequence[str]) -> None:
        cfg = self.config
        if self.is_maildir:
            files = self._maildir_files()
            target = self.root / f".{cfg.move_to}" if cfg.processed == "move" else None
            if target is not None:
                for sub in ("tmp", "new", "cur"):
                    (target / sub).mkdir(parents=True, exist_ok=True)
            for ref in refs:
                path = files.get(ref)
                if path is None:
                    continue
                if cfg.processed == "delete":  # deleting was asked for in the URL
                    path.unlink(missing_ok=True)
                    continue
                flags = "".join(sorted(set(self._flags(path)) | {MAILDIR_FLAG}))
                # One rename per message (atomic): into cur/ with the flag, or the other folder.
                path.rename((target or self.root) / "cur" / f"{ref}:2,{flags}")
            return
        box = self.mbox
        box.lock()
        try:
            for ref in refs:
                if cfg.processed == "delete":
                    box.discard(int(ref))  # type: ignore[arg-type]  # mbox keys are ints
                    continue
                if cfg.processed == "move":
                    raise MailboxError("move_to is for IMAP and Maildir: an mbox marks or deletes")
                message = box.get_message(int(ref))  # type: ignore[arg-type]
                message.add_flag("R")
                box[int(ref)] = message  # type: ignore[index]
            box.flush()
        finally:
            box.unlock()

    def check(self) -> str:
        count = len(self._maildir_files()) if self.is_maildir else len(self.mbox)
        return f"{self.config.describe()} holds {count} message(s)"

    def close(self) -> None:
        if self._mbox is not None:
            self._mbox.close()
            self._mbox = None
