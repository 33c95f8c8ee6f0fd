"""Keeping secrets out of what Vigil writes down: the log, run transcripts and the
outcomes stored in the database.

A secret is the value of an environment variable that is either named in
``[dispatch] pass_env`` (handed to the agent, so the agent may print it) or whose
name looks like one: ``*_KEY``, ``*_TOKEN``, ``*_SECRET``, or containing
``PASSWORD``; and the password in ``VIGIL_STORE_URL``. Every occurrence of such a
value is replaced by ``[redacted]``.
Values shorter than ``MIN_SECRET_CHARS`` are left alone: replacing ``1`` or ``yes``
everywhere would destroy the log without protecting anything.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from urllib.parse import unquote, urlsplit

from vigil.config import STORE_URL_ENV
from vigil.models import Outcome

MASK = "[redacted]"
MIN_SECRET_CHARS = 6
SECRET_NAME = re.compile(r".*(_KEY|_TOKEN|_SECRET)$|.*PASSWORD.*|.*PASSWD.*", re.IGNORECASE)


def looks_secret(name: str) -> bool:
    """True when an environment variable's name says it holds a secret."""
    return bool(SECRET_NAME.fullmatch(name))


@dataclass(frozen=True)
class Redactor:
    """Replaces known secret values; longest first, so a secret that contains
    another is masked whole. ``secrets`` empty means nothing is replaced."""

    secrets: tuple[str, ...] = ()

    @classmethod
    def from_env(cls, environ: Mapping[str, str], pass_env: Iterable[str] = ()) -> Redactor:
        """The secrets in ``environ``: names in ``pass_env`` and secret-looking names."""
        named = set(pass_env)
        values = {
            value
            for name, value in environ.items()
            if (name in named or looks_secret(name)) and len(value) >= MIN_SECRET_CHARS
        }
        # the agent gets the store URL and the proxies: their passwords, as written
        # and decoded, are secrets
        for name, value in environ.items():
            if name == STORE_URL_ENV or name.upper().endswith("_PROXY"):
                password = _url_password(value)
                values.update(p for p in (password, unquote(password)) if len(p) >= MIN_SECRET_CHARS)
        return cls(tuple(sorted(values, key=len, reverse=True)))

    def text(self, text: str) -> str:
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        return text

    def outcome(self, outcome: Outcome) -> Outcome:
        """``outcome`` with secrets masked in its summary, detail, error and the
        output of its checks (what the store keeps and the CLI and TUI show)."""
        if not self.secrets:
            return outcome
        error = None if outcome.error is None else self.text(outcome.error)
        checks = tuple(replace(check, output=self.text(check.output)) for check in outcome.checks)
        return replace(
            outcome, summary=self.text(outcome.summary), detail=self.text(outcome.detail), error=error, checks=checks
        )

    def data(self, raw: bytes) -> bytes:
        """``raw`` with each secret's UTF-8 bytes masked."""
        for secret in self.secrets:
            encoded = secret.encode("utf-8", errors="surrogateescape")
            if encoded in raw:
                raw = raw.replace(encoded, MASK.encode("ascii"))
        return raw


def _url_password(url: str) -> str:
    """The password of a URL as written in it ('' when none)."""
    try:
        netloc = urlsplit(url).netloc
    except ValueError:
        return ""
    userinfo = netloc.rpartition("@")[0]
    return userinfo.partition(":")[2]


NO_SECRETS = Redactor()


class RedactingFilter(logging.Filter):
    """A handler filter that masks secrets in each record's final message
    (arguments merged in) and in its exception text."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.redactor.secrets:
            return True
        record.msg = self.redactor.text(record.getMessage())
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redactor.text(record.exc_text)
        return True
