"""The crash matrix: SIGKILL at each interesting point, restart, check nothing is lost.

    python -m tests.reliability.crash --rounds 20 --seed 7      # every point, 20 times each

Points (``vigil.faults``; ``executor-running`` is a kill from outside while the
agent works): ``sensor-batch``, ``after-claim``, ``executor-running``,
``during-finish``, ``during-migration``, ``during-backup``. Which task or which
hit dies is drawn from a seeded generator, so a failing round can be replayed.

After each restart: every task that existed still exists; none is active without a
live dispatcher; each task's attempt count equals its runs; no agent process (nor
its child) from the dead run is alive; ``PRAGMA integrity_check`` is ok. The
sensor, migration and backup points check what is theirs: nothing of a killed
batch, a usable database after a killed migration, no half backup under the
target's name.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

AGENT = Path(__file__).resolve().parent.parent / "daemon" / "agent.py"
SAFETY_S = 60.0  # only stops a broken round from hanging
DISPATCH_POINTS = ("after-claim", "executor-running", "during-finish")
POINTS = ("sensor-batch", *DISPATCH_POINTS, "during-migration", "during-backup")
TASKS_PER_ROUND = 3
BATCH = 20
CONFIG = """\
[dispatch]
executor = "dry-run"
max_retries = 5
retry_backoff = "100ms"
retry_backoff_max = "200ms"
outage_backoff = ["100ms", "200ms"]
heartbeat = "500ms"
shutdown_grace = "1s"

[[sensors]]
use = "command"
name = "batch"
every = "24h"
command = {sensor}
"""
SENSOR = """\
import json, os, time
for n in range({batch}):
    print(json.dumps({{"key": f"{{time.time_ns()}}-{{os.getpid()}}-{{n}}", "subject": f"found {{n}}"}}))
"""


class CrashFailure(AssertionError):
    """A round found something lost or left behind."""


def _env(fault: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIGIL_")}
    if fault:
        env["VIGIL_FAULT"] = fault
    return env


def vigil(home: Path, *args: str, fault: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vigil", "--home", str(home), *args],
        capture_output=True,
        text=True,
        env=_env(fault),
        timeout=SAFETY_S,
        check=False,
    )


def setup_home(home: Path) -> Path:
    """Write the crash home's config, its sleeper skill and batch sensor; returns the markers file."""
    markers = home / "markers.txt"
    sensor = home / "batch.py"
    sensor.write_text(SENSOR.format(batch=BATCH), encoding="utf-8")
    (home / "vigil.toml").write_text(CONFIG.format(sensor=json.dumps([sys.executable, str(sensor)])), encoding="utf-8")
    skill = home / "skills" / "sleeper"
    skill.mkdir(parents=True, exist_ok=True)
    command = json.dumps([sys.executable, str(AGENT), str(markers)])
    (skill / "SKILL.md").write_text(f"---\ndescription: Sleeps.\ncommand: {command}\n---\nSleep.\n", encoding="utf-8")
    if vigil(home, "task", "list").returncode != 0:  # creates the database
        raise CrashFailure("cannot open the crash home")
    return markers


def query(home: Path, sql: str, *params: object) -> list[tuple[Any, ...]]:
    """The rows of ``sql`` on the home's database; columns as SQLite returns them."""
    conn = sqlite3.connect(home / "data" / "vigil.db")
    try:
        return list(conn.execute(sql, params))
    finally:
        conn.close()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()[0]
    except OSError:
        return False
    return state != b"Z"


def _agent_pids(markers: Path) -> list[int]:
    if not markers.exists():
        return []
    starts = [line.split() for line in markers.read_text(encoding="utf-8").splitlines() if line.startswith("start")]
    return [int(p) for parts in starts for p in (parts[3], parts[6])]


def _wait(what: str, check: Callable[[], object]) -> None:
    deadline = time.monotonic() + SAFETY_S
    while not check():
        if time.monotonic() > deadline:
            raise CrashFailure(f"timed out waiting for {what}")
        time.sleep(0.05)


def _start_run(home: Path, fault: str | None) -> subprocess.Popen[bytes]:
    with (home / "logs" / "crash-run.out").open("ab") as log:  # the child keeps its own copy
        return subprocess.Popen(
            [sys.executable, "-m", "vigil", "--home", str(home), "run"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=_env(fault),
        )


def _integrity(home: Path) -> None:
    result = query(home, "PRAGMA integrity_check")[0][0]
    if result != "ok":
        raise CrashFailure(f"integrity check: {result}")


def dispatch_round(home: Path, markers: Path, point: str, rng: random.Random) -> bool:
    """One kill of `vigil run` at ``point`` and a restart; True if the kill happened."""
    for _ in range(TASKS_PER_ROUND):
        sleep_s = 2.0 if point == "executor-running" else 0.05
        added = vigil(home, "task", "add", "work", "--skills", "sleeper", "-d", json.dumps({"sleep": sleep_s}))
        if added.returncode != 0:
            raise CrashFailure(f"task add failed: {added.stderr}")
    before = {int(r[0]) for r in query(home, "SELECT id FROM tasks")}
    started = len(_agent_pids(markers))
    fault = None if point == "executor-running" else f"{point}:{rng.randint(1, TASKS_PER_ROUND)}"
    proc = _start_run(home, fault)
    try:
        if point == "executor-running":
            _wait("an agent to start", lambda: len(_agent_pids(markers)) > started)
            time.sleep(rng.uniform(0.0, 0.5))
            proc.send_signal(signal.SIGKILL)
        else:
            # all tasks done without reaching the point would leave it running: stop it then
            _wait("the fault or the queue's end", lambda: proc.poll() is not None or not _open_tasks(home))
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=SAFETY_S)
    killed = code == -signal.SIGKILL
    dead_run_pids = _agent_pids(markers)

    again = _start_run(home, None)
    try:
        _wait("the restarted loop to finish every task", lambda: not _open_tasks(home))
    finally:
        again.send_signal(signal.SIGTERM)
        if again.wait(timeout=SAFETY_S) != 0:
            raise CrashFailure(f"the restarted vigil run exited {again.returncode}")
    after = {int(r[0]) for r in query(home, "SELECT id FROM tasks")}
    if not before <= after:
        raise CrashFailure(f"tasks lost: {sorted(before - after)}")
    active = query(home, "SELECT id FROM tasks WHERE status = 'active'")
    if active:
        raise CrashFailure(f"active without a dispatcher: {active}")
    wrong = query(
        home,
        "SELECT t.id, t.attempt_count, COUNT(r.id) FROM tasks t LEFT JOIN runs r ON r.task_id = t.id"
        " GROUP BY t.id HAVING t.attempt_count != COUNT(r.id)",
    )
    if wrong:
        raise CrashFailure(f"attempt counts differ from runs (id, attempts, runs): {wrong}")
    survivors = [pid for pid in dead_run_pids if _alive(pid)]
    if survivors:
        raise CrashFailure(f"agent processes of the dead run survive: {survivors}")
    _integrity(home)
    return killed


