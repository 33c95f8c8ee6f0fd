"""``vigil events``: the audit trail as lines or JSON lines, filtered, and followed as
new events commit, through the real CLI on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import pytest

from tests.conftest import VigilRunner

ISO = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$"


def records(vigil: VigilRunner, *args: str, env: dict[str, str] | None = None) -> list[dict[str, object]]:
    out = vigil("events", "--json", *args, env=env, check=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def test_the_trail_in_order_as_lines_and_json(vigil: VigilRunner) -> None:
    vigil("task", "add", "first", check=True)
    vigil("task", "add", "second", check=True)
    vigil("task", "prio", "2", "1", check=True)
    vigil("task", "defer", "1", "2030-01-01T00:00:00Z", check=True)
    assert vigil("dispatch", "once").returncode == 0  # runs #2 (dry-run)

    events = records(vigil)
    assert [(e["task_id"], e["kind"], e["from"], e["to"], e["actor"]) for e in events] == [
        (1, "created", None, "pending", "human"),
        (2, "created", None, "pending", "human"),
        (2, "priority", "5", "1", "human"),
        (1, "scheduled", events[3]["from"], "2030-01-01T00:00:00Z", "human"),  # ISO, not epoch ms
        (2, "status", "pending", "active", "dispatcher"),
        (2, "status", "active", "completed", "dispatcher"),
    ]
    ids = [int(str(e["id"])) for e in events]
    assert ids == sorted(ids)
    assert all(str(e["at"]).endswith("Z") and "T" in str(e["at"]) for e in events)
    assert str(events[3]["from"]).endswith("Z")

    lines = vigil("events", check=True).stdout.splitlines()
    assert len(lines) == 6
    assert lines[2].endswith("  #2  priority  5 → 1  by human")
    assert lines[5].endswith("  #2  status  active → completed  by dispatcher")

    assert [e["kind"] for e in records(vigil, "--task", "2")] == ["created", "priority", "status", "status"]
    assert [e["task_id"] for e in records(vigil, "--kind", "created")] == [1, 2]
    assert len(records(vigil, "--kind", "created", "--kind", "status")) == 4
    assert len(records(vigil, "--kind", "created,priority")) == 3
    assert len(records(vigil, "--since", "1h")) == 6
    assert records(vigil, "--since", "2099-01-01T00:00:00Z") == []


def test_bad_filters_are_one_line_and_exit_2(vigil: VigilRunner) -> None:
    for args, message in (
        (("--kind", "nope"), "--kind: unknown kind 'nope'; expected one of created, status"),
        (("--since", "yesterday"), "--since: expected an ISO 8601 time or a duration such as 2h, got 'yesterday'"),
    ):
        result = vigil("events", *args)
        assert result.returncode == 2
        assert message in result.stderr
        assert result.stderr.count("\n") == 1


def _ctrl_c_as_in_a_terminal() -> None:
    # A suite started in the background by a script (`make test &`) inherits SIGINT
    # ignored, and Python then leaves it ignored: the follower would never see Ctrl-C.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _follow(home: Path, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("VIGIL_")} | env
    return subprocess.Popen(
        [sys.executable, "-m", "vigil", "--home", str(home), "events", "--follow", "--json", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=full_env,
        preexec_fn=_ctrl_c_as_in_a_terminal,  # noqa: PLW1509 - only a signal disposition, no lock
    )


def _ctrl_c(follower: subprocess.Popen[str]) -> str:
    """Press Ctrl-C: SIGINT, then wait for the follower to end; returns its stderr.
    One that does not end is killed, so its pipes never leak into later tests."""
    follower.send_signal(signal.SIGINT)
    try:
        return follower.communicate(timeout=20)[1]
    except subprocess.TimeoutExpired:
        follower.kill()
        follower.communicate()
        raise


def _line(stream: IO[str] | None, timeout_s: float = 20.0) -> dict[str, object]:
    assert stream is not None
    import selectors

    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        assert selector.select(timeout_s), "no event line in time"
    line = stream.readline()
    assert line, "the follower ended"
    value: dict[str, object] = json.loads(line)
    return value


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds the process used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _follows_new_events_and_ends_on_ctrl_c(home: Path, vigil: VigilRunner, env: dict[str, str]) -> None:
    vigil("task", "add", "before", env=env, check=True)
    follower = _follow(home, env)
    try:
        assert _line(follower.stdout)["kind"] == "created"  # the history first
        started = time.monotonic()
        vigil("task", "add", "while following", env=env, check=True)
        new = _line(follower.stdout)
        assert (new["task_id"], new["kind"], new["to"]) == (2, "created", "pending")
        vigil("task", "cancel", "2", env=env, check=True)
        canceled = _line(follower.stdout)
        assert (canceled["kind"], canceled["from"], canceled["to"]) == ("status", "pending", "canceled")
        assert time.monotonic() - started < 15
    finally:
        err = _ctrl_c(follower)
    assert follower.returncode == 0
    assert err == ""  # no traceback, no message: Ctrl-C is how a follower ends


def test_follow_on_sqlite(home: Path, vigil: VigilRunner) -> None:
    _follows_new_events_and_ends_on_ctrl_c(home, vigil, {})


def test_follow_on_postgres(home: Path, vigil: VigilRunner, postgres_url: str) -> None:
    _follows_new_events_and_ends_on_ctrl_c(home, vigil, {"VIGIL_STORE_URL": postgres_url})


def test_a_closed_pipe_ends_the_follower_quietly(home: Path, vigil: VigilRunner) -> None:
    vigil("task", "add", "before", check=True)
    follower = _follow(home, {})
    try:
        _line(follower.stdout)
        assert follower.stdout is not None
        follower.stdout.close()  # the reader goes away, as `| head -1` does
        for n in range(3):  # the follower finds out at its next write
            vigil("task", "add", f"after {n}", check=True)
        follower.wait(timeout=20)
        assert follower.stderr is not None
        err = follower.stderr.read()
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
        if follower.stderr is not None:
            follower.stderr.close()
    assert follower.returncode == 0
    assert "Traceback" not in err
    assert err == ""


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_idle_follower_reads_nothing_until_a_commit(
    home: Path, vigil: VigilRunner, backend: str, request: pytest.FixtureRequest
) -> None:
    """No busy polling: while nothing commits, the follower only probes data_version
    (it prints nothing and does not grow); a commit wakes it at once."""
    env = {"VIGIL_STORE_URL": str(request.getfixturevalue("postgres_url"))} if backend == "postgres" else {}
    follower = _follow(home, env)
    try:
        time.sleep(1.5)  # started up and idle
        before = _cpu_s(follower.pid)
        time.sleep(1.5)
        # A busy poller would burn about all of that; probing data_version 5 times a
        # second costs a few ms.
        assert _cpu_s(follower.pid) - before < 0.3
        assert follower.poll() is None
        vigil("task", "add", "wake up", env=env, check=True)
        assert _line(follower.stdout)["kind"] == "created"
    finally:
        _ctrl_c(follower)
    assert follower.returncode == 0


def test_task_show_text_has_the_audit_trail(vigil: VigilRunner) -> None:
    vigil("task", "add", "audited", check=True)
    vigil("task", "prio", "1", "2", check=True)
    vigil("task", "cancel", "1", env={"VIGIL_TASK_ID": "1"}, check=True)
    shown = vigil("task", "show", "1", check=True).stdout.splitlines()
    trail = shown[shown.index("events:") + 1 :]
    assert [line.split("  ", 2)[2] for line in trail] == [
        "created  pending  by human",
        "priority  5 → 2  by human",
        "status  pending → canceled  by agent",
    ]
