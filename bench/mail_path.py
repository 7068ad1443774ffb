"""The mail path: dueflow's own messages pushed by a bare client, nothing else in between.

    python -m bench.mail_path FILE HOST PORT CONNECTIONS

FILE holds the messages as bench/smtp_sink.py captured them (one JSON line each: from, to,
base64 DATA bytes). CONNECTIONS threads each open one `smtplib` connection and send their
share over it (`sendmail(from, rcpts, bytes)`), then QUIT. Prints one JSON line
{messages, connections, seconds, per_second}; seconds run from before the first connect to
after the last QUIT, so neither the interpreter's start nor reading the file is counted.
"""

from __future__ import annotations

import base64
import json
import smtplib
import sys
import threading
import time
from pathlib import Path

Message = tuple[str, list[str], bytes]


def read_messages(path: Path) -> list[Message]:
    out = []
    with path.open(encoding="ascii") as lines:
        for line in lines:
            m = json.loads(line)
            out.append((m["from"], m["to"], base64.b64decode(m["data"])))
    return out


def push(messages: list[Message], host: str, port: int, connections: int) -> float:
    """Seconds to send every message over `connections` connections, one thread each."""
    shares = [messages[i::connections] for i in range(connections)]
    errors: list[BaseException] = []

    def send(share: list[Message]) -> None:
        try:
            with smtplib.SMTP(host, port, timeout=60) as smtp:  # QUIT on leaving
                for mail_from, rcpts, data in share:
                    smtp.sendmail(mail_from, rcpts, data)
        except BaseException as exc:  # reported after the join, the thread's traceback alone is lost
            errors.append(exc)

    threads = [threading.Thread(target=send, args=(share,)) for share in shares if share]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - started
    if errors:
        raise SystemExit(f"mail path: {len(errors)} connection(s) failed: {errors[0]!r}")
    return seconds


def main(argv: list[str]) -> None:
    path, host, port, connections = argv
    messages = read_messages(Path(path))
    seconds = push(messages, host, int(port), int(connections))
    print(json.dumps({"messages": len(messages), "connections": int(connections),
                      "seconds": round(seconds, 3),
                      "per_second": round(len(messages) / seconds, 1) if seconds else None}))


if __name__ == "__main__":
    main(sys.argv[1:])
