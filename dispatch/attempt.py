"""Preparing one attempt: the task's skills, its prompt and the executor's ``RunContext``.

A skill may choose the executor, model, timeout, command and working directory of
its tasks; the first skill in the task's list that sets one wins, else the
configuration decides. A model set on the task itself wins over both. The agent's
workspace is chosen by ``dispatch.workspace`` (never the home: a scratch folder of
the task's own when nothing names one); a task that works on a repository gets
its git worktree made or reused here, and the run's code work (``CodeWork``: the
checks, the review, the branch's state before the run) goes back with the
context (``dispatch.worktree``). The prompt gets the identity file, the skills,
the parent chain, earlier attempts and notes, and the code work
(``dispatch.prompt``). An agent CLI also gets the command that starts Vigil's MCP
server bound to the run (``mcp_command``): the agent's only way to report back.

An agent CLI's task runs on a free account (``dispatch.accounts``), or on a
fallback executor when every account of its own is limited, with the environment
that selects that account. Each run gets a meter (``dispatch.meter``) with the
most it may spend: what is left of its task's ``max_cost_usd`` and of the daily
budget (unless a person made the task urgent: ``vigil.budget.exempt``); a limit its
run cannot be metered against is refused here (``dispatch.meter.Unmetered``); and
the stall timeout, ``[dispatch] stall_timeout``. The attempt may
continue an earlier run's agent session (``dispatch.resumption``); the prompt is
built all the same, for a CLI that will not resume it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from dispatch.accounts import account_env, pick, soonest
from dispatch.agents.registry import AGENT_CLIS
from dispatch.checks import check_sandbox
from dispatch.environment import base_env, with_run_ids
from dispatch.executors import RunContext
from dispatch.meter import Meter, SpendLimit, Unmetered, meter_problem
from dispatch.prompt import build_prompt
from dispatch.resumption import resume_after_failure, resume_for
from dispatch.skills import Skill, load_skills
from dispatch.workspace import code_of, is_agents_followup, make_workspace, workspace_of
from dispatch.worktree import CodeWork, Publish, prepare_worktree, start_of
from vigil.accounts import AccountLimit, read_limits
from vigil.budget import budget_use, exempt
from vigil.clock import Clock, SystemClock
from vigil.codework import PULL_REQUEST, CodeOptions
from vigil.config import AGENT_EXECUTORS, STORE_URL_ENV, Settings
from vigil.errors import InputError
from vigil.lineage import parent_chain
from vigil.models import Claim, Outcome, Task
from vigil.redaction import Redactor
from vigil.store import Store


def transcripts_dir(settings: Settings) -> Path:
    """``logs/runs`` in the home: every run's transcript."""
    return settings.logs_dir / "runs"


def transcript_name(task_id: int, attempt: int) -> str:
    """``<task id>-<attempt>.jsonl``: one transcript per attempt."""
    return f"{task_id}-{attempt}.jsonl"


def transcript_path(settings: Settings, task_id: int, attempt: int) -> Path:
    """``logs/runs/<task id>-<attempt>.jsonl`` in the home."""
    return transcripts_dir(settings) / transcript_name(task_id, attempt)


DRY_RUN = "dry-run"  # builds and stores the prompt; starts no process


@dataclass(frozen=True, slots=True)
class ExecutorChoice:
    """Which executor runs an attempt, and how. ``model`` None: the CLI's own
    default; ``account`` None: the CLI's environment as it is (or no CLI);
    ``timeout_ms`` the attempt's own; ``command`` a ``command`` skill's argv (None:
    the configured one's)."""

    executor: str
    model: str | None
    account: str | None
    timeout_ms: int
    command: tuple[str, ...] | None

    @property
    def starts_process(self) -> bool:
        """False for dry-run: no workspace, worktree or checks to prepare."""
        return self.executor != DRY_RUN


@dataclass(frozen=True, slots=True)
class Attempt:
    """A prepared attempt: the executor's name, its run's context and its code work."""

    executor: str
    ctx: RunContext
    work: CodeWork


