"""Timeouts and cancellation end the agent's whole process group, children that
ignore SIGTERM included; nothing an agent starts outlives its run."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dispatch.agents.claude.executor import ClaudeExecutor
from dispatch.agents.codex.executor import CodexExecutor
from dispatch.executors.child import run_child
from dispatch.executors.command import CommandExecutor
from dispatch.process import (
    end_process_group,
    group_alive,
    pid_alive,
    process_start_time,
    same_process,
)
from tests.dispatch.agent_support import (
    CLAUDE_FAKE,
    CODEX_FAKE,
    Started,
    agent_settings,
    fake_argv,
    make_ctx,
    make_task,
    wait_for_pids,
)
from vigil.models import OutcomeKind

pytestmark = pytest.mark.slow

IGNORE_TERM = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"


def test_process_start_time_identifies_a_process() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        start = process_start_time(proc.pid)
        assert start is not None
        assert start.isdigit()
        assert same_process(proc.pid, start)
        assert not same_process(proc.pid, str(int(start) + 1))  # a reused pid starts at another time
        assert not same_process(proc.pid, None)  # unverifiable: never trusted
    finally:
        proc.kill()
        proc.wait()
    assert not pid_alive(proc.pid)
    assert not same_process(proc.pid, start)
    assert process_start_time(proc.pid) is None


async def test_end_process_group_kills_members_that_ignore_sigterm() -> None:
    script = (
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-c', {IGNORE_TERM!r}])\n"
        "print(flush=True)\n"
        "time.sleep(600)\n"
    )
    leader = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert leader.stdout is not None
        leader.stdout.readline()  # the child exists once the leader printed
        assert group_alive(leader.pid)
        assert await end_process_group(leader.pid, grace_s=0.3)
        assert not group_alive(leader.pid)
    finally:
        leader.kill()
        leader.wait()
        assert leader.stdout is not None
        leader.stdout.close()


async def test_end_process_group_of_a_finished_group_is_a_no_op() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    proc.wait()
    assert await end_process_group(proc.pid, grace_s=0.1)


@pytest.mark.parametrize("fake", [CLAUDE_FAKE, CODEX_FAKE])
async def test_timeout_ends_the_agent_and_its_sigterm_ignoring_child(home: Path, fake: Path) -> None:
    pid_file = home / "pids.json"
    command = fake_argv(fake, "sleep_child", "--pid-file", str(pid_file), "--sleep", "600")
    name = "claude" if fake == CLAUDE_FAKE else "codex"
    settings = agent_settings(home, executors={name: {"command": command}})
    executor = ClaudeExecutor(settings, grace_s=0.3) if name == "claude" else CodexExecutor(settings, grace_s=0.3)
    started = Started()

    outcome = await executor.run(make_task(), make_ctx(settings, timeout_s=3.0, started=started))

    assert outcome.kind is OutcomeKind.TIMEOUT
    assert outcome.error is not None
    assert "timed out" in outcome.error
    parent, child = await wait_for_pids(pid_file, timeout_s=1)
    assert started.calls[0][0] == parent
    assert not pid_alive(parent)
    assert not pid_alive(child)
    assert not group_alive(started.calls[0][1])


async def test_timeout_escalates_to_sigkill_when_the_agent_ignores_sigterm(home: Path) -> None:
    pid_file = home / "pids.json"
    command = fake_argv(CLAUDE_FAKE, "sleep", "--ignore-term", "--pid-file", str(pid_file), "--sleep", "600")
    settings = agent_settings(home, executors={"claude": {"command": command}})
    outcome = await ClaudeExecutor(settings, grace_s=0.3).run(make_task(), make_ctx(settings, timeout_s=2.0))
    assert outcome.kind is OutcomeKind.TIMEOUT
    assert outcome.exit_code == -9
    (pid,) = await wait_for_pids(pid_file, timeout_s=1)
    assert not pid_alive(pid)


async def test_cancelling_the_run_ends_the_group_then_reraises(home: Path) -> None:
    pid_file = home / "pids.json"
    command = fake_argv(CLAUDE_FAKE, "sleep_child", "--pid-file", str(pid_file), "--sleep", "600")
    settings = agent_settings(home, executors={"claude": {"command": command}})
    ctx = make_ctx(settings)
    run = asyncio.create_task(ClaudeExecutor(settings, grace_s=0.3).run(make_task(), ctx))
    parent, child = await wait_for_pids(pid_file)
    assert pid_alive(parent)
    assert pid_alive(child)

    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run

    assert not pid_alive(parent)
    assert not pid_alive(child)
    last = ctx.transcript_path.read_text().splitlines()[-1]
    assert json.loads(last) == {"type": "vigil.end", "canceled": True}


async def test_background_processes_left_by_a_finished_command_are_ended(home: Path) -> None:
    pid_file = home / "bg.json"
    script = (
        "import json, subprocess, sys\n"
        f"child = subprocess.Popen([sys.executable, '-c', {IGNORE_TERM!r}])\n"
        f"open({str(pid_file)!r}, 'w').write(json.dumps([child.pid]))\n"
        'print(\'{"status": "completed", "summary": "left a child behind"}\')\n'
    )
    settings = agent_settings(home)
    command = (sys.executable, "-c", script)
    outcome = await CommandExecutor(grace_s=0.3).run(make_task(), make_ctx(settings, command=command))
    assert outcome.kind is OutcomeKind.SUCCESS
    assert outcome.summary == "left a child behind"
    (child,) = await wait_for_pids(pid_file, timeout_s=1)
    assert not pid_alive(child)


async def test_a_second_cancel_while_the_group_is_ending_still_ends_it(home: Path) -> None:
    pid_file = home / "pids.json"
    command = fake_argv(CLAUDE_FAKE, "sleep_child", "--ignore-term", "--pid-file", str(pid_file), "--sleep", "600")
    settings = agent_settings(home, executors={"claude": {"command": command}})
    run = asyncio.create_task(ClaudeExecutor(settings, grace_s=1.0).run(make_task(), make_ctx(settings)))
    parent, child = await wait_for_pids(pid_file)

    run.cancel()
    await asyncio.sleep(0.2)  # inside the grace period: both still ignore SIGTERM
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run

    assert not pid_alive(parent)
    assert not pid_alive(child)


async def test_a_failing_line_handler_stops_the_run_and_ends_the_group(home: Path) -> None:
    pid_file = home / "pids.json"
    script = (
        "import json, os, subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-c', {IGNORE_TERM!r}])\n"
        f"open({str(pid_file)!r}, 'w').write(json.dumps([os.getpid(), child.pid]))\n"
        "print('a line', flush=True)\n"
        "time.sleep(600)\n"
    )
    argv = [sys.executable, "-c", script]

    def on_line(raw: bytes) -> None:
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        await run_child(
            argv, env={"PATH": "/usr/bin:/bin"}, cwd=home, stdin=b"", timeout_s=60, grace_s=0.3,
            on_start=Started(), on_line=on_line,
        )  # fmt: skip
    parent, child = await wait_for_pids(pid_file)
    assert not pid_alive(parent)
    assert not pid_alive(child)


async def test_the_program_starts_only_once_its_process_is_recorded(home: Path) -> None:
    """Until ``on_start`` (the commit of the pid and group) returns, the program has
    not run; then it runs as the very process that was recorded, input intact."""
    marker = home / "ran.json"
    script = (
        "import json, os, sys\n"
        f"open({str(marker)!r}, 'w').write(json.dumps([os.getpid(), os.getpgid(0), sys.stdin.read()]))\n"
    )
    seen_while_recording: list[bool] = []
    started = Started()

    async def record_slowly(pid: int, pgid: int, proc_start: str | None) -> None:
        await asyncio.sleep(0.5)  # a slow commit: time enough for a program to start
        seen_while_recording.append(marker.exists())
        await started(pid, pgid, proc_start)

    result = await run_child(
        [sys.executable, "-c", script], env={"PATH": "/usr/bin:/bin"}, cwd=home, stdin=b"the prompt\n",
        timeout_s=60, grace_s=0.3, on_start=record_slowly, on_line=lambda raw: None,
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert seen_while_recording == [False]
    [(pid, pgid, _)] = started.calls
    assert json.loads(marker.read_text()) == [pid, pgid, "the prompt\n"]


def test_a_dispatcher_that_dies_before_recording_leaves_nothing_running(home: Path) -> None:
    """The dispatcher is killed while it records the spawned process: the program
    never starts, and the waiting process ends by itself."""
    marker = home / "ran"
    shell_pid = home / "shell.pid"
    dispatcher = (
        "import asyncio, os, signal, sys\n"
        "from pathlib import Path\n"
        "from dispatch.executors.child import run_child\n"
        "async def die(pid, pgid, proc_start):\n"
        f"    Path({str(shell_pid)!r}).write_text(str(pid))\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "argv = ['touch', sys.argv[1]]\n"
        "asyncio.run(run_child(argv, env={'PATH': '/usr/bin:/bin'}, cwd=Path('.'), stdin=b'', timeout_s=60,\n"
        "                      grace_s=0.3, on_start=die, on_line=lambda raw: None))\n"
    )
    root = Path(__file__).resolve().parents[2]  # where `dispatch` imports from
    killed = subprocess.run([sys.executable, "-c", dispatcher, str(marker)], cwd=root, timeout=60, check=False)
    assert killed.returncode == -9
    pid = int(shell_pid.read_text())
    deadline = time.monotonic() + 30
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not pid_alive(pid)
    time.sleep(0.3)  # had it run, `touch` would have made the file by now
    assert not marker.exists()
