"""URL settings shown without their secrets, from the same parse that connects (issue 25).

Each URL setting is read by one parser, the one its row in the settings' table names
(blocks/table.py, `url=`): DUEFLOW_DATABASE_URL by SQLAlchemy's `make_url` (what
`create_engine` reads), DUEFLOW_MAIL_URL and DUEFLOW_BOUNCE_URL by `urllib.parse.urlsplit`
(what blocks/endpoints.py reads). Masking with
another parser than the one that connects is how a password was printed: `urlsplit` reads
`postgresql://u:pa#ss@host/db` as host `u`, SQLAlchemy as password `pa#ss`.

A URL that does not parse the way it was meant — a raw `@`, `#`, `/` or `?` in a password
moves the host, the port or the path — is one ConfigError telling to percent-encode, and
never shows the URL.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import quote, quote_plus, unquote, urlsplit, urlunsplit

from dueflow.blocks.errors import ConfigError
from dueflow.blocks.table import SETTINGS, URL_SETTINGS  # URL_SETTINGS: the parser of each URL setting

MASK = "***"
# Query parameters that carry a secret (psycopg's ?password=, ?sslpassword=, tokens).
_SECRET_PARAMETER = re.compile(r"pass|secret|token|key", re.IGNORECASE)


@dataclass(frozen=True)
class ReadUrl:
    """What the setting's parser read, with the secrets it found."""

    shown: str  # the URL with every secret replaced by MASK
    secrets: tuple[str, ...]  # as the parser reads them, and as they were written


def _encode_hint(setting: str) -> ConfigError:
    what = "database URL" if URL_SETTINGS.get(setting) == "sqlalchemy" else "URL"
    return ConfigError(
        f"{setting} is not a usable {what}: it does not read as scheme://user:password@host:port/…;"
        " if it has a user or password, percent-encode them (@ as %40, : as %3A, / as %2F,"
        " ? as %3F, # as %23, % as %25;"
        " python3 -c 'import urllib.parse,sys; print(urllib.parse.quote(sys.argv[1], safe=\"\"))'"
        " PASSWORD prints it encoded); the URL is not shown because it may hold the password")


def _written_secrets(url: str) -> list[str]:
    """Every way the userinfo's password may have been written: whatever a parser made of
    it, these are not shown (the widest reading: up to the last @ before the host)."""
    rest = url.partition("://")[2]
    userinfo = rest.rpartition("@")[0]
    found = []
    if ":" in userinfo:
        found.append(userinfo.partition(":")[2])
    return found


def _with_forms(values: Iterable[str | None]) -> tuple[str, ...]:
    forms = []
    for value in values:
        if value:
            forms += [value, unquote(value), quote(value, safe=""), quote_plus(value)]
    return tuple(dict.fromkeys(f for f in forms if f))


def _masked_query(pairs: list[tuple[str, str]]) -> tuple[list[tuple[str, str]], list[str]]:
    secrets = [value for name, value in pairs if _SECRET_PARAMETER.search(name)]
    return [(name, MASK if _SECRET_PARAMETER.search(name) else value) for name, value in pairs], secrets


def read_url(url: str, setting: str) -> ReadUrl:
    """The URL of `setting` read by its parser, checked: ConfigError (one line, the URL
    not shown) when it does not read the way it was meant."""
    if URL_SETTINGS.get(setting, "urlsplit") == "sqlalchemy":
        return _read_sqlalchemy(url, setting)
    return _read_standard(url, setting)


def _read_sqlalchemy(url: str, setting: str) -> ReadUrl:
    from sqlalchemy import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        raise _encode_hint(setting) from None
    sqlite = parsed.get_backend_name() == "sqlite"
    # SQLAlchemy ends the password at the first @: a raw @ in it leaves an @ in the host
    # (psycopg2 then says "could not translate host name" with the rest of the password).
    if "@" in (parsed.host or "") or (not sqlite and "@" in (parsed.database or "")):
        raise _encode_hint(setting)
    query, query_secrets = _masked_query([(name, value) for name, values in parsed.query.items()
                                          for value in ((values,) if isinstance(values, str) else values)])
    shown = parsed.set(query={}).render_as_string(hide_password=True)
    if query:
        shown += "?" + "&".join(f"{quote(n, safe='')}={v if v == MASK else quote(v, safe='/')}"
                                for n, v in query)
    return ReadUrl(shown, _with_forms([parsed.password, *_written_secrets(url), *query_secrets]))


