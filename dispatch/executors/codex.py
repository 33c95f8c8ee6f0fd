"""The ``codex`` executor: OpenAI Codex CLI, ``codex exec --json``.

argv = ``[executors.codex] command`` + ``exec --json --skip-git-repo-check`` (a
home is not a git repository, and Codex refuses to start outside one without it) +
``--sandbox S`` (``sandbox``, default ``workspace-write``) + ``-c
allow_login_shell=false`` + ``--model M`` + for ``workspace-write``: ``-c
sandbox_workspace_write.network_access=true`` and one ``--add-dir`` per folder the
agent must be able to write besides its working directory (the database's folder,
so that its own ``vigil task …`` calls can commit; ``add_dirs``) + ``extra_args``
(last, so that a ``-c`` there overrides ours). The prompt goes on stdin; the
process runs in the run's working directory.

Why no login shell: Codex runs the model's commands with ``bash -lc`` by default,
and a login shell re-reads ``/etc/profile``, which on Debian sets a fixed PATH for
root: the ``vigil`` the prompt asks for would not be found.

Why network access: without it Codex's Linux sandbox (0.171.0) refuses ``send`` on
every socket, the local socket pair asyncio wakes its loop with included; asyncio
ignores that error, so a ``vigil`` command that runs an event loop (the agent's
``vigil task …`` calls on PostgreSQL, ``vigil status``; on SQLite the task commands
run none) would wait forever. A PostgreSQL store needs the network anyway.

The stream is read by ``codex_stream`` (tokens, answer, Codex's own API retries as
live progress notes, the outcome). Codex reports no dollar cost, so ``cost_usd``
and ``api_cost_usd`` are both computed from the ``[prices]`` table.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from dispatch.executors import DEFAULT_GRACE_S, RunContext
from dispatch.executors.answer import detail_of, summary_of
from dispatch.executors.child import ended_early
from dispatch.executors.codex_stream import CodexStream, classify
from dispatch.executors.transcript import run_agent_cli
from dispatch.pricing import api_cost_usd
from vigil.clock import SystemClock
from vigil.config import AgentCliSettings, Settings
from vigil.models import Outcome, OutcomeKind, Task

EXEC_FLAGS = ("exec", "--json", "--skip-git-repo-check")
NO_LOGIN_SHELL = ("-c", "allow_login_shell=false")
WORKSPACE_NETWORK = ("-c", "sandbox_workspace_write.network_access=true")


def writable_dirs(settings: Settings, cwd: Path) -> list[Path]:
    """The folders besides ``cwd`` the agent must be able to write: the SQLite
    database's (its WAL and shared-memory files are made beside it) and
    ``add_dirs`` (relative ones to the home); none already inside ``cwd``."""
    wanted = [] if settings.store.url is not None else [settings.store.path.parent]
    wanted += [(settings.home / Path(folder).expanduser()).resolve() for folder in settings.codex.add_dirs]
    found: list[Path] = []
    for folder in wanted:
        if not folder.is_relative_to(cwd) and folder not in found:
            found.append(folder)
    return found


def codex_argv(cli: AgentCliSettings, model: str | None, add_dirs: list[Path] | tuple[Path, ...] = ()) -> list[str]:
    """The full argv for one run (the prompt is not in it). ``add_dirs`` and the
    network switch go only to the ``workspace-write`` sandbox, the one that reads them."""
    argv = [*cli.command, *EXEC_FLAGS, "--sandbox", cli.sandbox, *NO_LOGIN_SHELL]
    if model:
        argv += ["--model", model]
    if cli.sandbox == "workspace-write":
        argv += WORKSPACE_NETWORK
        for folder in add_dirs:
            argv += ["--add-dir", str(folder)]
    return argv + list(cli.extra_args)


class CodexExecutor:
    name = "codex"

    def __init__(
        self,
        settings: Settings,
        *,
        grace_s: float = DEFAULT_GRACE_S,
        now_ms: Callable[[], int] | None = None,
    ) -> None:
        self.settings = settings
        self.grace_s = grace_s
        # only to read a reset time given as a clock time: the next such moment after now
        self.now_ms = now_ms or SystemClock().now_ms

    async def run(self, task: Task, ctx: RunContext) -> Outcome:
        model = ctx.model or self.settings.codex.model
        argv = codex_argv(self.settings.codex, model, writable_dirs(self.settings, ctx.cwd.resolve()))
        stream = CodexStream(on_progress=ctx.on_progress)
        try:
            result = await run_agent_cli(self.name, argv, ctx, self.grace_s, stream.feed)
        finally:
            if stream.retries:
                ctx.on_progress(None)  # the run is over: no retry is going on any more

        transcript_path = str(ctx.transcript_path)
        early = ended_early(result, ctx.timeout_s, transcript_path)
        retry_at = None
        if early is not None:
            kind, error, summary = early.kind, early.error, early.summary
        else:
            verdict = classify(stream, result.exit_code, result.stderr, self.now_ms())
            kind, error, retry_at = verdict.kind, verdict.error, verdict.retry_at
            summary = summary_of(stream.answer if kind is OutcomeKind.SUCCESS else (error or stream.answer))
        cost = api_cost_usd(self.settings.prices, model, stream.usage)
        return Outcome(
            kind=kind,
            summary=summary,
            detail=detail_of(stream.answer),
            error=error,
            exit_code=result.exit_code,
            cost_usd=cost,
            api_cost_usd=cost,
            tokens_in=stream.usage.input,
            tokens_out=stream.usage.output,
            cache_read_tokens=stream.usage.cache_read,
            cache_write_tokens=stream.usage.cache_write,
            model=model,
            session_id=stream.thread_id,
            transcript_path=transcript_path,
            retry_at=retry_at,
        )
