"""The ``codex`` executor: OpenAI Codex CLI, ``codex exec --json``.

argv = ``[executors.codex] command`` + ``exec --json --skip-git-repo-check`` (a
scratch workspace is not a git repository, and Codex refuses to start outside one
without it) + ``--sandbox S`` (``sandbox``, default ``workspace-write``) + ``-c
allow_login_shell=false`` + ``--model M`` + for ``workspace-write``: ``-c
sandbox_workspace_write.network_access=true``, one ``--add-dir`` per folder of
``add_dirs`` and per git folder the task's clone needs to commit
(``RunContext.writable_dirs``: Codex keeps a workspace's ``.git`` read-only
otherwise), and, when the home or the task's repository lies under ``/tmp`` or
``$TMPDIR`` (which that sandbox lets the agent write), the switches that take those
away + Vigil's MCP
server for the run (``mcp_servers.vigil``: its command, the agent's variables
forwarded to it, its tools approved, required to start) + ``extra_args`` (so that
a ``-c`` there overrides ours) + for an attempt that continues an earlier run's
thread, ``resume THREAD -`` (its new message on stdin). The prompt goes on stdin; the process runs in
the agent's workspace, the only folder its sandbox lets it write: the home, its
``vigil.toml``, identity file, skills and database stay out of reach. When the loop's
store is PostgreSQL, its URL is kept from the agent's shell commands
(``shell_environment_policy``); only the MCP server gets it.

Why no login shell: Codex runs the model's commands with ``bash -lc`` by default,
and a login shell re-reads ``/etc/profile``, which on Debian sets a fixed PATH for
root: the agent's own tools would not be found where the operator put them.

Why network access: without it Codex's Linux sandbox (0.171.0) refuses ``send`` on
every socket, the local socket pair asyncio wakes its loop with included; asyncio
ignores that error, so any program of the project's that runs an event loop (its
tests, say) would wait forever.

A run in which Codex's sandbox could not start a command (``bwrap: …`` in the
command's answer, from the session file) is ``sandbox_failed``, whatever the
agent said. The stream is read by ``codex_stream`` (tokens, answer, Codex's own API retries as
live progress notes, the outcome, refusals of Vigil's tools); the refusals of shell
commands and patches come from Codex's session file (``codex_rollout``), and so
does the usage while the run goes on (``codex_usage``), which the run's meter is
held to. Codex counts a
resumed thread's usage from the thread's start, in its stream and its session file
alike; a resumed run's own is that less what the thread had spent before it
(``thread_so_far``), so that no call is counted twice. Codex
reports no dollar cost, so ``cost_usd`` and ``api_cost_usd`` are both computed from
the price table (``dispatch.agents.pricing``: ``[prices]``, the shipped table, else the
model's family's price) for the model: the task's or skill's, else ``[executors.codex]
model``, else the one in Codex's own ``config.toml``. A cap on a model with no price
is refused before the run starts (``dispatch.meter.meter_problem``).
"""

from __future__ import annotations

import json
import os
import tempfile
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path

from dispatch.agents.codex.rollout import rollout_limits, rollout_path, rollout_refusals, rollout_sandbox_failures
from dispatch.agents.codex.stream import CodexStream, classify
from dispatch.agents.codex.usage import SessionUsage, less, thread_usage
from dispatch.agents.ending import AgentExecutor, Verdict
from dispatch.agents.pricing import TokenUsage, api_cost_usd
from dispatch.executors import RunContext
from dispatch.executors.child import ChildResult, StopRun
from dispatch.executors.refusals import sandbox_failed_error
from dispatch.executors.transcript import run_agent_cli
from dispatch.meter import priced_by
from vigil.config import STORE_URL_ENV, AgentCliSettings, Settings
from vigil.limit_kinds import LimitReport
from vigil.models import Outcome, OutcomeKind, Task

EXEC_FLAGS = ("exec", "--json", "--skip-git-repo-check")
NO_LOGIN_SHELL = ("-c", "allow_login_shell=false")
WORKSPACE_NETWORK = ("-c", "sandbox_workspace_write.network_access=true")
NO_TMP = (
    "-c",
    "sandbox_workspace_write.exclude_slash_tmp=true",
    "-c",
    "sandbox_workspace_write.exclude_tmpdir_env_var=true",
)
ROUTER_REJECTION = "codex_core::tools::router: error="  # Codex's log line for a refused tool call


def writable_dirs(settings: Settings, cwd: Path) -> list[Path]:
    """The folders besides ``cwd`` the agent may write: ``add_dirs`` (relative ones
    to the home), none already inside ``cwd``."""
    found: list[Path] = []
    for folder in settings.codex.add_dirs:
        path = (settings.home / Path(folder).expanduser()).resolve()
        if not path.is_relative_to(cwd) and path not in found:
            found.append(path)
    return found


