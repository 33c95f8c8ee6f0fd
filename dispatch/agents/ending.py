"""What the agent CLIs' executors share: their constructor and the end of a run.

A run ends early (the CLI never started, stalled or ran out of time:
``ended_early``), else over budget (stopped once its meter passed its limit), else
as the CLI's stream says (its ``classify``, plus what only its executor knows).
Each executor then adds what its CLI reported (cost, tokens, model, session,
refusals, limits) and the meter charges what it metered to a run whose CLI never
said (``RunMeter.charge``). A cancel raises ``CancelledError`` before all this.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from dispatch.executors import DEFAULT_GRACE_S, RunContext
from dispatch.executors.answer import detail_of, summary_of
from dispatch.executors.child import ChildResult, ended_early
from vigil.clock import SystemClock
from vigil.config import Settings
from vigil.models import Outcome, OutcomeKind


@dataclass(frozen=True)
class Verdict:
    """How a run that ended of itself ended, by its CLI's stream."""

    kind: OutcomeKind
    error: str | None = None
    retry_at: int | None = None  # epoch ms of a usage limit's reset; None: not named


class AgentExecutor:
    """An agent CLI's executor; its ``run`` (argv, stream, usage and cost) is its own."""

    name: str

    def __init__(
        self, settings: Settings, *, grace_s: float = DEFAULT_GRACE_S, now_ms: Callable[[], int] | None = None
    ) -> None:
        self.settings = settings
        self.grace_s = grace_s
        # only to date a reset given as a clock time ("resets 4:50pm"): the next such moment after now
        self.now_ms = now_ms or SystemClock().now_ms

    def ended(self, result: ChildResult, ctx: RunContext, answer: str, judge: Callable[[int], Verdict]) -> Outcome:
        """How the run ended (the module's docstring), spending nothing: ``answer``
        is the agent's; ``judge`` reads the stream at a moment (epoch ms)."""
        early = ended_early(result, ctx.timeout_s, str(ctx.transcript_path), ctx.stall_timeout_s)
        if early is not None:
            return replace(early, detail=detail_of(answer))
        if result.stopped and ctx.meter.over:
            verdict = Verdict(OutcomeKind.OVER_BUDGET, ctx.meter.over_budget_error())
        else:
            verdict = judge(self.now_ms())
        return Outcome(
            kind=verdict.kind,
            summary=summary_of(answer if verdict.kind is OutcomeKind.SUCCESS else (verdict.error or answer)),
            detail=detail_of(answer),
            error=verdict.error,
            exit_code=result.exit_code,
            transcript_path=str(ctx.transcript_path),
            retry_at=verdict.retry_at,
        )
