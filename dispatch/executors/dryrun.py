"""The ``dry-run`` executor: build the prompt, keep it, run nothing, spend nothing.

The default of a new home and of the demo configuration: it shows what an agent
would be asked without needing a key or network. The prompt becomes the run's
transcript (one ``vigil.prompt`` JSON line) and the task completes.
"""

from __future__ import annotations

from dispatch.executors import RunContext
from dispatch.executors.transcript import Transcript
from vigil.models import Outcome, OutcomeKind, Task


class DryRunExecutor:
    name = "dry-run"

    async def run(self, task: Task, ctx: RunContext) -> Outcome:
        with Transcript(ctx.transcript_path, ctx.redactor) as transcript:
            transcript.record("prompt", executor=self.name, task_id=task.id, attempt=ctx.attempt, text=ctx.prompt)
        summary = f"dry run: prompt of {len(ctx.prompt)} chars built, nothing executed"
        return Outcome(
            kind=OutcomeKind.SUCCESS,
            summary=summary,
            detail=f"{summary}. The prompt is in {ctx.transcript_path}.",
            exit_code=None,
            model=None,
            transcript_path=str(ctx.transcript_path),
        )