def choose_executor(
    task: Task, skills: Sequence[Skill], settings: Settings, limits: Mapping[str, AccountLimit], now_ms: int
) -> ExecutorChoice:
    """The executor, model, account, timeout and command of ``task``'s attempt with
    its ``skills``, under the accounts' usage ``limits`` at ``now_ms``: the first
    skill that names one wins, else the configuration; a model set on the task wins
    over both. When every account of the chosen agent CLI is limited, a fallback
    executor (``[dispatch] fallback``, unless a skill forbids it) runs it with its
    own default model; with none free either, the account whose limit ends first."""
    executor = next((s.executor for s in skills if s.executor), None) or settings.dispatch.executor
    # The task's own model (vigil task add --model) wins: it was chosen for this task.
    model = task.model or next((s.model for s in skills if s.model), None) or _default_model(settings, executor)
    where = pick(settings, executor, limits, now_ms, may_fall_back=all(s.fallback for s in skills), model=model)
    if where.executor != executor:
        # every account of its own is limited: a model named for it means nothing here
        executor, model = where.executor, _default_model(settings, where.executor)
    account = where.account
    if account is None and where.free_at is not None:
        account = soonest(settings, executor, limits)
    timeout_ms = next((s.timeout_ms for s in skills if s.timeout_ms), None) or settings.dispatch.timeout_ms
    command = next((s.command for s in skills if s.command), None)
    return ExecutorChoice(executor, model, account, timeout_ms, command)


def _default_model(settings: Settings, executor: str) -> str | None:
    cli = settings.agent_cli(executor)
    return None if cli is None else cli.model


def mcp_command(settings: Settings, run_id: int) -> tuple[str, ...]:
    """The argv that starts Vigil's MCP server for run ``run_id``: this very
    interpreter and install, the home named explicitly (the agent CLI starts it in
    the agent's workspace, not in the home)."""
    return (sys.executable, "-m", "vigil", "--home", str(settings.home), "mcp", "--run", str(run_id))


