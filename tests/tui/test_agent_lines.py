"""What the agent CLI says reaches the TUI: the live retry note in the header and
the refused tool calls under their run on the task screen."""

from __future__ import annotations

from dataclasses import replace

from rich.console import Console

from tests.tui.test_filters import BASE
from tui.header import loop_text
from tui.task_screen import runs_table
from tui.times import Times
from vigil.liveness import loop_health
from vigil.models import HEARTBEAT_KEY, DispatcherHeartbeat, Run, TaskStatus

NOW = 1_767_100_000_000


def test_the_header_shows_the_agents_live_note_while_it_runs() -> None:
    active = (replace(BASE, id=7, status=TaskStatus.ACTIVE, started_at=NOW - 5_000),)
    beat = DispatcherHeartbeat("h:1:x", 1, "h", NOW, NOW, "running", 7, NOW - 5_000, "API retry 3/10, next in 9 s")
    health = loop_health({HEARTBEAT_KEY: beat.to_json()}, NOW, 15_000)
    assert "API retry 3/10, next in 9 s" in loop_text(health, None, NOW, active=active).plain
    quiet = DispatcherHeartbeat("h:1:x", 1, "h", NOW, NOW, "running", 7, NOW - 5_000)
    health = loop_health({HEARTBEAT_KEY: quiet.to_json()}, NOW, 15_000)
    assert "API retry" not in loop_text(health, None, NOW, active=active).plain


def test_the_runs_table_lists_each_denial_under_its_run() -> None:
    run = Run(
        id=1, task_id=7, attempt=1, started_at=NOW, finished_at=NOW + 1000, outcome="refused", error="not allowed",
        exit_code=0, cost_usd=0.0, api_cost_usd=0.0, tokens_in=0, tokens_out=0, cache_read_tokens=0,
        cache_write_tokens=0, model=None, session_id=None, transcript_path=None, executor="claude", claimed_by=None,
        pid=None, pgid=None, proc_start=None, permission_denials=("Bash: vigil task close 7 --status completed",),
    )  # fmt: skip
    console = Console(width=200, record=True)
    console.print(runs_table((run,), Times("UTC")))
    assert "denied: Bash: vigil task close 7 --status completed" in console.export_text()
