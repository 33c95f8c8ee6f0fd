"""What the agent can reach beyond its workspace, and how its runs are priced: the
facts ``vigil doctor`` reports and ``vigil run`` logs at start-up.

By default the agent writes only its workspace (``dispatch.workspace``), through
Claude Code's permission mode and OS sandbox or Codex's ``workspace-write``
sandbox, and reaches Vigil only through its MCP tools. An operator may widen that
on purpose; each setting that does is named here with what the agent can then
reach:

* ``[executors.claude] permission_mode = "bypassPermissions"``: edits anywhere;
* ``[executors.claude] bash_sandbox = false``, or a sandbox that cannot run: Bash
  goes by ``allowed_tools`` alone, unconfined if they allow it;
* ``[executors.codex] sandbox = "danger-full-access"``: commands anywhere;
* a workspace (``[dispatch] workdir``) or ``add_dirs`` folder that contains the
  home: ``vigil.toml``, the identity file, the skills and the database;
* ``[dispatch] repo``: the agent reads that repository (its clone borrows the
  objects) but writes only its own clone (docs/coding.md);
* ``[dispatch] check_sandbox = false`` (or no bubblewrap): a task's checks, which run
  code the agent wrote, run unconfined.

Each sandbox that is on is also started for real (``dispatch.sandbox_probe``): one
that does not start fails ``vigil doctor``.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

from dispatch.claude_sandbox import sandbox_problem
from dispatch.codex_readiness import Run
from dispatch.executors.codex import configured_model
from dispatch.pricing import SHIPPED_PRICES, model_price, priced
from dispatch.sandbox_probe import USERNS_FIX, checks_sandbox_finding, claude_sandbox_problem, codex_sandbox_problem
from dispatch.skills import load_skills
from dispatch.workspace import contains
from vigil.config import Settings
from vigil.doctor import Finding
from vigil.errors import InputError

UNCONFINED_BASH = ("Bash", "Bash(*)", "Bash(*:*)")


def widenings(settings: Settings, env: Mapping[str, str]) -> list[str]:
    """Each setting that lets the agent reach beyond its workspace, with what it
    then reaches (one line each); empty for the defaults. ``env`` is the agent's
    environment (whether Claude Code's sandbox can run depends on its PATH)."""
    home = settings.home
    found = []
    executor = settings.dispatch.executor
    workdir = settings.dispatch.workdir
    if executor in ("claude", "codex") and workdir is not None and contains(workdir, home):
        found.append(f"[dispatch] workdir {workdir} contains the home: the agent can write vigil.toml and the database")
    if executor == "claude":
        cli = settings.claude
        if cli.permission_mode == "bypassPermissions":
            found.append("Claude Code runs with bypassPermissions: the agent can edit any file, the home's included")
        unsandboxed = not cli.bash_sandbox or sandbox_problem(env) is not None
        if unsandboxed and any(rule in UNCONFINED_BASH for rule in cli.allowed_tools):
            found.append("Bash is allowed without Claude Code's sandbox: its commands can write the home")
        found += _outside_dirs("executors.claude", cli.add_dirs, home)
    if executor == "codex":
        cli = settings.codex
        if cli.sandbox == "danger-full-access":
            found.append("Codex runs with danger-full-access: the agent's commands can write anywhere, the home too")
        found += _outside_dirs("executors.codex", cli.add_dirs, home)
    if executor in AGENT_CLIS and not settings.dispatch.check_sandbox:
        found.append("[dispatch] check_sandbox is off: a task's checks run the agent's code, able to write the home")
    repo = settings.dispatch.code.repo
    if executor in AGENT_CLIS and repo is not None:
        found.append(f"[dispatch] repo {repo}: the agent {GIT_REACH}")
    return found


# What an agent CLI reaches of a task's repository (docs/coding.md), either CLI
GIT_REACH = (
    "can read it (its files and history: its clone borrows the objects) and writes only a clone of its own; "
    "its result is reviewed as a stored change"
)
AGENT_CLIS = ("claude", "codex")


def _outside_dirs(section: str, folders: tuple[str, ...], home: Path) -> list[str]:
    return [
        f"[{section}] add_dirs {folder!r} contains the home: the agent can write vigil.toml and the database"
        for folder in folders
        if contains((home / Path(folder).expanduser()).resolve(), home)
    ]


async def reach_findings(settings: Settings, env: Mapping[str, str], run: Run) -> list[Finding]:
    """``vigil doctor``'s findings on the agent's workspace, its sandbox and the
    settings that widen them. ``run`` runs each sandbox's probe
    (``dispatch.sandbox_probe``) in the agent's workspace, as a task would."""
    keep_days = settings.dispatch.keep_workspace_ms / 86_400_000
    workdir = settings.dispatch.workdir
    where = (
        f"tasks work in {workdir} unless they or their skill name another folder"
        if workdir is not None
        else f"each task works in a folder of its own under {settings.home / 'work'}, "
        f"kept {keep_days:g} d after it ends"
    )
    found = [Finding("ok", "workspace", where)]
    # where a task works; a workdir that does not exist is its own FAIL line (readiness)
    cwd = workdir if workdir is not None and workdir.is_dir() else settings.home
    if settings.dispatch.executor == "claude":
        found.append(await _claude_sandbox(settings, env, cwd, run))
    elif settings.dispatch.executor == "codex":
        failed = await codex_sandbox_problem(settings, env, cwd, run)
        sandbox = settings.codex.sandbox
        if failed is not None:
            found.append(failed)
        elif sandbox == "read-only":
            found.append(Finding("warn", "sandbox", "codex: read-only: the agent cannot change files in its workspace"))
        elif sandbox == "workspace-write":
            found.append(Finding("ok", "sandbox", "codex: workspace-write: the agent writes only in its workspace"))
    if settings.dispatch.executor in AGENT_CLIS and settings.dispatch.check_sandbox:
        found.append(await checks_sandbox_finding(settings, env, cwd, run))
    found += [Finding("warn", "reach", line) for line in widenings(settings, env)]
    return found


async def _claude_sandbox(settings: Settings, env: Mapping[str, str], cwd: Path, run: Run) -> Finding:
    cli = settings.claude
    if not cli.bash_sandbox:
        return Finding(
            "warn",
            "sandbox",
            "claude: bash_sandbox is off: Bash runs only what [executors.claude] allowed_tools allows, unconfined",
        )
    missing = sandbox_problem(env)
    if missing is not None:
        return Finding(
            "warn",
            "sandbox",
            f"claude: the OS sandbox for Bash cannot run ({missing}); until it can, Bash runs only what "
            "[executors.claude] allowed_tools allows, so the agent cannot run a project's tests",
        )
    bwrap = shutil.which("bwrap", path=env.get("PATH"))
    failed = None if bwrap is None else await claude_sandbox_problem(bwrap, env, cwd, run)
    if failed is not None:
        # bwrap and socat are there, so the sandbox is on: every Bash command would fail
        return Finding(
            "fail",
            "sandbox",
            f"claude: the OS sandbox for Bash does not start, so every Bash command would fail ({failed}): "
            f"{USERNS_FIX}, or set [executors.claude] bash_sandbox = false",
        )
    return Finding("ok", "sandbox", "claude: Bash runs in Claude Code's OS sandbox, writing only in the workspace")


def price_findings(settings: Settings, env: Mapping[str, str], recent: Iterable[str] = ()) -> list[Finding]:
    """How the configured executor's runs are priced, then each model in use that
    has no price of its own (``models_in_use``: configured, named by a skill, or
    seen in ``recent`` runs): one warning each, saying what prices it instead (its
    family's price, Claude Code's own figure) or that a cap on it is refused. A
    model that cannot be priced under a daily budget is a failure: every task the
    budget holds would be refused."""
    found = _executor_prices(settings, env)
    named = {m for m in (settings.codex.model or configured_model(env),) if settings.dispatch.executor == "codex"}
    for model, where in models_in_use(settings, env, recent).items():
        if model in named or model_price(settings.prices, model) is not None:
            continue  # the executor's own line above speaks of it
        family = priced(settings.prices, model)
        fix = f"add [prices.{model!r}] (USD per million tokens)"
        if family is not None:
            said = f"model {model!r} ({where}) has no price of its own: its tokens are priced at {family.by}; {fix}"
        else:
            said = (
                f"model {model!r} ({where}) has no price: its tokens count $0, and a cap on its runs is held only "
                f"by Claude Code's own total_cost_usd (refused under Codex); {fix}"
            )
        found.append(Finding("warn", "prices", said))
    return found


def models_in_use(settings: Settings, env: Mapping[str, str], recent: Iterable[str] = ()) -> dict[str, str]:
    """Every model Vigil's runs may use, with where it is named: ``[executors.*]
    model``, Codex's own ``config.toml``, a skill's ``model``, or ``recent`` runs
    (``vigil doctor`` reads the last week's)."""
    found: dict[str, str] = {}
    for name, model in (("claude", settings.claude.model), ("codex", settings.codex.model)):
        if model:
            found.setdefault(model, f"[executors.{name}] model")
    if settings.dispatch.executor == "codex" and settings.codex.model is None:
        model = configured_model(env)
        if model:
            found.setdefault(model, "Codex's config.toml")
    names = sorted(p.parent.name for p in settings.skills_dir.glob("*/SKILL.md"))
    for name in names:
        try:
            (skill,) = load_skills(settings.skills_dir, [name])
        except InputError:
            continue  # the skill's own problem, reported when a task uses it
        if skill.model:
            found.setdefault(skill.model, f"skill {name}")
    for model in recent:
        found.setdefault(model, "seen in recent runs")
    return found


def _executor_prices(settings: Settings, env: Mapping[str, str]) -> list[Finding]:
    """How the configured executor's runs are priced, and a warning (a failure
    under a daily budget, whose tasks would be refused) when Codex's model has no
    price."""
    executor = settings.dispatch.executor
    if executor == "claude":
        # the budget counts the CLI's own figure; the table only gives api_cost_usd
        return [Finding("ok", "prices", "claude: each run is priced by Claude Code's own total_cost_usd")]
    if executor == "codex":
        model = settings.codex.model or configured_model(env)
        if model is None:
            budget = settings.budget.daily_usd is not None
            return [
                Finding(
                    "fail" if budget else "warn",
                    "prices",
                    "codex: no model is named ([executors.codex] model, or model in Codex's config.toml): "
                    "its runs cannot be priced and count as $0; a cap on them is refused"
                    + ("; under the daily budget every task is refused" if budget else ""),
                )
            ]
    else:
        return []
    found = priced(settings.prices, model)
    if found is None:
        budget = settings.budget.daily_usd is not None
        return [
            Finding(
                "fail" if budget else "warn",
                "prices",
                f"{executor}: model {model!r} has no price: add [prices.{model!r}] (USD per million tokens), "
                "else its runs count as $0 and a cap on them is refused"
                + ("; under the daily budget every task is refused" if budget else ""),
            )
        ]
    price, by_family = found.price, found.by.endswith("family's price")
    # an entry also prices the longer names it is a prefix of (gpt-5 prices gpt-5-codex)
    longer = "" if by_family or model in SHIPPED_PRICES or found.by == "[prices]" else " (a longer name of an entry)"
    return [
        Finding(
            "warn" if by_family else "ok",  # a guess from a newer model's family: say so
            "prices",
            f"{executor}: {model} at ${price.input:g} in / ${price.output:g} out per million tokens, "
            f"from {found.by}{longer}",
        )
    ]
