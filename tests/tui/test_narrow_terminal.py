"""The dashboard at 80 columns in a real terminal (tmux): the header says what
became of a background loop and keeps a pause's reason whole beside the marks;
the footer keeps the keys that apply (a waiting task's w Answer) and always ends
with Quit and Help, a search box's focus included."""

from __future__ import annotations

import asyncio
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import VigilRunner
from tests.tui.test_terminal import UNSIZED, Pane, started, wait_screen
from vigil.models import NewTask, Outcome, OutcomeKind
from vigil.store.sqlite import SqliteStore

pytestmark = [pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"), pytest.mark.slow]


@contextmanager
def tui(home: Path, tmp_path: Path, *options: str) -> Iterator[Pane]:
    command = f"env {UNSIZED} TERM=xterm-256color {sys.executable} -m vigil --home {home} tui {' '.join(options)}"
    with started(tmp_path, "vigil-80", 80, 24, f"{command}; sleep 60") as pane:
        yield pane


def footer(screen: str) -> str:
    lines = screen.rstrip().splitlines()
    return lines[-1].rstrip() if lines else ""


def waiting_task(home: Path) -> int:
    """A task whose agent asked a question: it waits for an answer."""

    async def make() -> int:
        store = await SqliteStore.open(home / "data" / "vigil.db")
        try:
            await store.add_task(NewTask("Deploy the release"))
            claim = await store.claim_next(worker="w", lease_ms=600_000)
            assert claim is not None
            await store.ask(claim.task.id, "staging or prod?", ("staging", "prod"), actor="agent")
            await store.record(claim, Outcome(OutcomeKind.SUCCESS), worker="w")
            return claim.task.id
        finally:
            await store.close()

    return asyncio.run(make())


def test_a_waiting_tasks_footer_offers_answer_and_not_keys_that_do_not_apply(home: Path, tmp_path: Path) -> None:
    task_id = waiting_task(home)
    with tui(home, tmp_path) as pane:
        wait_screen(pane, lambda s: "Deploy the release" in s, "the waiting task")
        pane.keys("Enter")
        screen = wait_screen(pane, lambda s: f"#{task_id} Deploy the release" in s, "the task screen")
        line = footer(screen)
        assert "w Answer" in line
        assert "a Approve" not in line
        assert "D Diff" not in line
        assert line.endswith("^q Quit  ? Help")


def test_a_search_box_with_focus_keeps_help_in_the_footer(home: Path, tmp_path: Path) -> None:
    with tui(home, tmp_path) as pane:
        wait_screen(pane, lambda s: "Help" in footer(s), "the dashboard")
        pane.keys("/")
        screen = wait_screen(pane, lambda s: "? Help" not in footer(s), "the search box focused")
        assert footer(screen).endswith("^q Quit  F1 Help")  # ? would type into the box
        pane.keys("F1")
        wait_screen(pane, lambda s: "Keys" in s and "Filter" in s, "the help, opened by F1 from the box")


def test_the_header_says_first_that_the_background_loop_exited(home: Path, tmp_path: Path) -> None:
    config = home / "vigil.toml"
    config.write_text(config.read_text() + '\n[[sensors]]\nuse = "inbx"\n')  # vigil run refuses it: exit 2
    with tui(home, tmp_path, "--with-loop") as pane:
        screen = wait_screen(pane, lambda s: "exited" in s, "the loop's exit")
        assert screen.splitlines()[1].startswith(" ✗ background loop exited with code 2; see logs/loop.out")


def test_marks_never_hide_the_reason_of_a_pause(home: Path, tmp_path: Path, vigil: VigilRunner) -> None:
    vigil("task", "add", "one", check=True)
    reason = "upgrading the database server this evening"
    vigil("pause", "--reason", reason, check=True)
    with tui(home, tmp_path) as pane:
        wait_screen(pane, lambda s: reason in s, "the pause")
        pane.keys("Space")
        screen = wait_screen(pane, lambda s: "1 marked" in s, "the mark")
        assert any(line.strip() == f"‖ loop paused: {reason}" for line in screen.splitlines()), screen