def _read_standard(url: str, setting: str) -> ReadUrl:
    if url.startswith(("file://", "maildir://", "mbox://")):  # a path: no host, no secret
        return ReadUrl(url, ())
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise _encode_hint(setting) from None
    # urlsplit ends the host part at the first / ? or #: a password holding one leaves an @
    # (or a fragment) behind it, and the user:pass before it reads as host:port.
    after = url.partition("://")[2][len(parts.netloc):]
    if "#" in url or "@" in after or not parts.hostname:
        raise _encode_hint(setting)
    host = parts.hostname + (f":{port}" if port else "")
    auth = ""
    if parts.username is not None or parts.password is not None:
        auth = (parts.username or "") + (f":{MASK}" if parts.password is not None else "") + "@"
    pairs = [tuple(pair.partition("=")[::2]) for pair in parts.query.split("&") if pair]
    query, query_secrets = _masked_query([(unquote(n), unquote(v)) for n, v in pairs])
    shown = urlunsplit((parts.scheme, auth + host, parts.path,
                        "&".join(f"{n}={v}" for n, v in query), ""))
    return ReadUrl(shown, _with_forms([parts.password, *_written_secrets(url), *query_secrets]))


def mask_url(url: str, setting: str) -> str:
    """The URL of `setting` for display: every secret masked, as its parser reads it. A URL
    that does not read as meant is shown by its scheme alone. Never raises."""
    try:
        return read_url(url, setting).shown
    except ConfigError:
        scheme = url.partition("://")[0]
        shown = scheme if re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]{0,30}", scheme) else "?"
        return f"{shown}://… (not shown: it does not read as a URL; percent-encode its password)"


def url_secrets(url: str, setting: str) -> tuple[str, ...]:
    """Every form of the secrets in the URL of `setting` (to scrub them from any text),
    including what a wrong reading would take for one. Never raises."""
    try:
        found = read_url(url, setting).secrets
    except ConfigError:
        found = ()
    return tuple(dict.fromkeys([*found, *_with_forms(_written_secrets(url))]))


def secrets_of(values: Mapping[str, str | None]) -> list[str]:
    """Every secret in the settings' values given by variable (an environment, or what a
    run's settings hold): a secret setting's value, and for a URL setting every form of its
    passwords as its parser reads them (url_secrets). Never raises."""
    found: list[str] = []
    for row in SETTINGS:
        value = values.get(row.variable or "")
        if row.secret and row.variable and value:
            found += url_secrets(value, row.variable) if row.url else [value]
    return found


# The schemes of dueflow's URL settings (postgresql://, smtps://, …): never a secret's place.
_SCHEME = re.compile(r"(?<![A-Za-z0-9+.-])(?:postgresql(?:\+psycopg2)?|sqlite|smtps?|smtp\+starttls|imaps?"
                     r"|maildir|mbox|file|https?)://")


def scrub(text: str, secrets: tuple[str, ...] | list[str]) -> str:
    """`text` with every secret of three characters or more replaced by MASK — everywhere but
    in a URL's scheme: a password that is a word of one (`postgres`) is masked in the user
    and the rest, and the scheme still says what the URL is (`postgresql://***:***@…`)."""
    kept = sorted({s for s in secrets if len(s) >= 3}, key=len, reverse=True)
    pieces = _SCHEME.split(text)
    schemes = _SCHEME.findall(text)
    for n, piece in enumerate(pieces):
        for secret in kept:
            piece = piece.replace(secret, MASK)
        pieces[n] = piece
    return "".join(p + (schemes[n] if n < len(schemes) else "") for n, p in enumerate(pieces))
