"""``vigil doctor --probe``: one minimal live request per account through the real
agent CLI, reporting login, reachability and the account's limit state.

``vigil doctor`` alone makes no call to a model: it cannot tell a dead base URL or
a revoked key from a working one. ``--probe`` (opt-in: it costs a request) runs
the CLI once per account of the configured executor and of its fallbacks, as the
loop would (the account's environment, ``[executors.*] command`` and
``extra_args``, the configured model), with the prompt ``PROMPT`` in an empty
temporary folder and nothing else it does not need (each CLI's ``probe`` module
says how: ``dispatch.agents.claude.probe``, ``dispatch.agents.codex.probe``).

What each probe says (one line per account, ``probe`` in the report):

====================================================  ======  ===================
the CLI …                                             level   says
====================================================  ======  ===================
answers                                               ok      tokens, cost, and the
                                                              limit state the CLI
                                                              reported (Claude
                                                              Code's rate-limit
                                                              event: status, window,
                                                              reset, utilisation)
is limited (429, a usage limit, ``rejected``)          warn    until when, if said
meets an overloaded API (5xx, 529)                     warn    reachable but busy
is refused (401, 403, not logged in)                  FAIL    the key or login
cannot reach the API (no connection, no answer        FAIL    unreachable
  within ``TIMEOUT_S``)
fails otherwise (cannot start, refuses its options,   FAIL    the outcome and the
  another HTTP error)                                          CLI's error
====================================================  ======  ===================

A CLI that would retry a failed request by itself (Claude Code retries a refused
key or a dead URL for minutes) is stopped at its first retry: one request is the
probe. Which accounts are probed, and what it costs, is
``dispatch.agents.doctor``'s (``probe_findings``, ``cost_note``).
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dispatch.executors.child import ChildResult, LineHandler, run_child
from vigil.clock import iso_utc
from vigil.doctor import Finding
from vigil.models import OutcomeKind

PROMPT = "Reply with the single word OK."
TIMEOUT_S = 90.0
GRACE_S = 3.0

_REFUSED = re.compile(
    r"\b40[13]\b|unauthori[sz]ed|forbidden|invalid api key|authentication|not logged in|/login|api key",
    re.IGNORECASE,
)
_LIMITED = re.compile(r"\b429\b|usage limit|rate.?limit|hit your (?:\w+ )?limit|quota|too many requests", re.IGNORECASE)
_BUSY = re.compile(r"\b5\d\d\b|overloaded|high demand|internal server error", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Target:
    """One account to probe: ``executor``'s ``account`` with the environment that selects it."""

    executor: str
    account: str
    env: Mapping[str, str]

    @property
    def name(self) -> str:
        return f"{self.executor}:{self.account}"


@dataclass
class Seen:
    """What the probe's stream said beyond the executor's parser: the first retry
    the CLI began (the probe stops there) and its last limit state, for people
    (Claude Code's rate-limit event; None: none)."""

    retry: str | None = None
    limit: str | None = None


async def asked(
    argv: list[str], env: Mapping[str, str], feed: LineHandler, watch: Callable[[dict[str, Any]], None], seen: Seen
) -> ChildResult | Finding:
    """Run the probe: each line of its stream goes to ``feed`` (the executor's
    parser), then to ``watch`` if it is a JSON object (which notes a retry in
    ``seen`` and stops the run there). A finding when no answer came: the CLI did
    not start, the time ran out, or it retried the first request."""

    def line(raw: bytes) -> None:
        feed(raw)
        try:
            event = json.loads(raw)
        except ValueError:
            return
        if isinstance(event, dict):
            watch(event)

    async def started(pid: int, pgid: int, proc_start: str | None) -> None:
        return None

    with tempfile.TemporaryDirectory(prefix="vigil-probe-") as folder:
        result = await run_child(
            argv,
            env=env,
            cwd=Path(folder),
            stdin=PROMPT.encode(),
            timeout_s=TIMEOUT_S,
            grace_s=GRACE_S,
            on_start=started,
            on_line=line,
        )
    if result.spawn_error is not None:
        return Finding("fail", "probe", f"the CLI does not start: {result.spawn_error}")
    if result.timed_out:
        return Finding("fail", "probe", f"unreachable: no answer within {TIMEOUT_S:g}s")
    if seen.retry is None:
        return result
    found = retried(f"the first request failed ({seen.retry})")
    return replace(found, detail=f"{found.detail}; {seen.limit}") if seen.limit else found


def retried(message: str) -> Finding:
    """The verdict on the first request, from the CLI's first retry of it."""
    if _REFUSED.search(message):
        return Finding("fail", "probe", f"refused: {message}: check the account's key or login")
    if _LIMITED.search(message):
        return Finding("warn", "probe", f"limited: {message}")
    if _BUSY.search(message):
        return Finding("warn", "probe", f"reachable, but the API is busy: {message}")
    return Finding("fail", "probe", f"unreachable: {message}: check the CLI's base URL and the network")


def verdict(kind: OutcomeKind, error: str | None, retry_at: int | None, answered: str, limit: str = "") -> Finding:
    """The probe's line from the executor's own verdict on the run; ``limit`` is
    the limit state the CLI reported (empty: none)."""
    if kind is OutcomeKind.SUCCESS:
        return Finding("ok", "probe", answered)
    if kind is OutcomeKind.USAGE_LIMITED:
        until = f" until {iso_utc(retry_at)}" if retry_at is not None else ""
        return Finding("warn", "probe", f"limited{until}: {error}" + (f"; {limit}" if limit else ""))
    if kind is OutcomeKind.AUTH:
        return Finding("fail", "probe", f"refused: {error}: check the account's key or login")
    if kind is OutcomeKind.TRANSIENT:  # the API's trouble or the way to it
        return retried(error or str(kind))
    return Finding("fail", "probe", f"{kind}: {error}")  # the CLI refused to start, the API the request …
