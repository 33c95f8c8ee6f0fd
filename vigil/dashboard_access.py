"""The served dashboard's token, and links into the dashboard for one task.

``vigil tui --serve`` lets nobody in without the token: a random string
(``secrets.token_urlsafe``, 256 bits) made on first use and kept in the home's
``data/serve.token``, mode 0600 (a file readable by others is refused, not used).
It is compared in constant time (``hmac.compare_digest``). Rotating writes a new
file atomically (a temporary file, then ``os.replace``): a server that is running
reads the file at every request, so an old link or cookie stops working at once.

``task_link`` is what notifications carry when ``[serve] public_url`` is set:
``<public_url>/?task=ID`` opens the dashboard on that task; the token is added only
when ``[serve] link_token`` opts in.
"""

from __future__ import annotations

import contextlib
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


def read_token(home: Path) -> str | None:
    """The token, or None when none was made yet. Raises ``HomeError`` when the
    file can be read by anyone but its owner, or cannot be read."""
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
        token = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as err:
        raise HomeError(f"cannot read the dashboard's token {path}: {err}") from None
    return token or None


def ensure_token(home: Path) -> str:
    """The token, made (0600) when there is none yet."""
    return read_token(home) or rotate_token(home)


def rotate_token(home: Path) -> str:
    """A new token, replacing the old one atomically; returns it."""
    path = token_path(home)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    token = secrets.token_urlsafe(TOKEN_BYTES)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as file:
            file.write(token + "\n")
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        raise
    return token


def token_matches(expected: str | None, presented: str | None) -> bool:
    """Whether ``presented`` is the token, compared in constant time; never when
    either is missing."""
    if not expected or not presented:
        return False
    return hmac.compare_digest(expected.encode(), presented.encode())


def dashboard_url(base: str, *, task_id: int | None = None, token: str | None = None) -> str:
    """``base`` (no trailing slash) with the query that opens ``task_id`` and, given,
    logs in with ``token``."""
    query: dict[str, str | int] = {}
    if task_id is not None:
        query["task"] = task_id
    if token is not None:
        query["token"] = token
    return f"{base}/" + (f"?{urlencode(query)}" if query else "")


def task_link(serve: ServeSettings, home: Path, task_id: int) -> str | None:
    """The link to ``task_id`` in the served dashboard, for a notification; None
    without ``[serve] public_url``. The token is in it only with ``link_token``
    (and once a token exists)."""
    if serve.public_url is None:
        return None
    token = None
    if serve.link_token:
        try:
            token = read_token(home)
        except HomeError:
            token = None  # a notification still goes out, without the token
    return dashboard_url(serve.public_url, task_id=task_id, token=token)
