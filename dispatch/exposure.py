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
"""

from __future__ import annotations

import asyncio
import contextlib
import platform
from collections.abc import Mapping
from pathlib import Path

from dispatch.checks import check_sandbox
from dispatch.claude_sandbox import sandbox_problem
from dispatch.executors.codex import configured_model
from dispatch.pricing import PRICES_AS_OF, SHIPPED_PRICES, model_price, price_for
from dispatch.workspace import contains
from vigil.config import Settings
from vigil.doctor import Finding

PROBE_TIMEOUT_S = 10.0
# A bubblewrap sandbox like the one Claude Code builds: the whole tree read-only,
# new process and network namespaces.
BWRAP_PROBE = ("bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "--unshare-net")
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


async def reach_findings(settings: Settings, env: Mapping[str, str]) -> list[Finding]:
    """``vigil doctor``'s findings on the agent's workspace, its sandbox and the
    settings that widen them."""
    keep_days = settings.dispatch.keep_workspace_ms / 86_400_000
    workdir = settings.dispatch.workdir
    where = (
        f"tasks work in {workdir} unless they or their skill name another folder"
        if workdir is not None
        else f"each task works in a folder of its own under {settings.home / 'work'}, "
        f"kept {keep_days:g} d after it ends"
    )
    found = [Finding("ok", "workspace", where)]
    if settings.dispatch.executor == "claude":
        found.append(await _claude_sandbox(settings, env))
    elif settings.dispatch.executor == "codex":
        sandbox = settings.codex.sandbox
        if sandbox == "read-only":
            found.append(Finding("warn", "sandbox", "codex: read-only: the agent cannot change files in its workspace"))
        elif sandbox == "workspace-write":
            found.append(Finding("ok", "sandbox", "codex: workspace-write: the agent writes only in its workspace"))
    if settings.dispatch.executor in AGENT_CLIS and settings.dispatch.check_sandbox:
        found.append(_checks_sandbox(env))
    found += [Finding("warn", "reach", line) for line in widenings(settings, env)]
    return found


def _checks_sandbox(env: Mapping[str, str]) -> Finding:
    """Where a task's checks run (docs/coding.md, *Checks*)."""
    if check_sandbox(env, ()) is None:
        return Finding(
            "warn",
            "checks",
            "bwrap not found: a task's checks (code the agent wrote) run unconfined, able to write the home; "
            "install bubblewrap (e.g. apt install bubblewrap)",
        )
    return Finding("ok", "checks", "a task's checks run in bubblewrap, writing only the workspace")


async def _claude_sandbox(settings: Settings, env: Mapping[str, str]) -> Finding:
    cli = settings.claude
    if not cli.bash_sandbox:
        return Finding(
            "warn",
            "sandbox",
            "claude: bash_sandbox is off: Bash runs only what [executors.claude] allowed_tools allows, unconfined",
        )
    problem = sandbox_problem(env) or await _bwrap_problem(env)
    if problem is not None:
        return Finding(
            "warn",
            "sandbox",
            f"claude: the OS sandbox for Bash cannot run ({problem}); until it can, Bash runs only what "
            "[executors.claude] allowed_tools allows, so the agent cannot run a project's tests",
        )
    return Finding("ok", "sandbox", "claude: Bash runs in Claude Code's OS sandbox, writing only in the workspace")


async def _bwrap_problem(env: Mapping[str, str]) -> str | None:
    """Why a bubblewrap sandbox does not start here (user namespaces refused, say);
    None when it does, or on a system without bubblewrap (macOS)."""
    if sandbox_problem(env) is not None or platform.system() != "Linux":
        return None
    try:
        proc = await asyncio.create_subprocess_exec(
            *BWRAP_PROBE,
            "true",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            env=dict(env),
        )
    except OSError as err:
        return f"bwrap does not start: {err.strerror or err}"
    try:
        _, err_text = await asyncio.wait_for(proc.communicate(), PROBE_TIMEOUT_S)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        return "bwrap did not answer"
    if proc.returncode != 0:
        said = err_text.decode("utf-8", errors="replace").strip().splitlines()
        return f"bwrap fails: {said[-1] if said else f'exit code {proc.returncode}'}"
    return None


def price_findings(settings: Settings, env: Mapping[str, str]) -> list[Finding]:
    """How the configured executor's runs are priced, and a warning when a budget
    is set but the model has no price (its runs would count as $0)."""
    executor = settings.dispatch.executor
    if executor == "claude":
        # the budget counts the CLI's own figure; the table only gives api_cost_usd
        return [Finding("ok", "prices", "claude: each run is priced by Claude Code's own total_cost_usd")]
    if executor == "codex":
        model = settings.codex.model or configured_model(env)
        if model is None:
            return [
                Finding(
                    "warn",
                    "prices",
                    "codex: no model is named ([executors.codex] model, or model in Codex's config.toml): "
                    "its runs cannot be priced and count as $0 against the budget",
                )
            ]
    else:
        return []
    price = model_price(settings.prices, model)
    if price is None:
        budget = settings.budget.daily_usd is not None
        return [
            Finding(
                "warn" if budget else "ok",
                "prices",
                f"{executor}: model {model!r} has no price: add [prices.{model!r}] (USD per million tokens), "
                "else its runs count as $0" + (" against the budget" if budget else ""),
            )
        ]
    origin = "[prices]" if price_for(settings.prices, model) is not None else f"the table of {PRICES_AS_OF}"
    shipped = "" if model in SHIPPED_PRICES or origin == "[prices]" else " (by its family)"
    return [
        Finding(
            "ok",
            "prices",
            f"{executor}: {model} at ${price.input:g} in / ${price.output:g} out per million tokens, "
            f"from {origin}{shipped}",
        )
    ]
