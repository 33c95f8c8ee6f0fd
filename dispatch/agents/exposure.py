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

Each sandbox that is on is also started for real (each CLI's ``reach`` module, and
``dispatch.agents.sandbox_probe`` for the checks'): one that does not start fails
``vigil doctor``. What is particular to a CLI comes from its ``AgentCli``.
"""

from __future__ import annotations

from collections.abc import Mapping

from dispatch.agents.cli import Run
from dispatch.agents.pricing import PRICES_AS_OF, SHIPPED_PRICES, model_price, price_for
from dispatch.agents.registry import AGENT_CLIS
from dispatch.agents.sandbox_probe import checks_sandbox_finding
from dispatch.workspace import contains
from vigil.config import Settings
from vigil.doctor import Finding


def widenings(settings: Settings, env: Mapping[str, str]) -> list[str]:
    """Each setting that lets the agent reach beyond its workspace, with what it
    then reaches (one line each); empty for the defaults. ``env`` is the agent's
    environment (whether Claude Code's sandbox can run depends on its PATH)."""
    cli = AGENT_CLIS.get(settings.dispatch.executor)
    if cli is None:
        return []
    home = settings.home
    found = []
    workdir = settings.dispatch.workdir
    if workdir is not None and contains(workdir, home):
        found.append(f"[dispatch] workdir {workdir} contains the home: the agent can write vigil.toml and the database")
    found += cli.widenings(settings, env)
    if not settings.dispatch.check_sandbox:
        found.append("[dispatch] check_sandbox is off: a task's checks run the agent's code, able to write the home")
    repo = settings.dispatch.code.repo
    if repo is not None:
        found.append(f"[dispatch] repo {repo}: the agent {GIT_REACH}")
    return found


# What an agent CLI reaches of a task's repository (docs/coding.md), either CLI
GIT_REACH = (
    "can read it (its files and history: its clone borrows the objects) and writes only a clone of its own; "
    "its result is reviewed as a stored change"
)


async def reach_findings(settings: Settings, env: Mapping[str, str], run: Run) -> list[Finding]:
    """``vigil doctor``'s findings on the agent's workspace, its sandbox and the
    settings that widen them. ``run`` runs each sandbox's probe in the agent's
    workspace, as a task would."""
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
    cli = AGENT_CLIS.get(settings.dispatch.executor)
    if cli is not None:
        sandbox = await cli.sandbox(settings, env, cwd, run)
        found += [] if sandbox is None else [sandbox]
        if settings.dispatch.check_sandbox:
            found.append(await checks_sandbox_finding(settings, env, cwd, run))
    found += [Finding("warn", "reach", line) for line in widenings(settings, env)]
    return found


def price_findings(settings: Settings, env: Mapping[str, str]) -> list[Finding]:
    """How the configured executor's runs are priced, and a warning when a budget
    is set but the model has no price (its runs would count as $0)."""
    executor = settings.dispatch.executor
    cli = AGENT_CLIS.get(executor)
    if cli is None:
        return []
    model = cli.priced_as(settings, env)
    if isinstance(model, Finding):
        return [model]
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
