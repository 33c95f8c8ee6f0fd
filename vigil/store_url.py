"""PostgreSQL store URLs: checking the scheme, masking the password, and one-line
explanations of why a server could not be reached.

A URL is shown to people (``vigil doctor``, ``vigil status``, errors, the line
``vigil store migrate`` prints) only through ``mask_password``, so a password in
``VIGIL_STORE_URL`` or vigil.toml never reaches a terminal or a log.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

from vigil.errors import ConfigError

SCHEMES = ("postgresql", "postgres")
MASK = "***"


def mask_password(url: str) -> str:
    """``url`` with the password (if any) replaced by ``***``; the rest unchanged.

    Also masks ``password=`` in the query string (libpq accepts it there)."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
    except ValueError:  # a malformed URL (bad port, brackets): show nothing of it
        return f"{url.split(':', 1)[0]}://{MASK}"
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        if ":" in userinfo:
            userinfo = userinfo.split(":", 1)[0] + ":" + MASK
        netloc = f"{userinfo}@{host}"
    query = re.sub(r"(^|&)(password=)[^&]*", rf"\1\2{MASK}", parts.query)
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def check_store_url(url: str, where: str) -> str:
    """``url`` if it is a PostgreSQL URL; else ``ConfigError`` naming ``where`` (the
    key or variable it came from). The error shows the URL masked."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in SCHEMES or not url.strip():
        raise ConfigError(f"{where}: expected a postgresql:// or postgres:// URL, got {mask_password(url)!r}")
    return url


# libpq's connection failures, by what a person can do about them. The driver's
# message spans several lines and names the server once per address it tried.
_CAUSES = (
    (re.compile(r'role "([^"]+)" does not exist'), "the login was refused: role {0!r} does not exist"),
    (re.compile(r'database "([^"]+)" does not exist'), "database {0!r} does not exist; create it first"),
    (
        re.compile(r'password authentication failed for user "([^"]+)"'),
        "the login was refused: wrong password for {0!r}",
    ),
    (re.compile(r"no password supplied|fe_sendauth"), "the login was refused: the server wants a password"),
    (re.compile(r"no pg_hba\.conf entry"), "the login was refused by the server's pg_hba.conf"),
    (re.compile(r"Connection refused"), "the server is not running or not listening there (connection refused)"),
    (re.compile(r"failed to resolve host '([^']+)'"), "unknown host {0!r}"),
    (re.compile(r"timeout expired"), "the server did not answer in time"),
)


def explain_connect_failure(message: str, url: str) -> str:
    """One line saying why ``url`` could not be used, from the driver's message."""
    for pattern, text in _CAUSES:
        found = pattern.search(message)
        if found:
            return f"cannot connect to {mask_password(url)}: {text.format(*found.groups())}"
    first = next((line.strip() for line in message.splitlines() if line.strip()), "unknown error")
    return f"cannot connect to {mask_password(url)}: {first}"
