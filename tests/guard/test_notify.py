"""``[alerts] notify``: alerts to notification services through apprise, tested with
its ``json://`` service against a local HTTP server; a failing service is reported
and never stops anything."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

import pytest

from dispatch.alerts import AlertHook, waiting_event
from dispatch.notifiers import Notifiers, body_of
from tests.conftest import VigilRunner
from tests.dispatch.agent_support import make_task
from tests.http_sink import http_sink
from vigil.config import AlertSettings, NotifyTarget, load_settings
from vigil.errors import ConfigError
from vigil.models import NOTIFY_KEY
from vigil.store.sqlite import SqliteStore


def _closed_port() -> int:
    """A local port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _configure(home: Path, toml: str) -> None:
    config = home / "vigil.toml"
    config.write_text(config.read_text() + "\n" + toml)


def test_a_waiting_task_is_sent_to_the_urls_that_want_it_with_how_to_answer(tmp_path: Path) -> None:
    task = make_task(id=12, subject="Deploy the release", question="staging or prod?", choices=("staging", "prod"))
    with http_sink() as sink:
        targets = (
            NotifyTarget(sink.url("all")),  # the default kinds: waiting among them
            NotifyTarget(sink.url("failures"), kinds=("failed",)),
        )
        hook = AlertHook(AlertSettings(notify=targets), tmp_path)
        asyncio.run(hook.send(waiting_event(task, 1_767_225_600_000)))
    assert [path for path, _ in sink.received] == ["/all"]
    (_, body) = sink.received[0]
    assert body["title"] == "vigil: task #12 waits for an answer: staging or prod?"
    assert "Choices: 1. staging; 2. prod" in body["message"]
    assert 'vigil task answer 12 "…" (or --choice N)' in body["message"]


def test_a_failing_service_is_recorded_and_the_others_still_get_the_alert(tmp_path: Path) -> None:
    event = waiting_event(make_task(id=3, question="which?"), 1_767_225_600_000)

    async def send() -> tuple[list[bool], object]:
        store = await SqliteStore.open(tmp_path / "vigil.db")
        try:
            with http_sink() as sink:
                down = NotifyTarget(f"json://127.0.0.1:{_closed_port()}/down")
                notifiers = Notifiers((down, NotifyTarget(sink.url())), 10.0, store)
                results = await notifiers.send(event)
            assert len(sink.received) == 1
            return [r.ok for r in results], (await store.loop_values()).get(NOTIFY_KEY)
        finally:
            await store.close()

    oks, health = asyncio.run(send())
    assert oks == [False, True]
    assert isinstance(health, dict)
    assert health["0"]["service"] == "json://…"  # never the whole URL: it may hold a token
    assert health["0"]["error"]
    assert health["1"]["error"] is None


@pytest.mark.slow
def test_alerts_test_says_which_urls_succeeded_and_status_and_doctor_report_the_failing_one(
    home: Path, vigil: VigilRunner
) -> None:
    with http_sink() as sink:
        down = f"json://127.0.0.1:{_closed_port()}/down"
        _configure(
            home, f"[alerts]\nnotify = [{json.dumps(sink.url())}, {{url = {json.dumps(down)}, kinds = ['failed']}}]\n"
        )
        tested = vigil("alerts", "test")
    status = vigil("status")
    doctor = vigil("doctor")
    assert tested.returncode == 1
    assert "notify[0] json://…: sent" in tested.stdout
    assert "notify[1] json://…: FAILED" in tested.stdout
    assert tested.stderr.strip().splitlines() == [
        "vigil: error: the test alert did not reach every notify URL (see above)"
    ]
    assert [body["title"] for _, body in sink.received] == ["vigil: test alert from vigil alerts test"]
    assert "alerts: notify[1] json://… is failing" in status.stdout
    assert "notify[1] json://… is failing" in doctor.stdout


def test_bad_notify_settings_are_refused_in_one_line(tmp_path: Path) -> None:
    for value in ('"ntfy://x"', '[{url = "ntfy://x", kinds = ["everything"]}]', "[42]", '["no scheme"]'):
        config = tmp_path / "vigil.toml"
        config.write_text(f"[alerts]\nnotify = {value}\n")
        with pytest.raises(ConfigError, match=r"\[alerts\] notify: expected a list of URLs"):
            load_settings(tmp_path)


def test_the_body_of_a_failed_task_says_where_to_look() -> None:
    body = body_of({"event": "task_failed", "message": "task #4 failed for good: x", "task_id": 4})
    assert body.splitlines() == ["task #4 failed for good: x", "See: vigil task show 4"]