class AttemptPreparer:
    """Prepares attempts for one dispatcher. What does not change from task to task
    is worked out once: the agent's environment and its secrets (from this process's
    environment as it is now) and the transcripts folder ``logs/runs`` (made once; an
    executor that writes a transcript makes it again should it vanish). The identity
    file is read for each attempt, so an edit reaches the next one."""

    def __init__(self, store: Store, settings: Settings, clock: Clock | None = None) -> None:
        self._store = store
        self._settings = settings
        self._clock = clock or SystemClock()
        self._identity_path = settings.home / settings.dispatch.identity
        self._runs_dir = transcripts_dir(settings)
        self._runs_dir_made = False
        # Read once: the environment as the dispatcher started (an agent CLI's with
        # its own CLI's variables; every other executor's and the checks' plain).
        self._plain_env = base_env(settings)
        self._envs = {name: base_env(settings, executor=name) for name in AGENT_EXECUTORS}
        # each account's: its folder or its key in the CLI's own variables
        self._account_envs = {
            (name, account.name): account_env(self._envs[name], name, account, os.environ)
            for name, cli in settings.agent_clis.items()
            for account in cli.accounts
        }
        # the agent can only print the secrets it was given
        envs = [self._plain_env, *self._envs.values(), *self._account_envs.values()]
        every = {k: v for env in envs for k, v in env.items()}
        self._redactor = Redactor.from_env(every, settings.dispatch.pass_env)

    def _identity_text(self) -> str | None:
        """The home's identity file's text; None when it has none. Raises
        ``OSError`` when it cannot be read, as text either: the machine's fault, so
        the attempt is retried rather than run without it."""
        try:
            return self._identity_path.read_text(encoding="utf-8")
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None
        except UnicodeDecodeError as err:
            raise OSError(f"{self._identity_path} is not UTF-8 text (byte {err.start})") from None

    async def prepare(self, claim: Claim, skills: list[Skill]) -> Attempt:
        """The executor, context and code work for ``claim``'s attempt with the
        task's ``skills`` (loaded by the caller).

        Raises ``Unmetered`` (``InputError``) for a spending limit the run could
        not be metered against (``dispatch.meter``); ``RepositoryError``
        (``InputError``) for a repository or base that cannot be used: the task's
        own fault, recorded as a failure; ``OSError``
        when the transcripts folder or the scratch workspace cannot be made, or the
        identity file cannot be read; ``GitError`` when git fails on a usable
        repository.
        """
        settings, store = self._settings, self._store
        task = claim.task
        limits = read_limits(await store.loop_values())
        choice = choose_executor(task, skills, settings, limits, self._clock.now_ms())
        env = with_run_ids(self._env(choice.executor, choice.account), task.id, claim.run_id)
        limit = await self._spend_limit(task, skills)
        if limit is not None:  # before anything is made for a run that will not start
            _refuse_unmetered(limit, choice, env, settings)
        parents = await parent_chain(store, task)
        code = code_of(task, skills, settings, self._gates(task, parents))
        workspace = workspace_of(task, skills, settings, parents)
        worktree = task.worktree
        if choice.starts_process:  # dry-run starts none: no folder to leave behind
            make_workspace(workspace)
            worktree = await prepare_worktree(store, task, workspace, code)
        previous_runs = [r for r in await store.list_runs(task.id) if r.id != claim.run_id]
        checks, review = code.checks or (), bool(code.review)
        cli = settings.agent_cli(choice.executor)
        after_failure = resume_after_failure(cli, skills)
        notes = await store.list_notes(task.id)
        resume = resume_for(
            task, previous_runs, choice.executor, workspace.path, after_failure=after_failure, notes=notes
        )
        # no review and merge = "pull_request": a success is pushed as a pull request
        publishes = worktree is not None and worktree.merge == PULL_REQUEST and not review and choice.starts_process
        prompt = build_prompt(
            task,
            skills,
            identity=self._identity_text(),
            parents=parents,
            previous_runs=previous_runs,
            notes=notes,
            attempt=claim.attempt,
            worktree=worktree,
            checks=checks,
            review=review,
            pull_request=publishes,
        )
        if not self._runs_dir_made:
            self._runs_dir.mkdir(parents=True, exist_ok=True)
            self._runs_dir_made = True
        run_id = claim.run_id
        publish = (
            Publish(settings.github, denials_reviewed=settings.dispatch.on_denial == "review") if publishes else None
        )
        gated = bool(checks) or review or publish is not None

        async def on_process_start(pid: int, pgid: int, proc_start: str | None) -> None:
            # also each check's process, in its turn: crash recovery ends the one in flight
            await store.set_run_process(
                run_id, pid=pid, pgid=pgid, proc_start=proc_start, workspace=str(workspace.path), gated=gated
            )

        # the clone's own git folder, which Codex keeps read-only in a workspace
        writable = () if worktree is None else (Path(worktree.path) / ".git",)
        ctx = RunContext(
            home=settings.home,
            run_id=run_id,
            attempt=claim.attempt,
            prompt=prompt,
            timeout_s=choice.timeout_ms / 1000,
            transcript_path=self._runs_dir / transcript_name(task.id, claim.attempt),
            env=env,
            model=choice.model,
            command=choice.command,
            on_process_start=on_process_start,
            redactor=self._redactor,
            workdir=workspace.path,
            mcp_command=mcp_command(settings, run_id) if cli is not None else (),
            meter=Meter(settings.prices, limit),
            stall_timeout_s=settings.dispatch.stall_timeout_ms / 1000 or None,
            account=choice.account,
            writable_dirs=writable,
            repo=None if worktree is None else Path(worktree.repo),
            resume=resume if cli is not None else None,
        )
        check_env = self._check_env(task.id, run_id)
        work = CodeWork(
            task_id=task.id,
            attempt=claim.attempt,
            worktree=worktree,
            before=start_of(worktree) if choice.starts_process else None,
            checks=checks if choice.starts_process else (),
            review=review,
            cwd=workspace.path,
            env=check_env,
            timeout_s=choice.timeout_ms / 1000,
            on_start=on_process_start,
            sandbox=(
                check_sandbox(check_env, writable, network=settings.checks.network)
                if settings.dispatch.check_sandbox
                else None
            ),
            store=store,
            publish=publish,
        )
        return Attempt(choice.executor, ctx, work)

    def _gates(self, task: Task, parents: Sequence[Task]) -> CodeOptions | None:
        """The gates an agent's follow-up inherits: its parent's code options as
        the parent ran (held to its own parent's, up the chain); None for a task
        a person or a sensor added."""
        if not parents or not is_agents_followup(task):
            return None
        parent = parents[0]
        skills = load_skills(self._settings.skills_dir, parent.skills)
        code = code_of(parent, skills, self._settings, self._gates(parent, parents[1:]))
        if parent.worktree is not None:
            code = replace(code, repo=parent.worktree.repo, base=parent.worktree.base, merge=parent.worktree.merge)
        return code

    def _env(self, executor: str, account: str | None) -> dict[str, str]:
        """The environment of ``executor``'s runs on ``account`` (the configured
        account's, else the CLI's own variables as they are)."""
        if account is not None and (executor, account) in self._account_envs:
            return self._account_envs[(executor, account)]
        return self._envs.get(executor, self._plain_env)

    async def _spend_limit(self, task: Task, skills: Sequence[Skill]) -> SpendLimit | None:
        """The most this run may spend: what is left of the task's own
        ``max_cost_usd`` (else its first skill's that sets one) after its earlier
        runs, and of the daily budget (``[budget] daily_usd``) unless a person made
        the task urgent enough to run above it; the smaller. None: no limit."""
        limits = []
        own = task.max_cost_usd
        if own is None:
            own = next((s.max_cost_usd for s in skills if s.max_cost_usd is not None), None)
        if own is not None:
            spent = f" (${task.cost_usd:.2f} spent by earlier runs)" if task.cost_usd else ""
            limits.append(SpendLimit(own - task.cost_usd, f"the task's max_cost_usd of ${own:.2f}{spent}"))
        budget = self._settings.budget
        if budget.daily_usd is not None and not await exempt(self._store, task, budget):
            use = await budget_use(self._store, budget, self._clock.now_ms())
            why = f"the daily budget of ${budget.daily_usd:.2f} (${use.spent_usd:.2f} spent in the last 24 h)"
            limits.append(SpendLimit(budget.daily_usd - use.spent_usd, why, daily=True))
        return min(limits, key=lambda limit: limit.usd, default=None)

    def _check_env(self, task_id: int, run_id: int) -> dict[str, str]:
        """The checks' environment: the agent's rules (the same few variables, the
        run's ids) without any agent CLI's own (its key) or the store's URL."""
        env = {k: v for k, v in self._plain_env.items() if k != STORE_URL_ENV}
        return with_run_ids(env, task_id, run_id)


