"""Contract: a claim carries the task's notes."""

from __future__ import annotations

from tests.store.contract import claim, new
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
