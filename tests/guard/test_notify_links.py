"""Notifications about a task that needs a person carry its link in the served
dashboard when ``[serve] public_url`` is set: ``?task=ID`` opens it there; never the
token (only its hash is kept). Sent through apprise's ``json://`` to a local HTTP
server, as a notification service gets them."""

from __future__ import annotations

import asyncio
from pathlib import Path

from dispatch.alerts import alert_hook, make_event, waiting_event
from tests.dispatch.agent_support import make_task
from tests.http_sink import http_sink
from vigil.config import load_settings
from vigil.dashboard_access import make_token
from vigil.home import init_home


def _home(tmp_path: Path, url: str, serve: str) -> Path:
    home = tmp_path / "home"
    init_home(home)
    config = home / "vigil.toml"
    config.write_text(config.read_text() + f'\n[alerts]\nnotify = ["{url}"]\n\n[serve]\n{serve}\n')
    return home


def _send(home: Path, *events: dict[str, object]) -> None:
    """Send ``events`` through the home's alert hook, one after another."""
    hook = alert_hook(load_settings(home))

    async def send() -> None:
        for event in events:
            await hook.send(event)

    asyncio.run(send())


def test_a_waiting_task_links_to_itself_in_the_dashboard_without_the_token(tmp_path: Path) -> None:
    with http_sink() as sink:
        home = _home(tmp_path, sink.url("all"), 'public_url = "https://vigil.example.net/agent/"')
        token = make_token(home)
        task = make_task(id=12, subject="Deploy the release", question="staging or prod?")
        failed = make_event("task_failed", "task #7 failed", 1_767_225_600_000, task_id=7)
        gate = make_event("gate_changed", "loop paused", 1_767_225_600_000, gate="paused")
        _send(home, waiting_event(task, 1_767_225_600_000), failed, gate)
    bodies = [body["message"] for _, body in sink.received]
    assert "Open it in the dashboard: https://vigil.example.net/agent/?task=12" in bodies[0]
    assert "Open it in the dashboard: https://vigil.example.net/agent/?task=7" in bodies[1]
    assert "Open it in the dashboard" not in bodies[2]  # about no task
    assert all(token not in body for body in bodies)


def test_without_a_public_url_no_link_is_sent(tmp_path: Path) -> None:
    with http_sink() as sink:
        home = _home(tmp_path, sink.url("all"), "port = 8400")
        _send(home, waiting_event(make_task(id=3, question="which?"), 1_767_225_600_000))
    (_, body) = sink.received[0]
    assert "dashboard:" not in body["message"]
    assert "?task=" not in body["message"]
