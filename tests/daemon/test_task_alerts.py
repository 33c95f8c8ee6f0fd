"""``[alerts] task_events``: the real `vigil run` sends task_added and task_completed
to the hook for tasks any process adds, and nothing it was not subscribed to."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from tests.conftest import VigilRunner
from tests.daemon.conftest import RunningVigil, wait_until
from tests.guard.support import RECORDER


def _config(home: Path, out: Path, task_events: str) -> None:
    command = json.dumps([sys.executable, str(RECORDER), str(out)])
    (home / "vigil.toml").write_text(
        f'[dispatch]\nexecutor = "dry-run"\n\n[alerts]\ncommand = {command}\ntask_events = {task_events}\n',
        encoding="utf-8",
    )


def _events(out: Path) -> list[dict[str, object]]:
    if not out.exists():
        return []
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def test_subscribed_task_events_reach_the_hook(
    home: Path, tmp_path: Path, vigil: VigilRunner, start_vigil: Callable[[], RunningVigil]
) -> None:
    out = tmp_path / "alerts.jsonl"
    vigil("task", "add", "before the loop started", "--in", "1h", check=True)  # not replayed
    _config(home, out, '["added", "completed"]')
    running = start_vigil()
    wait_until("the loop is up", lambda: "dispatcher" in running.log())
    vigil("task", "add", "say hello", check=True)

    def both() -> bool:
        return {e["event"] for e in _events(out)} >= {"task_added", "task_completed"}

    wait_until("task_added and task_completed", both)
    assert running.stop() == 0
    sent = [(e["event"], e["task_id"], e["subject"]) for e in _events(out)]
    assert sent == [("task_added", 2, "say hello"), ("task_completed", 2, "say hello")]
    first = _events(out)[0]
    assert (first["_env_event"], first["actor"]) == ("task_added", "human")
    assert first["message"] == "task #2 added: say hello"


def test_only_the_kinds_subscribed_are_sent(
    home: Path, tmp_path: Path, vigil: VigilRunner, start_vigil: Callable[[], RunningVigil]
) -> None:
    out = tmp_path / "alerts.jsonl"
    _config(home, out, '["completed"]')
    running = start_vigil()
    wait_until("the loop is up", lambda: "dispatcher" in running.log())
    vigil("task", "add", "quiet add", check=True)
    wait_until("task_completed", lambda: any(e["event"] == "task_completed" for e in _events(out)))
    assert running.stop() == 0
    assert [e["event"] for e in _events(out)] == ["task_completed"]


def test_an_unknown_task_event_is_one_line(home: Path, tmp_path: Path, vigil: VigilRunner) -> None:
    _config(home, tmp_path / "alerts.jsonl", '["added", "failed"]')
    result = vigil("status")
    assert result.returncode == 2
    assert result.stderr.strip().endswith(
        "[alerts] task_events: expected a list of 'added' and 'completed', got ['added', 'failed']"
    )
