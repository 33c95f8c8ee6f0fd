"""What an interrupted run left behind: its agent session, and the usage that
session's own file records.

A dispatcher that dies mid-run (``kill -9``, a power cut) records nothing of it:
crash recovery (``dispatch.recovery``) finds the run open, ends its agent's process
group and settles it as ``interrupted``. Before it does, ``Salvager`` reads what
the run left on disk:

- its transcript (``logs/runs/<task>-<attempt>.jsonl``, written unbuffered as the
  run went): the executor, the account and the wall-clock moment the CLI started
  (the last ``vigil.prompt`` record: a run whose resume was refused has two), and
  the session the CLI announced after it (Claude Code's ``init`` line's
  ``session_id``, Codex's ``thread.started``);
- the CLI's own file of that session, looked up in the run's account's folder
  (``claude_session``, ``codex_rollout``): the tokens of each model call from the
  CLI's start on (a resumed session's file holds its earlier runs too).

The run is recorded with those tokens, their cost at the price table (the CLI's
own running total died with its stream: both ``cost_usd`` and ``api_cost_usd``
are tokens × prices, 0 for an unpriced model), the model, the account and the
session id, so that the next attempt resumes that session
(``dispatch.resumption``, as after any run that ended early). Only when the
session file exists: without it the CLI could not resume the session, and the
next attempt starts afresh with the earlier attempts in its prompt. Nothing here
raises: what cannot be read leaves the run recorded as it was (no tokens).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dispatch.accounts import account_env
from dispatch.agents.pricing import TokenUsage, api_cost_usd
from dispatch.agents.registry import AGENT_CLIS
from dispatch.attempt import transcript_path
from dispatch.environment import base_env
from vigil.config import Settings
from vigil.models import Outcome, Run

log = logging.getLogger("vigil.dispatch")


@dataclass(frozen=True, slots=True)
class Left:
    """What a run's transcript says of its agent CLI: ``session`` None when the CLI
    named none before the transcript ends; ``started_ms`` (wall clock, epoch ms)
    None in a transcript older than the record."""

    executor: str
    account: str | None
    started_ms: int | None
    session: str | None


def read_transcript(path: Path) -> Left | None:
    """What the transcript at ``path`` says of the run's last CLI start; None for a
    run that started no agent CLI (or wrote no transcript). Raises ``OSError``."""
    found: Left | None = None
    with path.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            record = _json(line)
            kind = record.get("type")
            if kind == "vigil.prompt" and record.get("executor") in AGENT_CLIS:
                started = record.get("started_ms")
                account = record.get("account")
                found = Left(
                    str(record["executor"]),
                    account if isinstance(account, str) else None,
                    started if isinstance(started, int) else None,
                    None,
                )
            elif found is not None and found.session is None:
                session = AGENT_CLIS[found.executor].session_named(record)
                if session is not None:
                    found = replace(found, session=session)
    return found


def _json(line: str) -> dict[str, Any]:
    if not line.startswith("{"):
        return {}
    try:
        value = json.loads(line)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


class Salvager:
    """Reads what interrupted runs of one home left (see the module docstring).
    The agent CLIs' environments, per account, are worked out once from this
    process's environment, as the dispatcher's are."""

    def __init__(self, settings: Settings, source: Mapping[str, str] | None = None) -> None:
        self._settings = settings
        origin = os.environ if source is None else source
        self._envs: dict[tuple[str, str | None], dict[str, str]] = {}
        for executor, cli in settings.agent_clis.items():
            env = base_env(settings, source=origin, executor=executor)
            self._envs[(executor, None)] = env
            for account in cli.accounts:
                self._envs[(executor, account.name)] = account_env(env, executor, account, origin)

    async def __call__(self, run: Run, outcome: Outcome) -> Outcome:
        """``outcome`` (the interrupted run's) with what ``run`` left: its
        transcript, and its session's id, tokens and cost where the session file
        is found."""
        try:
            return await asyncio.to_thread(self._salvage, run, outcome)
        except (OSError, ValueError) as err:  # a file half written or unreadable: recorded as it was
            log.warning("run %d: could not read what it left: %s", run.id, err)
            return outcome

    def _salvage(self, run: Run, outcome: Outcome) -> Outcome:
        path = transcript_path(self._settings, run.task_id, run.attempt)
        if not path.is_file():
            return outcome
        outcome = replace(outcome, transcript_path=str(path))
        left = read_transcript(path)
        if left is None:
            return outcome
        outcome = replace(outcome, account=left.account)
        if left.session is None:
            return outcome
        since = left.started_ms if left.started_ms is not None else run.started_at
        by_model = self._session_usage(left, since)
        if by_model is None:
            log.info("run %d: no file of its session %s: the next attempt starts afresh", run.id, left.session)
            return outcome
        total = sum(by_model.values(), TokenUsage())
        cost = sum(api_cost_usd(self._settings.prices, model, tokens) for model, tokens in by_model.items())
        busiest = max(by_model, key=lambda m: _count(by_model[m]), default=None)
        log.info("run %d: its session %s left %d tokens ($%.4f)", run.id, left.session, _count(total), cost)
        return replace(
            outcome,
            session_id=left.session,
            tokens_in=total.input,
            tokens_out=total.output,
            cache_read_tokens=total.cache_read,
            cache_write_tokens=total.cache_write,
            cost_usd=cost,
            api_cost_usd=cost,
            model=busiest if busiest != "unknown" else None,
        )

    def _session_usage(self, left: Left, since_ms: int) -> dict[str, TokenUsage] | None:
        """The tokens by model its session's file records from ``since_ms`` on, the
        file looked up in the run's account's folder, else in any folder the CLI may
        have used (an account the transcript does not name); None: no file found."""
        assert left.session is not None
        cli = AGENT_CLIS[left.executor]
        first = self._envs.get((left.executor, left.account))
        envs = [first] if first is not None else []
        envs += [env for (executor, _), env in self._envs.items() if executor == left.executor]
        for env in envs:
            found = cli.session_left(env, left.session, since_ms)
            if found is not None:
                return found
        return None


def _count(usage: TokenUsage) -> int:
    return usage.input + usage.output + usage.cache_read + usage.cache_write
