"""The inbox sensor on a real folder: settle time, done/, collisions, binary, huge,
vanishing files."""

from __future__ import annotations

import importlib
import os
import time
from pathlib import Path
from typing import Any

import pytest

from sensors.api import FoundTask, SensorContext
from sensors.builtin.inbox import inbox
from sensors.execution import SensorReport
from tests.sensors.conftest import RunnerFactory, SpecFactory
from vigil.models import Task
from vigil.store.sqlite import SqliteStore

# The package re-exports the function under the module's name; this is the module.
inbox_module = importlib.import_module("sensors.builtin.inbox")


def drop(folder: Path, name: str, content: bytes | str, age_s: float = 60) -> Path:
    """A file whose last write was ``age_s`` seconds ago (settled unless age is ~0)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    past = time.time() - age_s
    os.utime(path, (past, past))
    return path


@pytest.fixture
def box(tmp_path: Path) -> Path:
    return tmp_path / "inbox"


async def inbox_tasks(store: SqliteStore) -> list[Task]:
    return [t for t in await store.list_tasks() if t.source == "sensor:inbox"]


async def other(ctx: SensorContext) -> list[FoundTask]:
    return [FoundTask(key="other", subject="the other sensor ran")]


async def run_inbox(make_runner: RunnerFactory, make_spec: SpecFactory, **options: Any) -> SensorReport:
    """One inbox run beside another sensor, which must store its task whatever the
    inbox meets."""
    spec = make_spec(inbox, options={"path": "inbox", **options})
    report, beside = await make_runner(spec, make_spec(other)).run_now()
    assert beside.ok
    assert beside.created + beside.ignored == 1
    return report


async def test_a_dropped_file_becomes_a_task_and_moves_to_done(
    store: SqliteStore, box: Path, make_runner: RunnerFactory, make_spec: SpecFactory
) -> None:
    drop(box, "login.md", "\n  Fix the login page  \nIt 500s when the password has a quote.\n")
    report = await run_inbox(make_runner, make_spec)

    assert (report.status, report.created) == ("ok", 1)
    task = (await inbox_tasks(store))[0]
    assert task.subject == "Fix the login page"
    assert "It 500s when the password has a quote." in task.description
    assert task.source == "sensor:inbox"
    assert not (box / "login.md").exists()
    assert (box / "done" / "login.md").read_text().startswith("\n  Fix the login page")
    again = await run_inbox(make_runner, make_spec)
    assert (again.created, again.ignored) == (0, 0)  # nothing left to read


async def test_files_being_written_are_not_read(
    store: SqliteStore, box: Path, make_runner: RunnerFactory, make_spec: SpecFactory
) -> None:
    drop(box, "fresh.txt", "half of a", age_s=0)  # modified just now: still being written?
    drop(box, "upload.txt.part", "partial", age_s=600)
    drop(box, ".hidden", "editor temp", age_s=600)
    (box / "subfolder").mkdir()
    report = await run_inbox(make_runner, make_spec, settle="30s")
    assert report.created == 0
    assert sorted(p.name for p in box.iterdir()) == [".hidden", "fresh.txt", "subfolder", "upload.txt.part"]

    os.rename(box / "upload.txt.part", box / "upload.txt")  # rename into place: now it is ready
    report = await run_inbox(make_runner, make_spec, settle="30s")
    assert report.created == 1
    assert (await inbox_tasks(store))[0].subject == "partial"


async def test_name_collisions_in_done_get_a_suffix(
    store: SqliteStore, box: Path, make_runner: RunnerFactory, make_spec: SpecFactory
) -> None:
    drop(box, "note.txt", "first")
    await run_inbox(make_runner, make_spec)
    drop(box, "note.txt", "second", age_s=30)
    await run_inbox(make_runner, make_spec)
    drop(box, "note.txt", "third", age_s=20)
    await run_inbox(make_runner, make_spec)
    done = box / "done"
    assert sorted(p.name for p in done.iterdir()) == ["note-1.txt", "note-2.txt", "note.txt"]
    assert (done / "note-2.txt").read_text() == "third"
    assert sorted(t.subject for t in await inbox_tasks(store)) == ["first", "second", "third"]


async def test_binary_empty_and_huge_files_are_handled_clearly(
    store: SqliteStore, box: Path, make_runner: RunnerFactory, make_spec: SpecFactory
) -> None:
    drop(box, "photo.jpg", b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" * 100)
    drop(box, "latin1.txt", "caf\xe9".encode("latin-1"))
    drop(box, "empty.txt", b"")
    huge = drop(box, "huge.log", b"")
    with huge.open("wb") as handle:  # a sparse 3 GiB file: only the head may be read
        handle.truncate(3 * 1024**3)
        handle.seek(0)
        handle.write(b"huge log headline\n" + b"x" * 5000)
    past = time.time() - 60
    os.utime(huge, (past, past))

    report = await run_inbox(make_runner, make_spec, max_bytes=1000)
    assert report.created == 4
    subjects = {t.subject: t for t in await inbox_tasks(store)}
    assert "Binary file in inbox: photo.jpg (1.1 KiB)" in subjects
    assert "Binary file in inbox: latin1.txt (4 bytes)" in subjects
    assert "Inbox file empty.txt (empty)" in subjects
    big = subjects["huge log headline"]
    assert "[cut: first 1000 bytes of 3.0 GiB]" in big.description
    assert len(big.description) < 1300
    assert sorted(p.name for p in (box / "done").iterdir()) == ["empty.txt", "huge.log", "latin1.txt", "photo.jpg"]


async def test_a_file_vanishing_mid_read_is_skipped(
    store: SqliteStore, box: Path, make_runner: RunnerFactory, make_spec: SpecFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    drop(box, "a.txt", "stays")
    drop(box, "b.txt", "vanishes")
    real_read = inbox_module._read_head

    def read_after_delete(path: Path, max_bytes: int) -> Any:
        if path.name == "b.txt":
            path.unlink()  # another process takes it between listing and reading
        return real_read(path, max_bytes)

    monkeypatch.setattr(inbox_module, "_read_head", read_after_delete)
    report = await run_inbox(make_runner, make_spec)
    assert (report.status, report.created) == ("ok", 1)
    assert [t.subject for t in await inbox_tasks(store)] == ["stays"]


async def test_a_crash_before_the_move_does_not_duplicate_the_task(
    store: SqliteStore, box: Path, make_runner: RunnerFactory, make_spec: SpecFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    drop(box, "once.txt", "only once")
    monkeypatch.setattr(inbox_module, "move_to_done", lambda path, done: None)  # the move is lost
    await run_inbox(make_runner, make_spec)
    assert (box / "once.txt").exists()
    monkeypatch.undo()
    report = await run_inbox(make_runner, make_spec)
    assert (report.created, report.ignored) == (0, 1)  # same key, scope ever
    assert not (box / "once.txt").exists()
    assert len(await inbox_tasks(store)) == 1


async def test_at_most_max_tasks_files_per_run_the_rest_wait(
    store: SqliteStore, box: Path, make_runner: RunnerFactory, make_spec: SpecFactory
) -> None:
    for i in range(5):
        drop(box, f"{i}.txt", f"file {i}")
    spec = make_spec(inbox, options={"path": "inbox"}, max_tasks=3)
    first = (await make_runner(spec).run_now())[0]
    assert (first.created, first.dropped) == (3, 0)
    assert sorted(p.name for p in box.iterdir() if p.is_file()) == ["3.txt", "4.txt"]
    second = (await make_runner(spec).run_now())[0]
    assert second.created == 2
