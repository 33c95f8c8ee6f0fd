"""Contract: a claim carries the task's notes, and ``finish_and_claim(if_version=…)``
claims only while no other connection has committed since the version was read."""

from __future__ import annotations

from tests.store.conftest import StoreOpener
from tests.store.contract import claim, new, success
from vigil.models import TaskStatus
from vigil.store import Store


async def test_a_claim_carries_the_tasks_notes_oldest_first(store: Store) -> None:
    task_id = (await store.add_task(new("with notes"))).task_id
    assert task_id is not None
    await store.add_note(task_id, "first", author="human")
    await store.add_note(task_id, "second", author="agent")

    current = await claim(store, "w1")

    assert current.notes is not None
    assert [(n.text, n.author) for n in current.notes] == [("first", "human"), ("second", "agent")]
    assert list(current.notes) == await store.list_notes(task_id)


async def test_a_claim_of_a_task_without_notes_carries_an_empty_tuple(store: Store) -> None:
    await store.add_task(new("no notes"))
    assert (await claim(store, "w1")).notes == ()


async def test_versioned_loop_values_are_the_loop_values(store: Store, backend: str) -> None:
    await store.set_loop_values({"gate": {"state": "running"}, "x": 1})

    values, version = await store.versioned_loop_values()

    assert values == await store.loop_values()
    if backend == "sqlite":
        # SQLite's version is its data_version; PostgreSQL's is a loop-state version
        # that only finish_and_claim(if_version=…) reads (the two tests below).
        assert version == await store.data_version()


async def test_if_version_unchanged_claims_the_next_task(store: Store) -> None:
    await store.add_task(new("first"))
    await store.add_task(new("second"))
    current = await claim(store, "w1")
    _, version = await store.versioned_loop_values()
    await store.set_loop_values({"heartbeat": 1})  # this connection's own commit: no change of version

    finished, nxt = await store.finish_and_claim(
        current, success(), TaskStatus.COMPLETED, worker="w1", lease_ms=1000, if_version=version
    )

    assert finished.status is TaskStatus.COMPLETED
    assert nxt is not None
    assert nxt.task.subject == "second"


async def test_if_version_changed_finishes_but_claims_nothing(store: Store, connect_store: StoreOpener) -> None:
    await store.add_task(new("first"))
    second = (await store.add_task(new("second"))).task_id
    current = await claim(store, "w1")
    _, version = await store.versioned_loop_values()
    other = await connect_store()
    await other.set_loop_values({"gate": {"state": "paused"}})  # another process commits

    finished, nxt = await store.finish_and_claim(
        current, success(), TaskStatus.COMPLETED, worker="w1", lease_ms=1000, if_version=version
    )

    assert finished.status is TaskStatus.COMPLETED
    assert nxt is None
    assert second is not None
    assert (await store.get_task(second)).status is TaskStatus.PENDING
    assert await store.open_runs() == []
