"""``FakeExecutor(handler)``: an executor for tests, like httpx's ``MockTransport``.

The handler decides the outcome; every call is recorded, so a test can assert what
the dispatcher handed over (the task, the prompt, the environment, the timeout).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from dispatch.executors import RunContext
from vigil.models import Outcome, Task

Handler = Callable[[Task, RunContext], Outcome | Awaitable[Outcome]]


@dataclass
class FakeExecutor:
    """Runs no process: returns (or awaits) ``handler(task, ctx)``. ``calls`` holds
    every ``(task, ctx)`` in order, appended before the handler runs."""

    handler: Handler
    name: str = "fake"
    calls: list[tuple[Task, RunContext]] = field(default_factory=list)

    async def run(self, task: Task, ctx: RunContext) -> Outcome:
        self.calls.append((task, ctx))
        result = self.handler(task, ctx)
        if inspect.isawaitable(result):
            return await result
        return result
