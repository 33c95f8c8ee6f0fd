"""A task's checks run without network by default (``[checks] network = false``):
a check that connects to a server the test listens on, on the host's loopback,
cannot reach it; with ``network = true`` it does. The check runs through the
dispatcher, in the sandbox its settings make."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from dispatch.agents.doctor import checks_sandbox_finding, run_briefly
from dispatch.executors import RunContext
from tests.agents.clis import needs_bwrap
from tests.dispatch.conftest import MakeDispatcher
from vigil.codework import Check, CodeOptions
from vigil.config import ChecksSettings, Settings, settings_from_mapping
from vigil.errors import ConfigError
from vigil.models import NewTask, Outcome, OutcomeKind, Task, TaskStatus
from vigil.store.sqlite import SqliteStore

# connects to the port given, says what happened and fails when it could not
CONNECT = (
    "import socket, sys\n"
    "try:\n"
    "    socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=10).close()\n"
    "except OSError as err:\n"
    "    print('could not connect:', err); sys.exit(1)\n"
    "print('connected')\n"
)


@pytest.fixture
def listening() -> Iterator[int]:
    """A TCP server on the host's loopback (it accepts, never answers): its port."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server.getsockname()[1]


def done(task: Task, ctx: RunContext) -> Outcome:
    """An agent that is done at once: what decides the task is the check."""
    return Outcome(OutcomeKind.SUCCESS, summary="done")


def with_checks(settings: Settings, port: int, *, network: bool | None) -> Settings:
    """Every task checked by ``CONNECT`` (no repository); ``network`` None: the default."""
    check = Check((sys.executable, "-c", CONNECT, str(port)))
    dispatch = replace(settings.dispatch, executor="command", code=CodeOptions(checks=(check,)))
    checks = ChecksSettings() if network is None else ChecksSettings(network=network)
    return replace(settings, dispatch=dispatch, checks=checks)


@needs_bwrap
async def test_by_default_a_check_cannot_reach_a_server_on_the_hosts_loopback(
    db: SqliteStore, make_dispatcher: MakeDispatcher, settings: Settings, listening: int
) -> None:
    assert settings.checks.network is False  # the default of a home's vigil.toml
    await db.add_task(NewTask("Call the server", max_retries=0))
    dispatcher, _ = make_dispatcher(done, settings=with_checks(settings, listening, network=None))
    task = await dispatcher.run_once()
    assert task is not None
    assert task.status is TaskStatus.FAILED
    (run,) = await db.list_runs(task.id)
    assert run.outcome == "checks_failed"
    (check,) = run.checks
    assert check.exit_code == 1
    assert check.output.startswith("could not connect:"), check.output


@needs_bwrap
async def test_with_network_on_a_check_reaches_it(
    db: SqliteStore, make_dispatcher: MakeDispatcher, settings: Settings, listening: int
) -> None:
    await db.add_task(NewTask("Call the server", max_retries=0))
    dispatcher, _ = make_dispatcher(done, settings=with_checks(settings, listening, network=True))
    task = await dispatcher.run_once()
    assert task is not None
    assert task.status is TaskStatus.COMPLETED
    (run,) = await db.list_runs(task.id)
    assert (run.outcome, run.checks[0].output) == ("success", "connected")


def test_checks_network_is_read_from_its_own_section_and_checked(tmp_path: Path) -> None:
    source = tmp_path / "vigil.toml"
    assert settings_from_mapping({}, tmp_path, source).checks.network is False
    assert settings_from_mapping({"checks": {"network": True}}, tmp_path, source).checks.network is True
    with pytest.raises(ConfigError, match=r"\[checks\] network: expected true or false, got 'yes'"):
        settings_from_mapping({"checks": {"network": "yes"}}, tmp_path, source)
    with pytest.raises(ConfigError, match=r"\[checks\] unknown key"):
        settings_from_mapping({"checks": {"netwrok": False}}, tmp_path, source)


@needs_bwrap
async def test_doctor_starts_the_check_sandbox_and_says_whether_it_has_network(settings: Settings) -> None:
    env = {"PATH": os.environ["PATH"]}
    offline = await checks_sandbox_finding(settings, env, settings.home, run_briefly)
    assert (offline.level, offline.what) == ("ok", "checks")
    assert offline.detail.endswith("without network ([checks] network = true allows it)")
    online = await checks_sandbox_finding(
        replace(settings, checks=ChecksSettings(network=True)), env, settings.home, run_briefly
    )
    assert online.detail.endswith("with the host's network ([checks] network = true)")
