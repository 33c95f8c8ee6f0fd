"""Which account runs a task, and the environment that selects it.

An agent executor's task runs on its free account that was limited least
recently (never limited first, then in the configured order): a usage limit
stops only the account that met it (``vigil.accounts``). When every account of
the task's executor is limited, the executors of ``[dispatch] fallback`` are tried
in order, unless a skill of the task says ``fallback: false``; when none has a free
account either, the task waits for the earliest reset (``Pick.free_at``).

A limit of one model's week (``seven_day_opus``, ``seven_day_sonnet``) stops its
account only for a task on a model of that family (``vigil.limit_kinds.stops_model``):
the task's model, else its skill's, else the executor's configured one. A task that
names no model runs on the model the CLI picks, which Vigil cannot know: for it the
account counts as limited.

An account is selected by what the CLI reads: its folder (``CLAUDE_CONFIG_DIR``,
``CODEX_HOME``) or its key (the value of the variable ``api_key_env`` names, passed
as ``ANTHROPIC_API_KEY``, or as ``CODEX_API_KEY`` and ``OPENAI_API_KEY`` for Codex).
The other credentials of ``vigil run``'s environment are taken away, so that a key
meant for one account never speaks for another (Claude Code prefers a key in its
environment to the login in its folder).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from vigil.accounts import AccountLimit, account_key, account_names
from vigil.agent_clis import CLI_FACTS
from vigil.config import AGENT_EXECUTORS, Account, Settings
from vigil.limit_kinds import stops_model


@dataclass(frozen=True, slots=True)
class Pick:
    """Where a task runs: ``executor`` on ``account``. ``account`` None with
    ``free_at`` None: the executor has no accounts (``command``, ``dry-run``); with
    ``free_at`` (epoch ms): every account it may use is limited until then."""

    executor: str
    account: str | None
    free_at: int | None = None


def _free(
    settings: Settings, executor: str, limits: Mapping[str, AccountLimit], now_ms: int, model: str | None
) -> str | None:
    """The account of ``executor`` to use now for a task on ``model``: free, least
    recently limited."""
    names = account_names(settings, executor)
    free = [name for name in names if not _limited(limits.get(account_key(executor, name)), now_ms, model)]
    if not free:
        return None

    def last_limited(name: str) -> tuple[int, int]:
        limit = limits.get(account_key(executor, name))
        return (-1 if limit is None else limit.since, names.index(name))

    return min(free, key=last_limited)


def _limited(limit: AccountLimit | None, now_ms: int, model: str | None) -> bool:
    return limit is not None and limit.limited(now_ms) and stops_model(limit.kind, model)


def earliest_reset(
    settings: Settings, executor: str, limits: Mapping[str, AccountLimit], model: str | None = None
) -> int | None:
    """When the first of ``executor``'s accounts may be used again for a task on
    ``model`` (None: one never was limited, or its limit is of another model)."""
    untils = []
    for name in account_names(settings, executor):
        limit = limits.get(account_key(executor, name))
        if limit is None or not stops_model(limit.kind, model):
            return None
        untils.append(limit.until)
    return min(untils)


def pick(
    settings: Settings,
    executor: str,
    limits: Mapping[str, AccountLimit],
    now_ms: int,
    *,
    may_fall_back: bool = True,
    model: str | None = None,
) -> Pick:
    """Where a task of ``executor`` on ``model`` (None: not known) runs now (see the
    module's docstring)."""
    if executor not in AGENT_EXECUTORS:
        return Pick(executor, None)
    tried = [executor]
    if may_fall_back:
        tried += [name for name in settings.dispatch.fallback if name != executor]
    for name in tried:
        account = _free(settings, name, limits, now_ms, model)
        if account is not None:
            return Pick(name, account)
    resets = [earliest_reset(settings, name, limits, model) for name in tried]
    return Pick(executor, None, min(at for at in resets if at is not None))


def soonest(settings: Settings, executor: str, limits: Mapping[str, AccountLimit]) -> str:
    """The account of ``executor`` whose limit ends first: the one to run on when
    a task was claimed although every account is limited (another dispatcher
    claimed it before the loop was gated)."""
    names = account_names(settings, executor)
    far = {name: limits[account_key(executor, name)].until for name in names if account_key(executor, name) in limits}
    return min(names, key=lambda name: far.get(name, 0))


def account_env(base: Mapping[str, str], executor: str, account: Account, origin: Mapping[str, str]) -> dict[str, str]:
    """``base`` (the executor's environment) selecting ``account``: its folder or its
    key (read from ``origin``, ``vigil run``'s environment) in the CLI's own
    variables, every other credential of the CLI taken away."""
    cli = CLI_FACTS[executor]
    env = {name: value for name, value in base.items() if name not in cli.credentials}
    if account.config_dir is not None:
        env[cli.folder_variable] = str(account.config_dir)
    elif account.api_key_env is not None and origin.get(account.api_key_env):
        env.update(dict.fromkeys(cli.key_variables, origin[account.api_key_env]))
    return env
