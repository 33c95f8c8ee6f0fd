"""The TUI's writes: every one a conditional store operation, reported plainly.

When the task changed state between the keypress and the write (the dispatcher
claimed it, another person finished it), the store raises ``InvalidTransition``
and nothing is written; the report then says so in words, e.g.
"#412 already started, not deferred". Bulk actions run one task at a time, each
in its own transaction, and report each task.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from tui.context import Context
from tui.times import Times, relative
from vigil.errors import InvalidTransition, VigilError
from vigil.models import MAX_PRIORITY, MIN_PRIORITY, Task, TaskStatus
from vigil.render import retried
from vigil.store import Store

if TYPE_CHECKING:
    from tui.forms import DeferChoice

ACTOR = "human"


class Action(StrEnum):
    RAISE = "raise"  # more urgent: priority - 1
    LOWER = "lower"  # less urgent: priority + 1
    DEFER = "defer"
    CANCEL = "cancel"
    RETRY = "retry"
    APPROVE = "approve"  # awaiting approval → pending; awaiting review → completed
    REJECT = "reject"  # awaiting approval → canceled; awaiting review → pending again (the reason a note)


KEY_ACTIONS = {str(action): action for action in Action}  # a screen's action name (its key's) → the write


PAST = {
    Action.RAISE: "raised",
    Action.LOWER: "lowered",
    Action.DEFER: "deferred",
    Action.CANCEL: "canceled",
    Action.RETRY: "retried",
    Action.APPROVE: "approved",
    Action.REJECT: "rejected",
}

# Which statuses each action applies to (for dimming keys and for previews).
APPLIES = {
    Action.RAISE: frozenset({TaskStatus.PENDING, TaskStatus.BLOCKED, TaskStatus.WAITING}),
    Action.LOWER: frozenset({TaskStatus.PENDING, TaskStatus.BLOCKED, TaskStatus.WAITING}),
    Action.DEFER: frozenset({TaskStatus.PENDING, TaskStatus.BLOCKED}),
    Action.CANCEL: frozenset({TaskStatus.PENDING, TaskStatus.BLOCKED, TaskStatus.WAITING, TaskStatus.ACTIVE}),
    Action.RETRY: frozenset({TaskStatus.FAILED, TaskStatus.CANCELED}),
    Action.APPROVE: frozenset({TaskStatus.BLOCKED}),  # and only while approval is pending
    Action.REJECT: frozenset({TaskStatus.BLOCKED}),
}

_STATE_WORDS = {
    "active": "already started",
    "completed": "already completed",
    "failed": "already failed",
    "canceled": "already canceled",
    "pending": "still pending",
    "blocked": "blocked",
    "waiting": "waiting for an answer",
}


def applies(action: Action, task: Task) -> bool:
    if action is Action.RAISE:
        return task.status in APPLIES[action] and task.priority > MIN_PRIORITY
    if action is Action.LOWER:
        return task.status in APPLIES[action] and task.priority < MAX_PRIORITY
    if action is Action.CANCEL:
        return task.status in APPLIES[action] and not task.cancel_requested
    if action is Action.APPROVE or action is Action.REJECT:
        return awaits_a_decision(task)
    return task.status in APPLIES[action]


def awaits_a_decision(task: Task) -> bool:
    """Awaiting a person's approval to run, or the review of its result; a result on
    a branch is reviewed in its Diff view instead, where an approval merges it."""
    return task.awaiting_approval or (task.awaiting_review and task.worktree is None)


def decision_effect(action: Action, tasks: Sequence[Task]) -> str:
    """What approving (or rejecting) ``tasks`` does, for the confirmation."""
    reviews = sum(1 for task in tasks if task.awaiting_review)
    if action is Action.APPROVE:
        if not reviews:
            return "It becomes pending and runs when due. (R rejects it instead.)"
        if reviews == len(tasks):
            return "Its result is accepted: it completes. (R sends it back instead.)"
        return "A task awaiting approval becomes pending; a reviewed result completes. (R rejects instead.)"
    if not reviews:
        return "It is canceled, with the reason."
    if reviews == len(tasks):
        return "It goes back to the queue, the reason a note for its agent."
    return "Awaiting approval: canceled; awaiting review: back to the queue. The reason is kept."


@dataclass(frozen=True)
class Report:
    """What one write did to one task. ``ok`` False: nothing changed."""

    task_id: int
    ok: bool
    message: str


def refusal(err: InvalidTransition, action: Action) -> str:
    """ "#412 already started, not deferred"; for an approval whose task another
    person or process handled first, "#12 no longer waits for approval or review
    (it is pending), not approved"."""
    if action is Action.APPROVE or action is Action.REJECT:
        # The store words it "<status> and not awaiting approval or review".
        status = err.status.split(" and ", 1)[0]
        return f"#{err.task_id} no longer waits for approval or review (it is {status}), not {PAST[action]}"
    words = _STATE_WORDS.get(err.status, f"is {err.status}")
    return f"#{err.task_id} {words}, not {PAST[action]}"


