"""What a person does from the chat: each the same operation as the CLI's
(``vigil.review.approve`` and ``request_changes``, the store's ``retry``, ``cancel``,
``answer`` and ``add_task``, ``vigil.gate.pause`` and ``resume``), audited as
``actor``: ``human via telegram @name (user id)``.

Each returns the line the bot replies with; a refused change (``VigilError``)
becomes that line too, never an exception. A button or reply is first checked
against its card (``stale``): when the task has moved on since the card's moment
(its audit row ``ref``), the person is told what happened instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from vigil.clock import Clock, iso_utc
from vigil.config import Settings
from vigil.errors import VigilError
from vigil.gate import GateState, pause, read_gate, resume
from vigil.models import NewTask, Task, TaskStatus
from vigil.printable import printable
from vigil.review import approve, request_changes
from vigil.states import state_of
from vigil.store import Store

# what must still hold for an action to act: the state its card was about
HOLDS: dict[str, Callable[[Task], bool]] = {
    "approve": lambda t: t.awaiting_review or t.awaiting_approval,
    "reject": lambda t: t.awaiting_review or t.awaiting_approval,
    "retry": lambda t: t.status is TaskStatus.FAILED,
    "cancel": lambda t: t.status is TaskStatus.FAILED,
    "choice": lambda t: t.status is TaskStatus.WAITING,
    "answer": lambda t: t.status is TaskStatus.WAITING,
}


async def stale(store: Store, task_id: int, ref: int, action: str) -> str | None:
    """None when ``action`` on the card of ``task_id``'s moment ``ref`` may act;
    else what happened to the task since, for the person."""
    try:
        task = await store.get_task(task_id)
    except VigilError as err:
        return f"task #{task_id}: {err}"
    changes = [e for e in await store.list_events(task_id) if e.kind == "status" and e.id > ref]
    if not changes and HOLDS[action](task):
        return None
    words = state_of(task).words
    if not changes:
        return f"task #{task_id} has moved on: it is {words} now"
    since = "; ".join(f"{e.to_value} by {e.actor} at {iso_utc(e.at)}" for e in changes[-3:])
    return f"task #{task_id} has moved on: it is {words} now ({since})"


async def _doing(what: Callable[[], Awaitable[str]]) -> str:
    """The reply for ``what``; a refusal (``VigilError``) as its one line."""
    try:
        return await what()
    except VigilError as err:
        return f"not done: {err}"


async def approve_task(store: Store, task_id: int, actor: str) -> str:
    async def run() -> str:
        return (await approve(store, task_id, actor=actor)).describe()

    return await _doing(run)


async def reject_task(store: Store, task_id: int, reason: str, actor: str) -> str:
    """A result awaiting review goes back to its agent with ``reason``; a task
    awaiting approval is rejected (as ``vigil task reject``)."""

    async def run() -> str:
        task = await store.get_task(task_id)
        if task.awaiting_review:
            back = await request_changes(store, task_id, reason, actor=actor)
            return f"task #{task_id} sent back to its agent; {back.status}"
        done = await store.reject(task_id, reason, actor=actor)
        return f"task #{task_id} rejected; {done.status}"

    return await _doing(run)


async def retry_task(store: Store, task_id: int, actor: str) -> str:
    async def run() -> str:
        return f"task #{task_id} is {(await store.retry(task_id, actor=actor)).status} again"

    return await _doing(run)


async def give_up(store: Store, task_id: int, actor: str) -> str:
    """**Cancel** on a task that failed for good: it stays failed (a finished task
    cannot be canceled, by the CLI either) and is not retried; the decision is
    kept as a note by ``actor``, so the audit trail says who gave up on it."""

    async def run() -> str:
        await store.add_note(task_id, "given up from the chat: stays failed, not retried", author=actor)
        return f"task #{task_id} stays failed: given up, not retried"

    return await _doing(run)


async def answer_task(store: Store, task_id: int, text: str, actor: str) -> str:
    """As ``vigil task answer``: the task is due again and its agent's session
    resumes with the answer."""

    async def run() -> str:
        await store.answer(task_id, text, actor=actor)
        return f"task #{task_id} answered: {printable(text.strip(), keep_newlines=False)}"

    return await _doing(run)


async def add_task(store: Store, subject: str, actor: str) -> str:
    async def run() -> str:
        added = await store.add_task(NewTask(subject.strip()), actor=actor)
        return f"task #{added.task_id} added: {printable(subject.strip(), keep_newlines=False)}"

    if not subject.strip():
        return "usage: /add <subject>"
    return await _doing(run)


async def pause_loop(store: Store, reason: str, actor: str, clock: Clock) -> str:
    await pause(store, reason=reason or "paused from the chat", by=actor, now_ms=clock.now_ms())
    return "the loop is paused: it claims nothing until resumed"


async def resume_loop(store: Store, actor: str, clock: Clock, since: int | None = None) -> str:
    """Resume; with ``since`` (a Resume button), only the gate that card was about."""
    gate = await read_gate(store)
    if gate.state is GateState.RUNNING:
        by = f" (by {gate.by} at {iso_utc(gate.since)})" if gate.by else ""
        return f"the loop is already running{by}"
    if since is not None and gate.since != since:
        return f"the loop is {gate.state} again since {iso_utc(gate.since)}: {gate.reason}; see /status"
    await resume(store, by=actor, now_ms=clock.now_ms())
    return "the loop is running again"


async def status_text(store: Store, settings: Settings, clock: Clock) -> str:
    from vigil.status import gather_status, render_status

    return render_status(await gather_status(store, settings, clock.now_ms()))


def _diff_text(settings: Settings, task_id: int) -> str:
    """``vigil task diff`` (blocking: a thread runs it)."""
    from vigil.commands import diff_report
    from vigil.store import task_desk

    with task_desk(settings) as tasks:
        return diff_report(tasks, task_id, stat=False, as_json=False)


async def diff_of(settings: Settings, task_id: int) -> str:
    """The task's diff as ``vigil task diff`` prints it, or why there is none."""
    try:
        return await asyncio.to_thread(_diff_text, settings, task_id)
    except VigilError as err:
        return f"no diff: {err}"
