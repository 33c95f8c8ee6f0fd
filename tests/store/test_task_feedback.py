"""Contract: what a sensor reports on a task's pull request (``TaskFeedback``) is
applied in the transaction of its run: a send-back puts a completed task back in
the queue with the note, only for the task whose pull request it names, and never
breaks the run when another open task holds the task's key."""

from __future__ import annotations

from vigil.models import GitHubLink, NewTask, Outcome, OutcomeKind, SensorRun, TaskFeedback
from vigil.store import Store

LINK = GitHubLink("octo/demo", issue=7, pull=12, branch="vigil/1-fix")
RUN = SensorRun(started_at=1_000, duration_ms=5, status="ok", next_due_at=61_000)


async def completed_with_pull(store: Store) -> int:
    added = await store.add_task(NewTask("Fix it", source="sensor:github", source_key="github:octo/demo#7"))
    assert added.task_id is not None
    claim = await store.claim_next(worker="d", lease_ms=60_000)
    assert claim is not None
    await store.record(claim, Outcome(OutcomeKind.SUCCESS, summary="fixed", review=True), worker="d")
    await store.approve(added.task_id, actor="human")
    await store.set_github(added.task_id, LINK)
    return added.task_id


def feedback(task_id: int, *, pull: int = 12, send_back: bool = True) -> TaskFeedback:
    return TaskFeedback(task_id, "octo/demo", pull, "changes requested", f"review of #{pull}", send_back)


async def test_a_send_back_requeues_the_completed_task_with_its_note_and_the_sensors_state(store: Store) -> None:
    task_id = await completed_with_pull(store)
    items = [feedback(task_id, pull=13), feedback(task_id)]  # #13 is not this task's pull request
    await store.record_sensor_run("github", RUN, [], {"seen": ["review:1"]}, items)
    task = await store.get_task(task_id)
    assert (task.status, task.review) == ("pending", "rejected")
    assert [n.text for n in await store.list_notes(task_id)] == ["review of #12"]
    events = [(e.kind, e.from_value, e.to_value) for e in await store.list_events(task_id) if e.kind == "github"]
    assert events == [("github", "octo/demo#12", "changes requested")]
    state = await store.sensor_state("github")
    assert state is not None
    assert state.state == {"seen": ["review:1"]}


async def test_a_record_only_item_leaves_the_task_completed(store: Store) -> None:
    task_id = await completed_with_pull(store)
    await store.record_sensor_run("github", RUN, [], None, [feedback(task_id, send_back=False)])
    assert (await store.get_task(task_id)).status == "completed"
    assert [n.text for n in await store.list_notes(task_id)] == ["review of #12"]


async def test_another_open_task_with_the_key_keeps_it_completed_and_the_run_stored(store: Store) -> None:
    task_id = await completed_with_pull(store)
    again = await store.add_task(NewTask("Fix it again", source="sensor:github", source_key="github:octo/demo#7"))
    assert again.task_id is not None
    await store.record_sensor_run("github", RUN, [], {"seen": ["review:2"]}, [feedback(task_id)])
    assert (await store.get_task(task_id)).status == "completed"
    assert [n.text for n in await store.list_notes(task_id)] == ["review of #12"]
    state = await store.sensor_state("github")
    assert state is not None
    assert state.state == {"seen": ["review:2"]}