async def apply(
    store: Store,
    action: Action,
    task: Task,
    *,
    choice: DeferChoice | None = None,
    reason: str | None = None,
    times: Times | None = None,
    now_ms: int = 0,
    actor: str = ACTOR,
) -> Report:
    """Run ``action`` on ``task`` (as the TUI last saw it) through the store's
    conditional operation. ``choice`` is for a defer (later by, or until), ``reason``
    for a reject; ``times`` and ``now_ms`` write the new due time as every screen
    writes times; ``actor`` is who the audit trail names. Never raises
    ``VigilError``: failures become a report."""
    try:
        if action is Action.RAISE or action is Action.LOWER:
            # a step from the stored priority, in the store's transaction
            was, done = await store.shift_priority(task.id, -1 if action is Action.RAISE else 1, actor=actor)
            if done.priority == was:
                limit = "most" if action is Action.RAISE else "least"
                return Report(task.id, False, f"#{task.id} is already at the {limit} urgent priority")
            return Report(task.id, True, f"#{done.id} priority {was} → {done.priority}")
        if action is Action.DEFER:
            if choice is None:
                raise ValueError("defer needs a choice")
            return await _defer(store, task, choice, times or Times(), now_ms, actor=actor)
        if action is Action.CANCEL:
            done = await store.cancel(task.id, actor=actor)
            if done.status is TaskStatus.ACTIVE:
                return Report(task.id, True, f"#{done.id} is running: cancel requested")
            return Report(task.id, True, f"#{done.id} canceled")
        if action is Action.APPROVE:
            done = await store.approve(task.id, actor=actor)
            return Report(task.id, True, f"#{done.id} approved; {done.status}")
        if action is Action.REJECT:
            if reason is None:
                raise ValueError("reject needs a reason")
            done = await store.reject(task.id, reason, actor=actor)
            return Report(task.id, True, f"#{done.id} rejected; {done.status}")
        done = await store.retry(task.id, actor=actor)
        return Report(task.id, True, retried(done))
    except InvalidTransition as err:
        return Report(task.id, False, refusal(err, action))
    except VigilError as err:
        return Report(task.id, False, f"#{task.id}: {err}")


async def _defer(store: Store, task: Task, choice: DeferChoice, times: Times, now_ms: int, *, actor: str) -> Report:
    """Later by ``choice.by_ms`` than the task is due now, or until ``choice.until_ms``."""
    if choice.by_ms is not None:
        done = await store.defer_by(task.id, choice.by_ms, actor=actor)
    else:
        assert choice.until_ms is not None
        done = await store.defer(task.id, choice.until_ms, actor=actor)
    due = done.scheduled_for
    return Report(task.id, True, f"#{done.id} deferred {choice.label}: due {times.at(due)} ({relative(due, now_ms)})")


async def apply_many(
    ctx: Context, action: Action, tasks: Sequence[Task], *, choice: DeferChoice | None = None, reason: str | None = None
) -> list[Report]:
    """``apply`` to each task in turn, after every write the TUI started earlier."""
    async with ctx.writes:
        now = ctx.clock.now_ms()
        return [
            await apply(
                ctx.store, action, task, choice=choice, reason=reason, times=ctx.times, now_ms=now, actor=ctx.actor
            )
            for task in tasks
        ]


def summarize(reports: Sequence[Report]) -> tuple[str, bool]:
    """One notification text for a batch, and whether everything went through."""
    if len(reports) == 1:
        return reports[0].message, reports[0].ok
    done = sum(r.ok for r in reports)
    lines = [f"{done} of {len(reports)} done", *[r.message for r in reports if not r.ok][:8]]
    return "\n".join(lines), done == len(reports)