def home_under_tmp(home: Path, env: Mapping[str, str]) -> bool:
    """Whether ``home`` lies under ``/tmp`` or the agent's ``$TMPDIR``, which
    ``workspace-write`` lets the agent write unless told not to."""
    roots = [Path("/tmp"), Path(env.get("TMPDIR") or tempfile.gettempdir())]  # noqa: S108 -- compared, not used
    return any(home.resolve().is_relative_to(root.resolve()) for root in roots)


def tmp_taken_away(home: Path, repo: Path | None, env: Mapping[str, str]) -> bool:
    """Whether the sandbox must not let the agent write ``/tmp`` and ``$TMPDIR``:
    the home lies there, or the task's repository (``repo``; None: none), which
    the agent must never write."""
    return home_under_tmp(home, env) or (repo is not None and home_under_tmp(repo, env))


def mcp_server_args(command: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """The ``-c`` pairs that give Codex Vigil's MCP server, started as ``command``
    with the agent's variables (``env``'s names) forwarded to it (Codex hands a
    server only a few by default), its tools allowed without asking, and the run
    refused if it cannot start."""
    server = "mcp_servers.vigil."
    settings = {
        "command": json.dumps(command[0]),
        "args": json.dumps(list(command[1:])),
        "env_vars": json.dumps(sorted(env)),
        "default_tools_approval_mode": '"approve"',
        "required": "true",
        # a Python process may take more than Codex's default 10 s to start on a busy machine
        "startup_timeout_sec": "60",
    }
    return [arg for key, value in settings.items() for arg in ("-c", f"{server}{key}={value}")]


def codex_argv(
    cli: AgentCliSettings,
    model: str | None,
    add_dirs: Sequence[Path] = (),
    *,
    mcp_command: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    no_tmp: bool = False,
    resume: str | None = None,
) -> list[str]:
    """The full argv for one run (the prompt is not in it). ``add_dirs``, the
    network switch and ``no_tmp`` (take ``/tmp`` and ``$TMPDIR`` away) go only to the
    ``workspace-write`` sandbox, the one that reads them; ``mcp_command`` starts
    Vigil's MCP server with the agent's environment ``env``; ``resume`` is the
    thread to continue (``resume THREAD -`` after every option of ``exec``, which
    the subcommand inherits; None: a new thread)."""
    env = env or {}
    argv = [*cli.command, *EXEC_FLAGS, "--sandbox", cli.sandbox, *NO_LOGIN_SHELL]
    if model:
        argv += ["--model", model]
    if cli.sandbox == "workspace-write":
        argv += WORKSPACE_NETWORK
        if no_tmp:
            argv += NO_TMP
        for folder in add_dirs:
            argv += ["--add-dir", str(folder)]
    if mcp_command:
        argv += mcp_server_args(mcp_command, env)
    if env.get(STORE_URL_ENV):
        argv += ["-c", f"shell_environment_policy.exclude={json.dumps([STORE_URL_ENV])}"]
    argv += list(cli.extra_args)
    return argv if resume is None else [*argv, "resume", resume, "-"]


def configured_model(env: Mapping[str, str]) -> str | None:
    """The ``model`` in Codex's own ``config.toml`` (under the agent's
    ``CODEX_HOME``, else ``~/.codex``); None when it names none or cannot be read."""
    home = env.get("CODEX_HOME") or (os.path.join(env["HOME"], ".codex") if env.get("HOME") else None)
    if home is None:
        return None
    try:
        model = tomllib.loads(Path(home, "config.toml").read_text(encoding="utf-8")).get("model")
    except (OSError, ValueError):
        return None
    return model if isinstance(model, str) and model.strip() else None


def refusals_of(stream: CodexStream, result: ChildResult, env: Mapping[str, str]) -> tuple[str, ...]:
    """What the agent was refused: Vigil's tools' refusals from the stream, then
    the shell's and patches' from Codex's session file; without that file, the
    rejections Codex logged on stderr."""
    found = list(stream.refusals)
    path = None if stream.thread_id is None else rollout_path(env, stream.thread_id)
    try:
        found += rollout_refusals(path) if path is not None else _logged_rejections(result.stderr)
    except OSError:
        found += _logged_rejections(result.stderr)
    return tuple(found)


def sandbox_failures_of(stream: CodexStream, env: Mapping[str, str]) -> list[str]:
    """The commands Codex's sandbox could not start in this run, from its session
    file (the ``--json`` stream leaves failed commands out); none without it."""
    path = None if stream.thread_id is None else rollout_path(env, stream.thread_id)
    try:
        return [] if path is None else rollout_sandbox_failures(path)
    except OSError:
        return []


def limits_of(stream: CodexStream, env: Mapping[str, str]) -> tuple[LimitReport, ...]:
    """What the API said of the account's usage windows in this run, from Codex's
    session file (``codex_rollout.rollout_limits``); none without it."""
    path = None if stream.thread_id is None else rollout_path(env, stream.thread_id)
    try:
        return () if path is None else tuple(rollout_limits(path))
    except OSError:
        return ()


def _logged_rejections(stderr: str) -> list[str]:
    return [
        "codex: " + line.split(ROUTER_REJECTION, 1)[1].strip()
        for line in stderr.splitlines()
        if ROUTER_REJECTION in line and "rejected" in line.lower()
    ]


def thread_so_far(env: Mapping[str, str], thread_id: str) -> TokenUsage:
    """What the thread ``thread_id`` has spent so far, by its session file (none
    found: nothing). Codex counts a resumed thread's usage from the thread's start,
    in its stream and its session file alike: a resumed run's own share is what
    it reports less this, read before it starts."""
    path = rollout_path(env, thread_id)
    try:
        return TokenUsage() if path is None else thread_usage(path)[0]
    except OSError:
        return TokenUsage()


def _metered(stream: CodexStream, ctx: RunContext, model: str | None, before: TokenUsage) -> Callable[[bytes], None]:
    """``stream.feed``, with the run's usage so far metered (``ctx.meter``) at each
    event, and the run stopped once it passes its spending limit. The usage is the
    session file's, response by response (``codex_usage``), or, where that says
    less, the completed turns' of the stream; less ``before``, what a resumed
    thread had spent before this run."""
    session = SessionUsage(ctx.env)

    def feed(raw: bytes) -> None:
        stream.feed(raw)
        so_far = session.read(stream.thread_id)
        if so_far is None or _tokens_in(so_far) < _tokens_in(stream.usage):
            so_far = stream.usage
        ctx.meter.record("run", model, less(so_far, before))
        if ctx.meter.over:
            raise StopRun

    return feed


def _tokens_in(usage: TokenUsage) -> int:
    return usage.input + usage.output + usage.cache_read + usage.cache_write


class CodexExecutor(AgentExecutor):
    name = "codex"

    async def run(self, task: Task, ctx: RunContext) -> Outcome:
        model = ctx.model or self.settings.codex.model
        argv = codex_argv(
            self.settings.codex,
            model,
            # the clone's own git folder too, so that the agent can commit in it
            [*writable_dirs(self.settings, ctx.cwd.resolve()), *ctx.writable_dirs],
            mcp_command=ctx.mcp_command,
            env=ctx.env,
            no_tmp=tmp_taken_away(ctx.home, ctx.repo, ctx.env),
            resume=None if ctx.resume is None else ctx.resume.session_id,
        )
        model = model or configured_model(ctx.env)  # named in no event: priced as configured
        stream = CodexStream(on_progress=ctx.on_progress)
        before = TokenUsage() if ctx.resume is None else thread_so_far(ctx.env, ctx.resume.session_id)
        try:
            result = await run_agent_cli(self.name, argv, ctx, self.grace_s, _metered(stream, ctx, model, before))
        finally:
            if stream.retries:
                ctx.on_progress(None)  # the run is over: no retry is going on any more

        outcome = self.ended(result, ctx, stream.answer, partial(_verdict, stream, result, ctx.env))
        usage = less(stream.usage, before)
        cost = api_cost_usd(self.settings.prices, model, usage)
        # a run cut short (timed out, stalled, over budget) keeps what was metered
        return ctx.meter.charge(
            replace(
                outcome,
                cost_usd=cost,
                api_cost_usd=cost,
                tokens_in=usage.input,
                tokens_out=usage.output,
                cache_read_tokens=usage.cache_read,
                cache_write_tokens=usage.cache_write,
                model=model,
                session_id=stream.thread_id,
                permission_denials=refusals_of(stream, result, ctx.env),
                # "thread/resume failed: no rollout found for thread id …" (0.171.0), exit 1, no event
                resume_refused=ctx.resume is not None and stream.events == 0 and result.exit_code != 0,
                priced_by=priced_by(self.settings.prices, [model]),
                limits=limits_of(stream, ctx.env),
            )
        )


def _verdict(stream: CodexStream, result: ChildResult, env: Mapping[str, str], now_ms: int) -> Verdict:
    """How a run that ended of itself ended: by its stream (``classify``), but a
    run in which Codex's sandbox could not start a command is ``sandbox_failed``."""
    found = classify(stream, result.exit_code, result.stderr, now_ms)
    failures = sandbox_failures_of(stream, env) if found.kind is OutcomeKind.SUCCESS else []
    if failures:  # the agent may say it is done: its commands never ran
        return Verdict(OutcomeKind.SANDBOX_FAILED, sandbox_failed_error(failures), found.retry_at)
    return found
