"""What a run's agent may do to Vigil: the operations behind ``vigil mcp``'s tools.

The agent is untrusted. It reaches Vigil only through an ``AgentChannel`` bound to
the run the dispatcher named when it started the server, and the channel offers
only what belongs to that run's task: a view of it (``show``: the task, its parent
chain, its notes), ``note``, ``close`` (completed, failed, blocked, or pending with
a delay), ``ask`` (a question to a person, with optional choices: the task waits
for the answer once the run ends) and ``add_followup`` (a child task, inside the
flood limits, in its parent's workspace, never more urgent than its parent). Everything is written with actor
``agent``. A run whose result checks or a person decide (``Run.gated``) does not
close its task as completed by the agent's word: the summary becomes a note and
the dispatcher decides when the run ends.

There is nothing here that approves, rejects, pauses, resumes, changes a budget or
the configuration: person-only actions do not exist for an agent. A call that names
another task, or comes after the run ended, is refused and changes nothing; its
message starts with ``refused:``, which the executors record on the run as a
denial. The first ``close`` of a run decides: a later one is refused with what was
decided. Each write checks its run again in the writing transaction (the store's
``require_open_run``), so a dispatcher recording the run between this channel's
read and its write cannot be overtaken. Arguments are data: text is stored
verbatim (backticks, ``$VAR``, quotes, newlines), never parsed by a shell.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vigil.clock import Clock, iso_utc
from vigil.config import Settings
from vigil.durations import parse_duration_ms
from vigil.errors import InputError, Refused, TaskNotFound
from vigil.home import check_skills_exist, scratch_path
from vigil.lineage import parent_chain
from vigil.models import NewTask, Run, Task, TaskStatus, skill_name_problem
from vigil.store import Store

ACTOR = "agent"
CLOSE_STATUSES = ("completed", "failed", "blocked", "pending")


@dataclass(frozen=True, slots=True)
class Bound:
    """The run a channel serves and its task, as they are now."""

    run: Run
    task: Task


class AgentChannel:
    """The agent's operations for run ``run_id``. Each call re-reads the run: once it
    has ended (recorded by the dispatcher, or recovered), every call is refused."""

    def __init__(self, store: Store, run_id: int, settings: Settings, clock: Clock) -> None:
        self._store = store
        self._run_id = run_id
        self._settings = settings
        self._clock = clock

    async def bind(self, task_id: int | None = None) -> Bound:
        """The open run and its task. Raises ``Refused`` when the run does not exist,
        has ended, or ``task_id`` names another task."""
        run = await self._store.get_run(self._run_id)
        if run is None:
            raise Refused(f"run #{self._run_id} does not exist")
        if run.finished_at is not None:
            raise Refused(f"run #{run.id} has ended; its agent can no longer change task #{run.task_id}")
        if task_id is not None and task_id != run.task_id:
            raise Refused(f"task #{task_id} is not this run's task; this run may only change task #{run.task_id}")
        try:
            task = await self._store.get_task(run.task_id)
        except TaskNotFound:
            raise Refused(f"task #{run.task_id} no longer exists") from None
        return Bound(run, task)

    async def show(self, task_id: int | None = None) -> str:
        """The task as the agent may see it: its fields, parent chain and notes (text)."""
        bound = await self.bind(task_id)
        task = bound.task
        left = max(task.max_retries + 1 - task.attempt_count, 0)
        lines = [
            f"task #{task.id}: {task.subject}",
            f"status: {task.status}; priority {task.priority} (1 most urgent, 9 least)",
            f"attempt: {bound.run.attempt} ({'the last one' if left == 0 else f'at most {left} more after this one'})",
            f"source: {task.source}",
        ]
        if task.skills:
            lines.append(f"skills: {', '.join(task.skills)}")
        lines += ["", "description:", task.description or "(none)"]
        parents = await parent_chain(self._store, task)
        if parents:
            lines += ["", "parent chain, nearest first:"]
            lines += [f"- #{p.id} [{p.status}] {p.subject}" + _result(p) for p in parents]
        if task.question is not None:
            lines += ["", f"your question: {task.question}"]
            lines += [f"choices: {' | '.join(task.choices)}"] if task.choices else []
            lines += [f"the answer: {task.answer}" if task.answer is not None else "(not answered yet)"]
        notes = await self._store.list_notes(task.id)
        if notes:
            lines += ["", "notes:"]
            lines += [f"- {iso_utc(n.at)} ({n.author}): {n.text}" for n in notes]
        return "\n".join(lines)

    async def note(self, text: str, task_id: int | None = None) -> str:
        task = (await self.bind(task_id)).task
        await self._store.add_note(task.id, text, author=ACTOR, run_id=self._run_id)
        return f"noted on task #{task.id}"

    async def close(self, status: str, summary: str, retry_in: str | None = None, task_id: int | None = None) -> str:
        """Close the task as ``status``; ``pending`` asks for another attempt after
        ``retry_in`` (a duration such as ``30m``)."""
        if status not in CLOSE_STATUSES:
            raise InputError(f"status must be one of {', '.join(CLOSE_STATUSES)}, not {status!r}")
        if not summary.strip():
            raise InputError("summary must not be empty")
        if (status == "pending") != (retry_in is not None):
            raise InputError("retry_in goes with status pending, and pending needs it (e.g. retry_in='1h')")
        bound = await self.bind(task_id)
        task = bound.task
        if status == "completed" and bound.run.gated:
            # checks or a person decide this task's result: the agent's word is a note
            await self._store.add_note(task.id, f"done: {summary}", author=ACTOR, run_id=self._run_id)
            return (
                f"noted; task #{task.id} is not closed by you: when your run ends, Vigil runs its checks "
                "and a person may review it. End your run now."
            )
        if retry_in is not None:
            retry_at = self._clock.now_ms() + parse_duration_ms(retry_in)
            await self._store.request_retry(task.id, retry_at, summary, actor=ACTOR, run_id=self._run_id)
            return f"task #{task.id} will be tried again in {retry_in}"
        await self._store.close_task(task.id, TaskStatus(status), summary, actor=ACTOR, run_id=self._run_id)
        return f"task #{task.id} closed as {status}"

    async def ask(self, question: str, choices: Sequence[str] = (), task_id: int | None = None) -> str:
        """Ask a person ``question`` (``choices``: the answers offered; none: a free
        answer). The task waits for the answer once this run ends."""
        task = (await self.bind(task_id)).task
        await self._store.ask(task.id, question, choices, actor=ACTOR, run_id=self._run_id)
        return (
            f"asked on task #{task.id}; a person will answer. End your turn now without closing the task: "
            "the answer comes back to you as your next message (or in the prompt of a new run)"
        )

    async def add_followup(
        self,
        subject: str,
        description: str = "",
        priority: int = 5,
        skills: Sequence[str] = (),
        task_id: int | None = None,
    ) -> str:
        """A new task that follows up this one, in the same workspace (its subject
        and priority are checked by the store, as every new task's; its priority is
        never more urgent than this task's nor ``[limits] agent_priority_floor``:
        raised to that, and the answer says so)."""
        for name in skills:
            problem = skill_name_problem(name)
            if problem is not None:
                raise InputError(problem)
        check_skills_exist(self._settings.skills_dir, skills)
        bound = await self.bind(task_id)
        parent = bound.task
        new = NewTask(
            subject=subject,
            description=description,
            priority=priority,
            skills=tuple(skills),
            source=f"task:{parent.id}",
            parent_id=parent.id,
            workdir=self._inherited_workdir(bound),
            # a task a person had to approve cannot spawn one that skips that
            requires_approval=parent.approval is not None,
        )
        added = await self._store.add_task(new, actor=ACTOR, run_id=self._run_id)
        clamped = f"; {added.clamped}" if added.clamped else ""
        return f"created task #{added.task_id} (a follow-up of task #{parent.id}){clamped}"

    def _inherited_workdir(self, bound: Bound) -> str | None:
        """The follow-up's workspace: its parent's named one (the task's own, or the
        one its skill or the configuration chose for this run); None when the parent
        worked in a scratch folder or a clone (the follow-up gets one of its own:
        a clone of the same repository, from the parent's result)."""
        if bound.task.worktree is not None:
            return None
        if bound.task.workdir is not None:
            return bound.task.workdir
        workspace = bound.run.workspace
        if workspace is None or workspace == str(scratch_path(self._settings.home, bound.task.id)):
            return None
        return workspace


def _result(task: Task) -> str:
    return f" (result: {task.result_summary})" if task.result_summary else ""
