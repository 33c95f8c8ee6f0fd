"""Preparing one attempt: the task's skills, its prompt and the executor's ``RunContext``.

A skill may choose the executor, model, timeout, command and working directory of
its tasks; the first skill in the task's list that sets one wins, else the
configuration decides. A model set on the task itself wins over both. The agent's
workspace is chosen by ``dispatch.workspace`` (never the home: a scratch folder of
the task's own when nothing names one). The prompt gets the identity file, the
skills, the parent chain, earlier attempts and notes (``dispatch.prompt``). An
agent CLI also gets the command that starts Vigil's MCP server bound to the run
(``mcp_command``): the agent's only way to report back.
"""

from __future__ import annotations

import sys
from pathlib import Path

from dispatch.environment import base_env, with_run_ids
from dispatch.executors import RunContext
from dispatch.filecache import FileCache
from dispatch.prompt import build_prompt
from dispatch.skills import load_skills
from dispatch.workspace import make_workspace, workspace_of
from vigil.config import EXECUTORS, Settings
from vigil.lineage import parent_chain
from vigil.models import Claim
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


AGENT_CLIS = ("claude", "codex")  # the executors that get Vigil's MCP server


def mcp_command(settings: Settings, run_id: int) -> tuple[str, ...]:
    """The argv that starts Vigil's MCP server for run ``run_id``: this very
    interpreter and install, the home named explicitly (the agent CLI starts it in
    the agent's workspace, not in the home)."""
    return (sys.executable, "-m", "vigil", "--home", str(settings.home), "mcp", "--run", str(run_id))


def _as_text(path: Path, text: str) -> str:
    """The identity file goes into the prompt as it is: nothing to parse."""
    return text


class AttemptPreparer:
    """Prepares attempts for one dispatcher. What does not change from task to task
    is worked out once: the folders, the agent's environment and its secrets (from
    this process's environment as it is now), the identity file (read again only
    when it changes), the transcripts folder ``logs/runs`` (made once; an executor
    that writes a transcript makes it again should it vanish)."""

    def __init__(self, store: Store, settings: Settings) -> None:
        self._store = store
        self._settings = settings
        self._skills_dir = settings.skills_dir
        self._identity_path = settings.home / settings.dispatch.identity
        self._identity = FileCache(_as_text, max_files=1)
        self._runs_dir = transcripts_dir(settings)
        self._runs_dir_made = False
        # Read once: the environment as the dispatcher started (per executor, as
        # each gets its own CLI's variables).
        self._envs = {name: base_env(settings, executor=name) for name in EXECUTORS}
        # the agent can only print the secrets it was given
        every = {k: v for env in self._envs.values() for k, v in env.items()}
        self._redactor = Redactor.from_env(every, settings.dispatch.pass_env)

    def _identity_text(self) -> str | None:
        """The home's identity file's text; None when it has none. Raises
        ``OSError`` when it cannot be read, as text either: the machine's fault, so
        the attempt is retried rather than run without it."""
        try:
            return self._identity.load(self._identity_path)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None
        except UnicodeDecodeError as err:
            raise OSError(f"{self._identity_path} is not UTF-8 text (byte {err.start})") from None

    async def prepare(self, claim: Claim) -> tuple[str, RunContext]:
        """The executor name and context for ``claim``'s attempt.

        Raises ``SkillError`` (an ``InputError``) for an unknown or broken skill: the
        task's own fault, recorded as a failure; ``OSError`` when the transcripts
        folder or the scratch workspace cannot be made.
        """
        settings, store = self._settings, self._store
        task = claim.task
        skills = load_skills(self._skills_dir, task.skills)
        executor = next((s.executor for s in skills if s.executor), None) or settings.dispatch.executor
        default_model = {"claude": settings.claude.model, "codex": settings.codex.model}.get(executor)
        # The task's own model (vigil task add --model) wins: it was chosen for this task.
        model = task.model or next((s.model for s in skills if s.model), None) or default_model
        timeout_ms = next((s.timeout_ms for s in skills if s.timeout_ms), None) or settings.dispatch.timeout_ms
        command = next((s.command for s in skills if s.command), None)
        workspace = workspace_of(task, skills, settings)
        if executor != "dry-run":  # it starts no process: no folder to leave behind
            make_workspace(workspace)
        # The attempt number counts every run ever made: a first attempt has no history
        # to read (one thread hop saved per task). The notes came with the claim.
        previous_runs = (
            [] if claim.attempt == 1 else [r for r in await store.list_runs(task.id) if r.id != claim.run_id]
        )
        prompt = build_prompt(
            task,
            skills,
            identity=self._identity_text(),
            parents=await parent_chain(store, task),
            previous_runs=previous_runs,
            notes=list(claim.notes) if claim.notes is not None else await store.list_notes(task.id),
        )
        if not self._runs_dir_made:
            self._runs_dir.mkdir(parents=True, exist_ok=True)
            self._runs_dir_made = True
        run_id = claim.run_id

        async def on_process_start(pid: int, pgid: int, proc_start: str | None) -> None:
            await store.set_run_process(
                run_id, pid=pid, pgid=pgid, proc_start=proc_start, workspace=str(workspace.path)
            )

        ctx = RunContext(
            home=settings.home,
            run_id=run_id,
            attempt=claim.attempt,
            prompt=prompt,
            timeout_s=timeout_ms / 1000,
            transcript_path=self._runs_dir / transcript_name(task.id, claim.attempt),
            env=with_run_ids(self._envs.get(executor, self._envs["dry-run"]), task.id, run_id),
            model=model,
            command=command,
            on_process_start=on_process_start,
            redactor=self._redactor,
            workdir=workspace.path,
            mcp_command=mcp_command(settings, run_id) if executor in AGENT_CLIS else (),
        )
        return executor, ctx
