"""The served dashboard's token, and links into the dashboard for one task.

``vigil tui --serve`` lets nobody in without the token: a random string
(``secrets.token_urlsafe``, 256 bits) made on first use. Only its SHA-256 is kept,
in the home's ``data/serve.token`` (mode 0600; a file that others can read is
refused, not used), because the agent's sandbox can read the home (it cannot
write it) and may reach this machine's loopback (Codex runs with network access):
a token kept whole would let the agent open the dashboard and approve its own
work. So the token is shown once, when it is made (``vigil tui --serve`` or
``--print-url`` prints the link); a lost link is replaced with ``--rotate-token``.
A token presented is hashed and compared in constant time (``hmac.compare_digest``).
Making one writes the file atomically (a temporary file, then ``os.replace``); a
running server reads the file at every request, so an old link or cookie stops
working at once.

``task_link`` is what notifications carry when ``[serve] public_url`` is set:
``<public_url>/?task=ID`` opens the dashboard on that task (the token is never in
it: it is not kept).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path
from urllib.parse import urlencode

from vigil.config import ServeSettings
from vigil.errors import HomeError

TOKEN_FILE = "data/serve.token"  # noqa: S105 (a file name, relative to the home)
TOKEN_BYTES = 32


def token_path(home: Path) -> Path:
    return home / TOKEN_FILE


def digest_of(token: str) -> str:
    """What is kept of ``token``: its SHA-256, in hex."""
    return hashlib.sha256(token.encode()).hexdigest()


def read_digest(home: Path) -> str | None:
    """The kept digest of the token, or None when none was made yet. Raises
    ``HomeError`` when the file can be read by anyone but its owner, or cannot be
    read."""
    path = token_path(home)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise HomeError(
            f"{path} is open to other users (mode {stat.S_IMODE(mode):o}); "
            "make a new token with vigil tui --serve --rotate-token"
        )
    try:
        digest = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as err:
        raise HomeError(f"cannot read the dashboard's token {path}: {err}") from None
    return digest or None


def make_token(home: Path) -> str:
    """A new token, its digest replacing the old one atomically; returns the token
    (the only time it is known)."""
    path = token_path(home)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    token = secrets.token_urlsafe(TOKEN_BYTES)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as file:
            file.write(digest_of(token) + "\n")
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        raise
    return token


def token_matches(digest: str | None, presented: str | None) -> bool:
    """Whether ``presented`` is the token whose digest is kept, compared in constant
    time; never when either is missing."""
    if not digest or not presented:
        return False
    return hmac.compare_digest(digest.encode(), digest_of(presented).encode())


def dashboard_url(base: str, *, task_id: int | None = None, token: str | None = None) -> str:
    """``base`` (no trailing slash) with the query that opens ``task_id`` and, given,
    logs in with ``token``."""
    query: dict[str, str | int] = {}
    if task_id is not None:
        query["task"] = task_id
    if token is not None:
        query["token"] = token
    return f"{base}/" + (f"?{urlencode(query)}" if query else "")


def task_link(serve: ServeSettings, task_id: int) -> str | None:
    """The link to ``task_id`` in the served dashboard, for a notification; None
    without ``[serve] public_url``."""
    if serve.public_url is None:
        return None
    return dashboard_url(serve.public_url, task_id=task_id)