def _refuse_unmetered(limit: SpendLimit, choice: ExecutorChoice, env: Mapping[str, str], settings: Settings) -> None:
    """Raise ``Unmetered`` when ``limit`` cannot be metered on the run ``choice``
    starts (its model, else the one Codex's own config names, has no price and the
    CLI reports no cost): refused when claimed, never run as if there were no cap."""
    model = choice.model or _own_model(choice.executor, env)
    problem = meter_problem(choice.executor, model, settings.prices)
    if problem is not None:
        raise Unmetered(f"refused: {limit.why} cannot be metered: {problem}", daily=limit.daily)


def unmetered_cap(
    settings: Settings, skill_names: Sequence[str], model: str | None, max_cost_usd: float | None
) -> str | None:
    """Why a task about to be added (its skills, its own model and cap) would have
    a cap its runs cannot be metered against, as ``vigil task add`` refuses it;
    None when it has no cap or the cap can be metered. The executor and model are
    chosen as for its attempt (``choose_executor``, with every account free); a
    fallback executor met at run time is checked again when the task is claimed."""
    try:
        skills = load_skills(settings.skills_dir, skill_names)
    except InputError:
        return None  # an unknown or broken skill: refused on its own account, as the task is added
    caps = [max_cost_usd, *(s.max_cost_usd for s in skills)]
    cap = next((usd for usd in caps if usd is not None), None)
    if cap is None:
        return None
    executor = next((s.executor for s in skills if s.executor), None) or settings.dispatch.executor
    model = model or next((s.model for s in skills if s.model), None) or _default_model(settings, executor)
    model = model or _own_model(executor, base_env(settings, executor=executor))
    problem = meter_problem(executor, model, settings.prices)
    return None if problem is None else f"refused: a cap of ${cap:.2f} cannot be metered: {problem}"


def _own_model(executor: str, env: Mapping[str, str]) -> str | None:
    """The model the CLI's own configuration names (None: none, or no agent CLI)."""
    cli = AGENT_CLIS.get(executor)
    return None if cli is None else cli.own_model(env)


def settled(outcome: Outcome, ctx: RunContext) -> Outcome:
    """The outcome to record for a run of ``ctx``: what the agent printed with the
    secrets it was given masked, the tokens and cost its stream carried when the
    outcome has none of its own (a run canceled or stopped mid-way), held against
    the run's limit with its final spend (``Meter.reconcile``: ``over_budget`` when
    the overrun showed only at the end), and the account it ran on."""
    charged = ctx.meter.reconcile(ctx.meter.charge(outcome))
    return replace(ctx.redactor.outcome(charged), account=ctx.account)
