"""Whether the configured agent CLI can work from this home, and what it can reach:
the facts ``vigil doctor`` reports (``agent_findings``) and ``vigil run`` logs at
start-up (``widenings``).

First the checks of the real binary (its ``AgentCli``'s ``checks``: e.g.
``dispatch.agents.claude.doctor``), then the agent's workspace, its sandbox, the
settings that widen its reach and how its runs are priced. Each sandbox that is on
is started for real with a trivial command, as a task would start it (each CLI's
probe is in its folder; the checks' is ``true`` through ``dispatch.checks.Sandbox``,
the very command line a check gets): one that does not start fails ``vigil doctor``
with the sandbox's own words and the fix.

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
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path

from dispatch.accounts import account_env
from dispatch.agents.cli import USERNS_FIX, Run, said
from dispatch.agents.pricing import SHIPPED_PRICES, model_price, priced
from dispatch.agents.probe import Target
from dispatch.agents.registry import AGENT_CLIS
from dispatch.checks import check_sandbox
from dispatch.environment import base_env
from dispatch.skills import load_skills
from dispatch.workspace import contains
from vigil.accounts import DEFAULT_ACCOUNT
from vigil.clock import MS_PER_DAY, SystemClock
from vigil.config import Settings
from vigil.doctor import Finding
from vigil.errors import InputError, VigilError
from vigil.models import CostGroup
from vigil.store.opening import open_store

CHECK_TIMEOUT_S = 30.0
RECENT_MS = 7 * MS_PER_DAY  # the runs whose models doctor looks at
NO_MODEL = "(none)"  # the roll-up's key for runs that named no model


async def run_briefly(argv: list[str], env: Mapping[str, str], cwd: Path) -> tuple[int | None, str]:
    """Run ``argv`` for a check of ``vigil doctor``: its exit code (None: it could
    not start, or gave no answer within ``CHECK_TIMEOUT_S``) and stdout+stderr."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=dict(env),
            cwd=cwd,
        )
    except OSError as err:
        return None, err.strerror or str(err)
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), CHECK_TIMEOUT_S)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return None, f"no answer within {CHECK_TIMEOUT_S:g}s"
    return proc.returncode, out.decode("utf-8", errors="replace").strip()


async def agent_findings(settings: Settings) -> list[Finding]:
    """The checks of the configured executor's CLI, then its workspace, sandbox and
    prices; then the same of each fallback (``[dispatch] fallback``), and the CLI's
    login of every further account of each, each run with that account's folder
    or key. None for executors without a CLI here (their command is checked by
    ``vigil doctor`` itself). A fallback or an account that cannot start fails
    here: at run time it would be skipped, its work waiting for a limit's reset."""
    found: list[Finding] = []
    recent = await recent_models(settings)
    for executor in dict.fromkeys((settings.dispatch.executor, *settings.dispatch.fallback)):
        cli = AGENT_CLIS.get(executor)
        if cli is None:
            continue
        as_configured = replace(settings, dispatch=replace(settings.dispatch, executor=executor))
        accounts = settings.agent_clis[executor].accounts
        fallback = "" if executor == settings.dispatch.executor else f"{executor} (fallback): "
        for n, account in enumerate(accounts or (None,)):
            origin = os.environ if account is None else account_env(os.environ, executor, account, os.environ)
            checks = await cli.checks(as_configured, run_briefly, origin)
            if n == 0:
                env = base_env(as_configured, source=origin, executor=executor)
                checks += await reach_findings(as_configured, env, run_briefly) + price_findings(
                    as_configured, env, recent
                )
            else:  # the workspace, sandbox and prices are the executor's: said once
                checks = [c for c in checks if c.what == "login" or c.level == "fail"]
            if account is not None and account.api_key_env and not os.environ.get(account.api_key_env):
                checks = [c for c in checks if c.what != "login"]  # its key is not here: vigil doctor warns
            whose = fallback if account is None else f"{executor}:{account.name}: "
            found += [replace(c, detail=whose + c.detail) if whose else c for c in checks]
    return found


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


async def checks_sandbox_finding(settings: Settings, env: Mapping[str, str], cwd: Path, run: Run) -> Finding:
    """Where a task's checks run (docs/coding.md, *Checks*): in bubblewrap when it
    is installed, with or without network; ``true`` is run through that sandbox to
    show that it starts."""
    network = settings.checks.network
    sandbox = check_sandbox(env, (), network=network)
    if sandbox is None:
        return Finding(
            "warn",
            "checks",
            "bwrap not found: a task's checks (code the agent wrote) run unconfined, able to write the home; "
            "install bubblewrap (e.g. apt install bubblewrap)",
        )
    code, output = await run(sandbox.wrap(("true",), cwd), env, cwd)
    if code != 0:
        words = said(output) or f"exit code {code}"
        return Finding(
            "fail",
            "checks",
            f"a task's checks cannot start in bubblewrap, so every check would fail ({words}): "
            f"{USERNS_FIX}, or set [dispatch] check_sandbox = false",
        )
    reach = (
        "with the host's network ([checks] network = true)"
        if network
        else "without network ([checks] network = true allows it)"
    )
    return Finding("ok", "checks", f"a task's checks run in bubblewrap, writing only the workspace, {reach}")


