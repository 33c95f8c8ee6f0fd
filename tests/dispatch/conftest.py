"""Fixtures for dispatcher tests: a home's settings, its real store, a dispatcher
driven by a ``FakeExecutor`` and the manual clock."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path

import pytest

from dispatch.executors import RunContext
from dispatch.executors.fake import FakeExecutor, Handler
from dispatch.loop import Dispatcher
from tests.dispatch.permissive import Permissive
from vigil.clock import ManualClock
from vigil.config import Settings, load_settings
from vigil.models import Outcome, OutcomeKind, Task
from vigil.store.sqlite import SqliteStore

WORKER = "test-host:1:abc"


@pytest.fixture
def settings(home: Path) -> Settings:
    """The test home's settings with a fast heartbeat and round backoff figures."""
    base = load_settings(home)
    dispatch = replace(
        base.dispatch,
        heartbeat_ms=50,
        lease_ms=60_000,
        retry_backoff_ms=10_000,
        retry_backoff_max_ms=600_000,
        usage_limit_fallback_ms=3_600_000,
        shutdown_grace_ms=5_000,
        max_retries=2,
    )
    return replace(base, dispatch=dispatch)


@pytest.fixture
async def db(settings: Settings, clock: ManualClock) -> AsyncIterator[SqliteStore]:
    """The home's own store (the agent's `vigil` calls reach the same file)."""
    store = await SqliteStore.open(settings.store.path, clock=clock, default_max_retries=settings.dispatch.max_retries)
    yield store
    await store.close()


def succeeds_setting(event: asyncio.Event) -> Handler:
    """A handler that sets ``event`` (the test's sign that a task ran) and succeeds."""

    def handler(task: Task, ctx: RunContext) -> Outcome:
        event.set()
        return Outcome(OutcomeKind.SUCCESS)

    return handler


MakeDispatcher = Callable[..., tuple[Dispatcher, FakeExecutor]]


@pytest.fixture
def make_dispatcher(db: SqliteStore, settings: Settings, clock: ManualClock) -> MakeDispatcher:
    """``make_dispatcher(handler)`` → a dispatcher whose every executor is a
    ``FakeExecutor(handler)``, guarded by ``Permissive`` unless ``guard=`` says
    otherwise; ``names`` collects the executor names asked for."""

    def make(handler: Handler, *, names: list[str] | None = None, **kwargs: object) -> tuple[Dispatcher, FakeExecutor]:
        fake = FakeExecutor(handler)

        def factory(name: str) -> FakeExecutor:
            if names is not None:
                names.append(name)
            return fake

        s = kwargs.pop("settings", settings)
        kwargs.setdefault("guard", Permissive())
        dispatcher = Dispatcher(db, s, factory, clock, WORKER, rng=random.Random(7), **kwargs)  # type: ignore[arg-type]
        return dispatcher, fake

    return make


def write_skill(home: Path, name: str, front_matter: str, body: str = "Do the thing.") -> None:
    folder = home / "skills" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(f"---\n{front_matter}\n---\n{body}\n", encoding="utf-8")
