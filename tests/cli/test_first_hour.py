"""What a newcomer meets in the first hour with the CLI: help without a command,
the words after a retry, long text cut where it is shown (and kept whole where it
is stored), results that belong to the latest run, counts and dates written one
way, colour only on a terminal, shell completion, a removed sensor gone from
status, and one-line answers to odd input (`task prio 2 -1`, `--in ""`)."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.conftest import VigilRunner
from vigil.models import NewTask, Outcome, OutcomeKind, SensorState
from vigil.printable import SUBJECT_SHOWN_CHARS
from vigil.store.sqlite import SqliteStore

pytestmark = pytest.mark.slow


def add(vigil: VigilRunner, *args: str) -> int:
    return int(json.loads(vigil("task", "add", *args, "--json", check=True).stdout)["id"])


@pytest.mark.parametrize("args", [(), ("task",), ("sensors",), ("store",)])
def test_a_group_without_a_command_prints_its_help_on_several_lines(vigil: VigilRunner, args: tuple[str, ...]) -> None:
    shown = vigil(*args)
    assert shown.returncode == 0, shown.stderr
    assert shown.stderr == ""
    assert "\\n" not in shown.stdout
    lines = shown.stdout.splitlines()
    assert lines[0].startswith(f"Usage: vigil {' '.join(args)}".rstrip() + " [OPTIONS] COMMAND")
    assert "Commands:" in lines
    assert not shown.stdout.startswith("vigil: error")


def test_a_retried_rejected_approval_says_it_waits_for_approval(vigil: VigilRunner) -> None:
    task_id = add(vigil, "deploy", "--requires-approval")
    vigil("task", "reject", str(task_id), "--reason", "not now", check=True)
    retried = vigil("task", "retry", str(task_id), check=True)
    assert retried.stdout.strip() == (
        f"task #{task_id} blocked again, awaiting approval (vigil task approve {task_id})"
    )
    shown = json.loads(vigil("task", "show", str(task_id), "--json", check=True).stdout)
    assert (shown["status"], shown["approval"]) == ("blocked", "pending")


def test_a_retried_failed_task_says_pending_again(vigil: VigilRunner) -> None:
    task_id = add(vigil, "deploy")
    vigil("task", "cancel", str(task_id), check=True)
    assert vigil("task", "retry", str(task_id), check=True).stdout.strip() == f"task #{task_id} pending again"


def test_a_negative_priority_is_refused_as_a_priority_not_as_an_option(vigil: VigilRunner) -> None:
    task_id = add(vigil, "deploy")
    refused = vigil("task", "prio", str(task_id), "-1")
    assert refused.returncode == 2
    assert "No such option" not in refused.stderr
    assert refused.stderr.count("\n") == 1
    assert refused.stderr.strip() == "vigil: error: priority must be 1-9, got -1"


def test_an_empty_in_is_refused(vigil: VigilRunner) -> None:
    refused = vigil("task", "add", "deploy", "--in", "")
    assert refused.returncode == 2
    assert refused.stderr.startswith("vigil: error: invalid duration")
    assert json.loads(vigil("task", "list", "--json", check=True).stdout)["total"] == 0


LONG_SUBJECT = "Triage " + "x" * 100_000


def _waiting_with_a_long_subject(home: Path) -> int:
    """A task with a 100,000-character subject whose run asked a long question: it waits."""

    async def make() -> int:
        store = await SqliteStore.open(home / "data" / "vigil.db")
        try:
            await store.add_task(NewTask(LONG_SUBJECT))
            claim = await store.claim_next(worker="w", lease_ms=600_000)
            assert claim is not None
            await store.ask(claim.task.id, "staging or " + "y" * 50_000 + "?", (), actor="agent")
            await store.record(claim, Outcome(OutcomeKind.SUCCESS), worker="w")
            return claim.task.id
        finally:
            await store.close()

    return asyncio.run(make())


def test_status_and_task_show_cut_a_long_subject_with_a_marker_and_json_keeps_it(
    home: Path, vigil: VigilRunner
) -> None:
    task_id = _waiting_with_a_long_subject(home)
    status = vigil("status", check=True).stdout
    assert len(status) < 10_000
    assert f"#{task_id} Triage xxx" in status
    assert "more characters]" in status
    assert "queue: " in status  # the fields after it are there

    shown = vigil("task", "show", str(task_id), check=True).stdout
    assert len(shown) < 20_000
    subject_line = next(line for line in shown.splitlines() if line.startswith("subject"))
    assert subject_line.endswith(f"… [{len(LONG_SUBJECT) - SUBJECT_SHOWN_CHARS:,} more characters]")
    assert any(line.startswith("status ") for line in shown.splitlines())

    whole = json.loads(vigil("task", "show", str(task_id), "--json", check=True).stdout)
    assert whole["subject"] == LONG_SUBJECT


def _stderr_on_a_terminal(argv: list[str], timeout_s: float = 120) -> tuple[int, str]:
    """Run ``argv`` with its stderr on a pseudo-terminal (so the console log is
    rich's, as on a person's terminal); returns its exit code and what it wrote there."""
    main_fd, terminal_fd = pty.openpty()
    chunks: list[bytes] = []

    def read() -> None:
        while True:
            try:
                data = os.read(main_fd, 65536)
            except OSError:  # EIO: every writer closed
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIGIL_")}
    env["COLUMNS"] = "120"
    proc = subprocess.run(argv, stderr=terminal_fd, stdout=subprocess.DEVNULL, env=env, timeout=timeout_s, check=False)
    os.close(terminal_fd)
    reader.join(timeout_s)
    os.close(main_fd)
    return proc.returncode, b"".join(chunks).decode("utf-8", "replace")


def test_the_console_log_cuts_a_long_subject_and_dates_it_year_first(home: Path) -> None:
    async def make() -> None:
        store = await SqliteStore.open(home / "data" / "vigil.db")
        try:
            await store.add_task(NewTask(LONG_SUBJECT))
        finally:
            await store.close()

    asyncio.run(make())
    code, console = _stderr_on_a_terminal([sys.executable, "-m", "vigil", "--home", str(home), "dispatch", "once"])
    assert code == 0, console
    console = " ".join(re.sub(r"\x1b\[[0-9;]*m", "", console).split())  # colours off, rich's wrapping undone
    assert "more characters]" in console
    assert console.count("x") < 10_000
    assert re.search(r"\[20\d\d-\d\d-\d\d \d\d:\d\d:\d\d\]", console), console[:500]
    assert not re.search(r"\d\d/\d\d/\d\d", console)
    logged = (home / "logs" / "vigil.log").read_text()
    assert LONG_SUBJECT in logged  # the file keeps the record whole


def test_a_completed_task_shows_the_result_of_its_latest_run_only(home: Path, vigil: VigilRunner) -> None:
    """The first run was stopped with output; the second completed saying less: the
    task's result is the second run's, not a mix."""

    async def two_runs() -> int:
        store = await SqliteStore.open(home / "data" / "vigil.db")
        try:
            await store.add_task(NewTask("report"))
            first = await store.claim_next(worker="w", lease_ms=600_000)
            assert first is not None
            stopped = Outcome(OutcomeKind.STOPPED, summary="stopped half way", detail="half a report")
            await store.record(first, stopped, worker="w")
            second = await store.claim_next(worker="w", lease_ms=600_000)
            assert second is not None
            await store.record(second, Outcome(OutcomeKind.SUCCESS, summary="nothing to report"), worker="w")
            return second.task.id
        finally:
            await store.close()

    task_id = asyncio.run(two_runs())
    shown = json.loads(vigil("task", "show", str(task_id), "--json", check=True).stdout)
    assert (shown["status"], shown["result_summary"]) == ("completed", "nothing to report")
    assert shown["result_detail"] is None


def _stdout_on_a_terminal(argv: list[str], env: dict[str, str]) -> str:
    """What ``argv`` prints with its stdout on a pseudo-terminal."""
    main_fd, terminal_fd = pty.openpty()
    proc = subprocess.run(argv, stdout=terminal_fd, stderr=subprocess.DEVNULL, env=env, timeout=120, check=False)
    os.close(terminal_fd)
    chunks = []
    while True:
        try:
            data = os.read(main_fd, 65536)
        except OSError:  # EIO: the terminal's other end is closed and drained
            break
        if not data:
            break
        chunks.append(data)
    os.close(main_fd)
    assert proc.returncode in (0, 1)
    return b"".join(chunks).decode()


def test_verdicts_are_coloured_on_a_terminal_only_and_never_with_no_color(home: Path, vigil: VigilRunner) -> None:
    vigil("pause", "--reason", "maintenance", check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIGIL_") and k != "NO_COLOR"}
    argv = [sys.executable, "-m", "vigil", "--home", str(home), "status"]
    on_terminal = _stdout_on_a_terminal(argv, env)
    assert "\x1b[1;33mPAUSED\x1b[0m" in on_terminal
    assert "\x1b[" not in _stdout_on_a_terminal(argv, {**env, "NO_COLOR": "1"})
    piped = vigil("status", check=True).stdout
    assert "PAUSED" in piped
    assert "\x1b[" not in piped

    config = home / "vigil.toml"
    config.write_text(config.read_text() + '\n[[sensors]]\nuse = "inbx"\n')
    doctor = [sys.executable, "-m", "vigil", "--home", str(home), "doctor"]
    assert "\x1b[1;31mFAIL\x1b[0m  config" in _stdout_on_a_terminal(doctor, env)


def test_shell_completion_as_docs_cli_md_says(vigil: VigilRunner) -> None:
    env = {"_VIGIL_COMPLETE": "bash_complete", "COMP_WORDS": "vigil ta", "COMP_CWORD": "1"}
    completed = subprocess.run(
        [sys.executable, "-c", "from vigil.cli import main; main(prog_name='vigil')"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert "plain,task" in completed.stdout.splitlines()
    cli_md = (Path(__file__).parents[2] / "docs" / "cli.md").read_text()
    assert "_VIGIL_COMPLETE=bash_source vigil" in cli_md


def test_a_sensor_removed_from_the_config_leaves_status_and_the_sensors_screen(home: Path, vigil: VigilRunner) -> None:
    from tui.sensors_screen import with_configured
    from vigil.config import load_settings

    config = home / "vigil.toml"
    before = config.read_text()
    config.write_text(before + '\n[[sensors]]\nuse = "queue_health"\n')
    vigil("sensors", "run", check=True)
    assert [s["name"] for s in json.loads(vigil("status", "--json", check=True).stdout)["sensors"]] == ["queue_health"]

    config.write_text(before)  # removed by a person
    status = vigil("status", "--json", check=True)
    assert json.loads(status.stdout)["sensors"] == []
    assert "queue_health" not in vigil("status", check=True).stdout

    async def stored() -> tuple[SensorState, ...]:
        store = await SqliteStore.open(home / "data" / "vigil.db")
        try:
            return tuple(await store.sensor_states())
        finally:
            await store.close()

    states = asyncio.run(stored())
    assert [s.name for s in states] == ["queue_health"]  # its history is kept in the store
    assert with_configured(states, load_settings(home).sensors) == ()
