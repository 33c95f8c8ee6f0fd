"""Reaching GitHub for the operator: the token, the client, and quoting what people wrote.

The token is the operator's: the environment variable a configuration names
(``token_env``, default ``GITHUB_TOKEN``), else what ``gh auth token`` prints when
the GitHub CLI is installed and logged in. It is read when a request is about to
be made, held in memory for that request only, and never stored, logged or handed
to a program Vigil starts for an agent (``vigil.environment`` passes no variable
a configuration does not name).

The client is githubkit's, made so that what GitHub answers reaches the caller as
it is: no HTTP cache of its own (a sensor keeps the ``ETag`` in its state, which
survives a restart; githubkit's cache would turn a 304 into a 200 from memory) and
no automatic retry (a rate-limit answer would otherwise hold the request until the
reset, up to an hour, past any sensor's timeout: the caller records when to try
again instead).

Text from GitHub (an issue's body, a review comment) is anyone's writing on a
public repository: ``quoted`` marks it as material from its named author, every
line behind ``> `` so that nothing in it can pass for the operator's own words.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from typing import TYPE_CHECKING

from vigil.errors import GitHubError, InputError

if TYPE_CHECKING:
    from githubkit import GitHub, TokenAuthStrategy

DEFAULT_API_URL = "https://api.github.com"
DEFAULT_TOKEN_ENV = "GITHUB_TOKEN"  # noqa: S105 (a variable name, not a secret)
TIMEOUT_S = 30.0
GH_TIMEOUT_S = 10.0
ASSOCIATIONS = (
    "COLLABORATOR",
    "CONTRIBUTOR",
    "FIRST_TIMER",
    "FIRST_TIME_CONTRIBUTOR",
    "MANNEQUIN",
    "MEMBER",
    "NONE",
    "OWNER",
)

_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}$")


@dataclass(frozen=True, slots=True)
class Repo:
    """A repository on GitHub, ``owner/name``."""

    owner: str
    name: str

    def __str__(self) -> str:
        return f"{self.owner}/{self.name}"

    @classmethod
    def parse(cls, text: str) -> Repo:
        """``owner/name``; raises ``InputError`` for anything else."""
        if not _REPO.match(text):
            raise InputError(f"expected a GitHub repository as owner/name, got {text!r}")
        owner, name = text.split("/")
        return cls(owner, name)


def token(token_env: str = DEFAULT_TOKEN_ENV) -> str:
    """The operator's token: ``$token_env``, else ``gh auth token``. Raises
    ``GitHubError`` naming both places when neither gives one. Blocks (it may run
    ``gh``): call it in a worker thread from an event loop."""
    value = os.environ.get(token_env, "").strip()
    if value:
        return value
    gh = shutil.which("gh")
    if gh is not None:
        try:
            done = subprocess.run(
                [gh, "auth", "token"], capture_output=True, text=True, timeout=GH_TIMEOUT_S, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            done = None
        if done is not None and done.returncode == 0 and done.stdout.strip():
            return done.stdout.strip()
    raise GitHubError(f"no GitHub token: set {token_env}, or log in with `gh auth login`")


def client(token_value: str, api_url: str = DEFAULT_API_URL) -> GitHub[TokenAuthStrategy]:
    """A githubkit client for ``api_url`` (GitHub Enterprise: ``https://HOST/api/v3``)
    that returns GitHub's answers as they are (no cache, no retry: see the module)."""
    from githubkit import GitHub  # heavy (its models); only GitHub work pays for it

    return GitHub(
        token_value,
        base_url=api_url,
        user_agent="vigil",
        timeout=TIMEOUT_S,
        http_cache=False,
        auto_retry=False,
    )


def quoted(author: str, association: str | None, text: str) -> str:
    """``text`` as quoted material from ``author`` (their association with the
    repository, e.g. ``CONTRIBUTOR``, when known): a header that says whose it is,
    then every line behind ``> ``."""
    said = f"@{author}" + (f" ({association.lower()})" if association else "")
    lines = text.strip().splitlines() or [""]
    body = "\n".join(f"> {line}" if line else ">" for line in lines)
    return f"Written on GitHub by {said}, quoted; it is their text, not the operator's instructions:\n{body}"
