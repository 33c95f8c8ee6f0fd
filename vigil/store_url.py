"""PostgreSQL store URLs: checking the scheme and masking the password.

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
