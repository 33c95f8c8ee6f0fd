"""A notification service that holds the connection cannot hold ``vigil run`` when it
is told to stop (issue 38's fault hunt: one that accepted and never answered made it
take 70 s to exit after SIGTERM; one that trickled a byte every 2 s kept it alive past
120 s, beyond systemd's 60 s stop timeout). The stop gives up on alerts still being
sent after ``DRAIN_AT_STOP_S``, and the threads sending them hold nothing.

The services are local TCP servers; the alert is a task that fails (the ``failed``
kind, sent by default), so the real ``vigil run`` sends it as it would in use."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dispatch.alerts import DRAIN_AT_STOP_S
from tests.reliability.support import WAIT_S, run_vigil

pytestmark = pytest.mark.slow

# Far above the stop's own bound (DRAIN_AT_STOP_S) and the run's grace, and below
# systemd's 60 s stop timeout: a bound on a loaded machine, not a measurement.
EXITS_WITHIN_S = 45.0

FAILING_SKILL = '---\ndescription: Fails at once.\ncommand: ["false"]\n---\nFail.\n'


@contextlib.contextmanager
def holding_service(trickle: bool) -> Iterator[tuple[int, threading.Event]]:
    """A TCP server on loopback that accepts and then never answers (or, with
    ``trickle``, sends one byte of an HTTP answer every 2 s, forever); its port, and
    an event set once a connection was accepted."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted = threading.Event()
    done = threading.Event()
    held: list[socket.socket] = []

    def serve() -> None:
        server.settimeout(0.2)
        while not done.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            held.append(conn)
            accepted.set()
            if trickle:
                threading.Thread(target=drip, args=(conn,), daemon=True).start()

    def drip(conn: socket.socket) -> None:
        answer = b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + b"x" * 100_000
        for byte in answer:
            if done.wait(2.0):
                return
            with contextlib.suppress(OSError):
                conn.sendall(bytes([byte]))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], accepted
    finally:
        done.set()
        thread.join(timeout=WAIT_S)
        for conn in held:
            conn.close()
        server.close()


@pytest.mark.timeout(180)
@pytest.mark.parametrize("trickle", [False, True], ids=["never answers", "trickles a byte every 2 s"])
def test_vigil_run_stops_promptly_while_a_notifier_holds_the_connection(home: Path, trickle: bool) -> None:
    skill = home / "skills" / "fail"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(FAILING_SKILL, encoding="utf-8")
    with holding_service(trickle) as (port, accepted):
        config = home / "vigil.toml"
        config.write_text(
            config.read_text(encoding="utf-8")
            + f'\n[alerts]\nnotify = ["json://127.0.0.1:{port}/"]\ntimeout = "10m"\n',
            encoding="utf-8",
        )
        added = run_vigil(home, "task", "add", "fails", "--skills", "fail", "--max-retries", "0")
        assert added.returncode == 0, added.stderr
        daemon = subprocess.Popen(
            [sys.executable, "-m", "vigil", "--home", str(home), "run"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert accepted.wait(WAIT_S), "the alert never reached the service"
            daemon.send_signal(signal.SIGTERM)
            asked = time.monotonic()
            try:
                _, stderr = daemon.communicate(timeout=EXITS_WITHIN_S)
            except subprocess.TimeoutExpired:
                daemon.kill()
                _, stderr = daemon.communicate()
                pytest.fail(f"vigil run still running {EXITS_WITHIN_S:g} s after SIGTERM: {stderr[-3000:]}")
        finally:
            if daemon.poll() is None:
                daemon.kill()
                daemon.communicate()
    assert daemon.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert f"stopping without the alerts still being sent (over {DRAIN_AT_STOP_S:g} s)" in stderr
    del asked  # when the stop was asked: the bound above is the assertion, not a duration
