"""A guard that lets the loop claim and run everything: for tests of the loop that
are not about its guardrails (the real one is ``dispatch.guard.Guard``)."""

from __future__ import annotations

from collections.abc import Sequence

from dispatch.guard import ClaimDecision, Deferral
from dispatch.skills import Skill
from vigil.models import Outcome, Task


class Permissive:
    """Never paused, gated or over budget; holds back no task; learns nothing."""

    async def may_claim(self, now_ms: int) -> ClaimDecision:
        return ClaimDecision(True)

    async def after_outcome(self, task: Task, outcome: Outcome) -> None:
        return None

    async def deferred(self, task: Task, skills: Sequence[Skill]) -> Deferral | None:
        return None

    def needs_approval(self, task: Task, skills: Sequence[Skill]) -> bool:
        return False