def _open_tasks(home: Path) -> bool:
    return bool(query(home, "SELECT 1 FROM tasks WHERE status IN ('pending', 'active') LIMIT 1"))


def sensor_round(home: Path, rng: random.Random) -> bool:
    before = query(home, "SELECT COUNT(*) FROM tasks")[0][0]
    died = vigil(home, "sensors", "run", "batch", fault=f"sensor-batch:{rng.randint(1, 1)}")
    if died.returncode != -signal.SIGKILL:
        raise CrashFailure(f"the sensor run was not killed: {died.returncode} {died.stderr}")
    if query(home, "SELECT COUNT(*) FROM tasks")[0][0] != before:
        raise CrashFailure("part of a killed batch was stored")
    _integrity(home)
    ok = vigil(home, "sensors", "run", "batch")
    if ok.returncode != 0 or query(home, "SELECT COUNT(*) FROM tasks")[0][0] != before + BATCH:
        raise CrashFailure(f"the batch after the crash was not stored whole: {ok.stdout} {ok.stderr}")
    return True


def migration_round(home: Path) -> bool:
    db = home / "data" / "vigil.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    died = vigil(home, "task", "list", fault="during-migration")
    if died.returncode != -signal.SIGKILL:
        raise CrashFailure(f"the migration was not killed: {died.returncode} {died.stderr}")
    added = vigil(home, "task", "add", "after a killed migration")
    if added.returncode != 0:
        raise CrashFailure(f"the database is not usable after a killed migration: {added.stderr}")
    from vigil.store.sqlite.schema import SCHEMA_VERSION

    if query(home, "PRAGMA user_version")[0][0] != SCHEMA_VERSION:
        raise CrashFailure("the schema version is wrong after a killed migration")
    _integrity(home)
    return True


def backup_round(home: Path, round_number: int) -> bool:
    target = home / f"backup-{round_number}.db"
    tasks = query(home, "SELECT COUNT(*) FROM tasks")[0][0]
    died = vigil(home, "backup", str(target), fault="during-backup")
    if died.returncode != -signal.SIGKILL:
        raise CrashFailure(f"the backup was not killed: {died.returncode} {died.stderr}")
    if target.exists():
        raise CrashFailure("a killed backup left a file under the target's name")
    _integrity(home)
    done = vigil(home, "backup", str(target))
    if done.returncode != 0:
        raise CrashFailure(f"backup after a killed one failed: {done.stderr}")
    conn = sqlite3.connect(target)
    try:
        copied = conn.execute("SELECT COUNT(*) FROM tasks").fetchone()[0]
        check = conn.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        conn.close()
    if (copied, check) != (tasks, "ok"):
        raise CrashFailure(f"the backup holds {copied} of {tasks} tasks, integrity {check}")
    return True


def run_point(home: Path, point: str, *, rounds: int, seed: int) -> int:
    """Run ``rounds`` rounds at ``point`` on ``home`` (initialised); returns how many
    rounds really killed the process. Raises ``CrashFailure`` on the first loss."""
    markers = setup_home(home)
    rng = random.Random(f"{seed}-{point}")
    killed = 0
    for number in range(rounds):
        if point in DISPATCH_POINTS:
            killed += dispatch_round(home, markers, point, rng)
        elif point == "sensor-batch":
            killed += sensor_round(home, rng)
        elif point == "during-migration":
            killed += migration_round(home)
        elif point == "during-backup":
            vigil(home, "task", "add", f"row {number}")
            killed += backup_round(home, number)
        else:
            raise ValueError(f"unknown point {point!r}")
    return killed


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--point", choices=POINTS, action="append")
    args = parser.parse_args(argv)
    from vigil.home import init_home

    failed = 0
    for point in args.point or POINTS:
        with tempfile.TemporaryDirectory() as folder:
            home = Path(folder) / "home"
            init_home(home)
            started = time.monotonic()
            try:
                killed = run_point(home, point, rounds=args.rounds, seed=args.seed)
            except CrashFailure as err:
                failed += 1
                print(f"FAIL {point}: {err}")
                continue
            print(f"ok   {point:17} {args.rounds} rounds, {killed} killed, {time.monotonic() - started:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