def price_findings(settings: Settings, env: Mapping[str, str], recent: Iterable[str] = ()) -> list[Finding]:
    """How the configured executor's runs are priced, then each model in use that
    has no price of its own (``models_in_use``: configured, named by a skill, or
    seen in ``recent`` runs): one warning each, saying what prices it instead (its
    family's price, Claude Code's own figure) or that a cap on it is refused. A
    model that cannot be priced under a daily budget is a failure: every task the
    budget holds would be refused."""
    found = _executor_prices(settings, env)
    cli = AGENT_CLIS.get(settings.dispatch.executor)
    own = cli.priced_as(settings, env) if cli is not None else None
    for model, where in models_in_use(settings, env, recent).items():
        if model == own or model_price(settings.prices, model) is not None:
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
    model``, the configured CLI's own configuration (Codex's ``config.toml``), a
    skill's ``model``, or ``recent`` runs (``vigil doctor`` reads the last week's)."""
    found: dict[str, str] = {}
    for name, cli_settings in settings.agent_clis.items():
        if cli_settings.model:
            found.setdefault(cli_settings.model, f"[executors.{name}] model")
    cli = AGENT_CLIS.get(settings.dispatch.executor)
    own = cli.priced_as(settings, env) if cli is not None else None
    if isinstance(own, str):
        found.setdefault(own, f"{settings.dispatch.executor}'s own configuration")
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
    under a daily budget, whose tasks would be refused) when its model has no
    price."""
    executor = settings.dispatch.executor
    cli = AGENT_CLIS.get(executor)
    if cli is None:
        return []
    model = cli.priced_as(settings, env)
    if isinstance(model, Finding):
        return [model]
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


async def recent_models(settings: Settings) -> list[str]:
    """The models the runs of the last ``RECENT_MS`` used, by the store's cost
    roll-up; none when the database is not there yet or cannot be opened (its own
    check says why)."""
    if settings.store.url is None and not settings.store.path.exists():
        return []
    try:
        store = await open_store(settings)
    except VigilError:
        return []
    try:
        rows = await store.cost_rollup(since_ms=SystemClock().now_ms() - RECENT_MS, by=CostGroup.MODEL)
    except VigilError:
        return []
    finally:
        await store.close()
    return [row.key for row in rows if row.key != NO_MODEL]


def probe_targets(settings: Settings, source: Mapping[str, str] | None = None) -> list[Target]:
    """Every account of the configured executor and of its fallbacks that is an
    agent CLI, in order; ``source`` is the environment the loop starts from (None:
    this process's)."""
    origin = os.environ if source is None else source
    found = []
    for executor in dict.fromkeys((settings.dispatch.executor, *settings.dispatch.fallback)):
        if executor not in AGENT_CLIS:
            continue
        env = base_env(settings, source=origin, executor=executor)
        accounts = settings.agent_clis[executor].accounts
        if not accounts:
            found.append(Target(executor, DEFAULT_ACCOUNT, env))
        for account in accounts:
            found.append(Target(executor, account.name, account_env(env, executor, account, origin)))
    return found


def cost_note(settings: Settings, source: Mapping[str, str] | None = None) -> str:
    """What ``--probe`` is about to spend, said before it runs."""
    found = probe_targets(settings, source)
    if not found:
        return f"probe: the executor {settings.dispatch.executor!r} has no agent CLI to probe"
    executors = dict.fromkeys(t.executor for t in found)
    sizes = ", ".join(f"~{AGENT_CLIS[e].probe_tokens} input tokens with {e}" for e in executors)
    names = ", ".join(t.name for t in found)
    return (
        f"probe: one live request per account ({len(found)}: {names}), each {sizes} and a few output "
        "tokens, billed to the account (or counted against its subscription)"
    )


async def probe_findings(settings: Settings, source: Mapping[str, str] | None = None) -> list[Finding]:
    """``vigil doctor --probe``: one live request per account of the configured
    executor and of its fallbacks, one line each (``dispatch.agents.probe``)."""
    found = []
    for target in probe_targets(settings, source):
        started = time.monotonic()
        finding = await AGENT_CLIS[target.executor].probe(settings, target)
        took = f"answered in {time.monotonic() - started:.1f}s " if finding.level == "ok" else ""
        found.append(Finding(finding.level, "probe", f"{target.name}: {took}{finding.detail}"))
    return found
