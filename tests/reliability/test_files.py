"""The files around the database: a killed backup's partial copy, the systemd unit of
a home whose path holds ``%``, and the hint an I/O error carries when a file turned
read-only under a running dispatcher (docs/reliability.md, *Files*)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.reliability.support import run_vigil
from vigil.home import init_home

pytestmark = pytest.mark.slow

WAIT_S = 60.0  # safety net only


def integrity(path: Path) -> str:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


def test_a_killed_backup_leaves_a_visible_partial_file_that_the_next_backup_removes(home: Path, tmp_path: Path) -> None:
    assert run_vigil(home, "task", "add", "kept").returncode == 0
    folder = tmp_path / "backups"
    folder.mkdir()
    killed = run_vigil(home, "backup", str(folder / "monday.db"), env={"VIGIL_FAULT": "during-backup"})
    assert killed.returncode == -signal.SIGKILL
    left = sorted(p.name for p in folder.iterdir())
    assert left == ["monday.db.vigil-partial"]  # not hidden, and not under the backup's name
    done = run_vigil(home, "backup", str(folder / "tuesday.db"))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["tuesday.db"]
    assert integrity(folder / "tuesday.db") == "ok"


def test_the_systemd_unit_escapes_percent_signs_in_the_homes_path(tmp_path: Path) -> None:
    home = tmp_path / "100%data home"
    init_home(home)
    unit = run_vigil(home, "service", "install", "--print")
    assert unit.returncode == 0, unit.stderr
    lines = unit.stdout.splitlines()
    (working,) = [line for line in lines if line.startswith("WorkingDirectory=")]
    (description,) = [line for line in lines if line.startswith("Description=")]
    assert working == f"WorkingDirectory={str(home).replace('%', '%%')}"
    assert description.endswith(f"({str(home).replace('%', '%%')})")
    (start,) = [line for line in lines if line.startswith("ExecStart=")]
    assert "100%%data home" in start


@pytest.mark.skipif(os.geteuid() != 0, reason="chattr +i needs root")
def test_a_log_made_read_only_under_the_daemon_is_not_called_a_full_disk(home: Path) -> None:
    (home / "vigil.toml").write_text(
        '[dispatch]\nexecutor = "dry-run"\nheartbeat = "200ms"\nlease = "2s"\n', encoding="utf-8"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIGIL_")}
    daemon = subprocess.Popen(
        [sys.executable, "-m", "vigil", "--home", str(home), "run"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(daemon.stderr or []), daemon=True)
    reader.start()
    wal = home / "data" / "vigil.db-wal"
    try:
        deadline = time.monotonic() + WAIT_S
        while not any("dispatcher " in line for line in lines) and time.monotonic() < deadline:
            time.sleep(0.05)
        subprocess.run(["chattr", "+i", str(wal)], check=True)
        while not any("could not write the heartbeat" in line for line in lines) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        subprocess.run(["chattr", "-i", str(wal)], check=False)
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=WAIT_S)
        reader.join(timeout=WAIT_S)
        assert daemon.stderr is not None
        daemon.stderr.close()
    (said,) = [line for line in lines if "could not write the heartbeat" in line]
    assert "vigil.db-wal is read-only (or immutable); nothing was changed" in said
    assert "full disk" not in said
