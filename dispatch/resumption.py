"""Whether an attempt continues an earlier run's agent session, and with what.

The attempt after a person answered the agent's question resumes the session that
asked, with the answer as the new message. The attempt after a run that ended
early (``transient``, ``timeout``: a stalled run ends as one, ``interrupted``)
resumes it too, with a word on what happened, when ``resume_after_failure`` allows
(the task's first skill that sets it, else ``[executors.<name>]``). Only a session
of the same executor, in the same workspace, can be resumed; otherwise (and when
the CLI refuses: an expired session, another account) the attempt runs afresh, its
prompt holding the question, the answer and the earlier attempts.

The attempt after a person sent the task's result back (``vigil task reject``
with a reason, a merge conflict at approval) or its pull request came back
(changes requested, review comments, failed checks: ``vigil.store.feedback``)
resumes the session of the run that made that result, the notes written since
that run as the new message: the agent carries on with its own conversation,
in a fresh clone at its own result, so what it pushes next goes to the same
branch and pull request.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from dispatch.executors import Resume
from dispatch.prompt import answer_message, continue_message, sent_back_message
from dispatch.skills import Skill
from vigil.config import AgentCliSettings
from vigil.models import ApprovalState, Note, OutcomeKind, Run, Task

AGENT = "agent"  # the author of the agent's own notes (vigil.agent_channel)
RESUMABLE_AFTER = frozenset({OutcomeKind.TRANSIENT, OutcomeKind.TIMEOUT, OutcomeKind.INTERRUPTED})


def resume_after_failure(cli: AgentCliSettings | None, skills: Sequence[Skill]) -> bool:
    """Whether an early-ended run's session is resumed: the first skill that says,
    else the executor's settings (None: an executor without sessions: never)."""
    chosen = next((s.resume_after_failure for s in skills if s.resume_after_failure is not None), None)
    if chosen is not None:
        return chosen
    return cli is not None and cli.resume_after_failure


def resume_for(
    task: Task,
    previous_runs: Sequence[Run],
    executor: str,
    workspace: Path,
    *,
    after_failure: bool,
    notes: Sequence[Note] = (),
) -> Resume | None:
    """The session the attempt continues, from the task's last recorded run; None:
    a fresh session. ``notes``: the task's notes (those written after that run
    are what a task sent back is told)."""
    finished = [r for r in previous_runs if r.finished_at is not None]
    if not finished:
        return None
    last = max(finished, key=lambda r: r.attempt)
    if last.session_id is None or last.executor != executor or last.workspace != str(workspace):
        return None
    if last.outcome == OutcomeKind.ASKED and task.answer is not None and task.asked_run == last.id:
        return Resume(last.session_id, answer_message(task), last.id)
    if after_failure and last.outcome in RESUMABLE_AFTER:
        return Resume(last.session_id, continue_message(task, last), last.id)
    if last.outcome == OutcomeKind.SUCCESS and task.review == ApprovalState.REJECTED:
        ended = last.finished_at or 0
        since = [n for n in notes if n.at >= ended and n.author != AGENT]
        if since:
            return Resume(last.session_id, sent_back_message(task, since), last.id)
    return None
