"""The cases of the bad-input catalogue (run by ``tests.reliability.catalogue``).

The seeded home has an ``agent`` skill run by the ``claude`` executor, whose
command is ``agent.py`` in the home: a stand-in that prints, as its whole output,
the bytes of the file ``agent.out`` and exits with the number in ``agent.exit``.
A ``command`` sensor ``s`` likewise prints ``sensor.out`` and exits ``sensor.exit``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from tests.reliability.catalogue import Case, vigil

AGENT = """\
import sys
from pathlib import Path
here = Path(__file__).parent
sys.stdin.buffer.read()
out = here / "agent.out"
if out.exists():
    sys.stdout.buffer.write(out.read_bytes())
    sys.stdout.flush()
code = here / "agent.exit"
sys.exit(int(code.read_text()) if code.exists() else 0)
"""
SENSOR = AGENT.replace("agent.", "sensor.")
CONFIG = """\
[dispatch]
executor = "dry-run"
max_retries = 0

[executors.claude]
command = [{python}, {agent}]

[[sensors]]
use = "command"
name = "s"
every = "1h"
command = [{python}, {sensor}]
"""
# A recurring task every 15 minutes of Berlin time (it once froze vigil run in the
# hour that comes twice when clocks go back, ignoring SIGTERM).
BERLIN_EVERY_15 = """\
[dispatch]
executor = "dry-run"

[[sensors]]
use = "schedule"
name = "quarterly"
cron = "*/15 * * * *"
timezone = "Europe/Berlin"
subject = "check at {time}"
"""
INIT = {"type": "system", "subtype": "init", "session_id": "s1", "model": "m", "tools": [], "cwd": "/x"}
RESULT = {
    "type": "result",
    "subtype": "success",
    "is_error": False,
    "result": "all done",
    "session_id": "s1",
    "total_cost_usd": 0.01,
    "usage": {"input_tokens": 1, "output_tokens": 1},
}


def write_agent_skill(home: Path) -> None:
    """The ``agent`` skill, its stand-in CLI, and the ``s`` sensor (see the module doc)."""
    (home / "agent.py").write_text(AGENT, encoding="utf-8")
    (home / "sensor.py").write_text(SENSOR, encoding="utf-8")
    config = CONFIG.format(
        python=json.dumps(sys.executable),
        agent=json.dumps(str(home / "agent.py")),
        sensor=json.dumps(str(home / "sensor.py")),
    )
    (home / "vigil.toml").write_text(config, encoding="utf-8")
    skill = home / "skills" / "agent"
    skill.mkdir(parents=True, exist_ok=True)
    (skill / "SKILL.md").write_text(
        "---\ndescription: Runs the agent.\nexecutor: claude\n---\nDo it.\n", encoding="utf-8"
    )


def line(obj: object) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def agent(output: bytes, exit_code: int = 0) -> Callable[[Path], None]:
    def prepare(home: Path) -> None:
        (home / "agent.out").write_bytes(output)
        (home / "agent.exit").write_text(str(exit_code), encoding="utf-8")

    return prepare


def sensor(output: bytes, exit_code: int = 0) -> Callable[[Path], None]:
    def prepare(home: Path) -> None:
        (home / "sensor.out").write_bytes(output)
        (home / "sensor.exit").write_text(str(exit_code), encoding="utf-8")

    return prepare


def config(text: str) -> Callable[[Path], None]:
    def prepare(home: Path) -> None:
        (home / "vigil.toml").write_text(text, encoding="utf-8")

    return prepare


def paused(text: str) -> Callable[[Path], None]:
    """vigil.toml replaced by ``text``, and the loop paused: the daemon's dispatcher
    takes none of the seeded tasks."""

    def prepare(home: Path) -> None:
        (home / "vigil.toml").write_text(text, encoding="utf-8")
        done = vigil(home, "pause", "--reason", "catalogue")
        if done.returncode != 0:
            raise RuntimeError(f"vigil pause failed: {done.stderr}")

    return prepare


def config_bytes(data: bytes) -> Callable[[Path], None]:
    def prepare(home: Path) -> None:
        (home / "vigil.toml").write_bytes(data)

    return prepare


def skill_file(text: str | None, skill: str = "agent") -> Callable[[Path], None]:
    """Replace (or with None, remove) the skill's SKILL.md."""

    def prepare(home: Path) -> None:
        path = home / "skills" / skill / "SKILL.md"
        if text is None:
            path.unlink()
        else:
            path.write_text(text, encoding="utf-8")

    return prepare


def task_skills(skills: list[str]) -> Callable[[Path], None]:
    """Give the run task these skills, as a sensor or an old version might have."""

    def prepare(home: Path) -> None:
        conn = sqlite3.connect(home / "data" / "vigil.db")
        with conn:
            conn.execute("UPDATE tasks SET skills = ? WHERE id = 4", (json.dumps(skills),))
        conn.close()

    return prepare


def db_bytes(data: bytes) -> Callable[[Path], None]:
    def prepare(home: Path) -> None:
        for suffix in ("-wal", "-shm"):
            Path(f"{home / 'data' / 'vigil.db'}{suffix}").unlink(missing_ok=True)
        (home / "data" / "vigil.db").write_bytes(data)

    return prepare


def user_version(version: int) -> Callable[[Path], None]:
    def prepare(home: Path) -> None:
        conn = sqlite3.connect(home / "data" / "vigil.db")
        conn.execute(f"PRAGMA user_version = {version}")
        conn.close()

    return prepare


def _immutable(path: Path, on: bool) -> None:
    """Make ``path`` unwritable even for root (chattr), else by its mode."""
    if os.geteuid() == 0:
        subprocess.run(["chattr", "+i" if on else "-i", str(path)], check=True)
    elif path.is_dir():
        path.chmod(0o500 if on else 0o700)
    else:
        path.chmod(0o400 if on else 0o600)


def read_only(relative: str, on: bool) -> Callable[[Path], None]:
    def change(home: Path) -> None:
        if on:
            # no -wal or -shm left behind: with them in place a read-only folder
            # still lets SQLite write (only creating those files needs the folder)
            conn = sqlite3.connect(home / "data" / "vigil.db")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.close()
        _immutable(home / relative, on)

    return change


def _copy_files(source: Path, target: Path) -> None:
    for path in source.iterdir():
        (target / path.name).write_bytes(path.read_bytes())
        (target / path.name).chmod(0o600)


def fill_disk(home: Path) -> None:
    """Put ``data/`` on a tmpfs with 32 KiB to spare (needs root: ``mount``)."""
    data, aside = home / "data", home / "data.aside"
    aside.mkdir()
    _copy_files(data, aside)
    used = sum(p.stat().st_size for p in aside.iterdir())
    size_k = used // 1024 + 32
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_k}k,mode=0700", "tmpfs", str(data)], check=True)
    _copy_files(aside, data)


def free_disk(home: Path) -> None:
    """Undo ``fill_disk``: the files on the tmpfs go back to the real folder."""
    data, aside = home / "data", home / "data.aside"
    for path in aside.iterdir():
        path.unlink()
    _copy_files(data, aside)
    subprocess.run(["umount", str(data)], check=True)
    for path in data.iterdir():
        path.unlink()
    _copy_files(aside, data)


BIG = b"x" * (100 * 1024 * 1024)
DB = "data/vigil.db"

CLI = [
    Case("CLI", "empty subject", ("task", "add", ""), 2, "subject must not be empty"),
    Case("CLI", "priority out of range", ("task", "add", "x", "-p", "0"), 2, "priority must be 1-9"),
    Case("CLI", "priority not a number", ("task", "add", "x", "-p", "high"), 2, "priority must be an integer"),
    Case("CLI", "unreadable time", ("task", "add", "x", "--at", "tomorrow-ish"), 2, "invalid time"),
    Case("CLI", "unreadable duration", ("task", "add", "x", "--in", "5 fortnights"), 2, "invalid duration"),
    Case("CLI", "--at and --in together", ("task", "add", "x", "--at", "2030-01-01", "--in", "1h"), 2, "not both"),
    Case("CLI", "--dedup without --key", ("task", "add", "x", "--dedup", "ever"), 2, "--dedup needs --key"),
    Case("CLI", "dependency that does not exist", ("task", "add", "x", "--depends-on", "99"), 2, "task #99 not found"),
    Case("CLI", "parent that does not exist", ("task", "add", "x", "--parent", "99"), 2, "task #99 not found"),
    Case("CLI", "skill name with ../", ("task", "add", "x", "--skills", "../x"), 2, "invalid skill name '../x'"),
    Case("CLI", "task id not a number", ("task", "show", "abc"), 2, "is not a valid integer", usage=True),
    Case("CLI", "unknown task", ("task", "show", "99"), 2, "task #99 not found"),
    Case("CLI", "retry a pending task", ("task", "retry", "1"), 2, "task #1 is pending, cannot retry it"),
    Case("CLI", "cancel a canceled task", ("task", "cancel", "2"), 2, "task #2 is canceled, cannot cancel"),
    Case(
        "CLI",
        "close with an unknown status",
        ("task", "close", "1", "--status", "done", "--summary", "x"),
        2,
        "'done' is not one of",
        usage=True,
    ),
    Case("CLI", "unknown status filter", ("task", "list", "--status", "done"), 2, "unknown status 'done'"),
    Case("CLI", "unknown command", ("frobnicate",), 2, "No such command 'frobnicate'", usage=True),
]

CONFIG_CASES = [
    Case("vigil.toml", "not TOML", ("task", "list"), 2, "vigil.toml: not valid TOML", config("[dispatch\nexecutor = ")),
    Case(
        "vigil.toml",
        "not UTF-8",
        ("task", "list"),
        2,
        "vigil.toml",
        config_bytes(b'[dispatch]\nexecutor = "\xff\xfe"\n'),
    ),
    Case(
        "vigil.toml",
        "wrong type",
        ("task", "list"),
        2,
        "[dispatch] max_retries: expected an integer",
        config('[dispatch]\nmax_retries = "three"\n'),
    ),
    Case(
        "vigil.toml",
        "misspelt key",
        ("task", "list"),
        2,
        "[dispatch] unknown key 'executer'",
        config('[dispatch]\nexecuter = "claude"\n'),
    ),
    Case(
        "vigil.toml",
        "unreadable duration",
        ("task", "list"),
        2,
        "[dispatch] timeout",
        config('[dispatch]\ntimeout = "5 parsecs"\n'),
    ),
    Case(
        "vigil.toml", "unknown executor", ("dispatch", "once"), 2, "executor", config('[dispatch]\nexecutor = "gpt"\n')
    ),
    Case(
        "vigil.toml",
        "unknown sensor",
        ("sensors", "list"),
        2,
        "unknown use 'nope'",
        config('[[sensors]]\nuse = "nope"\nevery = "1h"\n'),
    ),
    Case(
        "vigil.toml",
        "sensor schedule unreadable",
        ("sensors", "list"),
        2,
        "every",
        config('[[sensors]]\nuse = "inbox"\nevery = "often"\n'),
    ),
]

SENSOR_CASES = [
    Case(
        "sensor",
        "a line that is not JSON",
        ("sensors", "run", "s"),
        0,
        "line 1",
        sensor(b"not json\n" + line({"key": "a", "subject": "good"})),
        kind="sensor",
    ),
    Case(
        "sensor",
        "JSON without a subject",
        ("sensors", "run", "s"),
        0,
        "subject",
        sensor(line({"key": "a"})),
        kind="sensor",
    ),
    Case(
        "sensor",
        "priority of the wrong type",
        ("sensors", "run", "s"),
        0,
        "priority",
        sensor(line({"key": "a", "subject": "s", "priority": "high"})),
        kind="sensor",
    ),
    Case(
        "sensor", "JSON array, not an object", ("sensors", "run", "s"), 0, "line 1", sensor(b"[1, 2]\n"), kind="sensor"
    ),
    Case(
        "sensor",
        "invalid UTF-8 and NUL bytes",
        ("sensors", "run", "s"),
        0,
        "line 1",
        sensor(b"\xff\xfe\x00\x00\n"),
        kind="sensor",
    ),
    Case(
        "sensor",
        "program fails (exit 3)",
        ("sensors", "run", "s"),
        1,
        "error: CommandFailed: exited with status 3",
        sensor(line({"key": "a", "subject": "s"}), 3),
        kind="sensor",
    ),
]

AGENT_CASES = [
    Case(
        "agent output",
        "invalid UTF-8 line, then a result",
        ("dispatch", "once"),
        0,
        "all done",
        agent(line(INIT) + b"\xff\xfe\xc3(\n" + line(RESULT)),
        kind="run",
        status="completed",
    ),
    Case(
        "agent output",
        "NUL bytes in a line, then a result",
        ("dispatch", "once"),
        0,
        "all done",
        agent(line(INIT) + b'{"type":"assistant"\x00\x00}\n' + line(RESULT)),
        kind="run",
        status="completed",
    ),
    Case(
        "agent output",
        "a 100 MB line, then a result",
        ("dispatch", "once"),
        0,
        "all done",
        agent(line(INIT) + BIG + b"\n" + line(RESULT)),
        kind="run",
        status="completed",
    ),
    Case(
        "agent output",
        "valid JSON of the wrong shape",
        ("dispatch", "once"),
        0,
        "unexpected shape",
        agent(b"[1, 2, 3]\n" + line({"type": "result", "result": 42, "total_cost_usd": "lots"})),
        kind="run",
    ),
    Case(
        "agent output",
        "early EOF (no result event)",
        ("dispatch", "once"),
        0,
        "crashed: no result line (exit code 0)",
        agent(line(INIT)),
        kind="run",
    ),
    Case(
        "agent output",
        "killed: exit 137, no output",
        ("dispatch", "once"),
        0,
        "no result line (exit code 137)",
        agent(b"", 137),
        kind="run",
    ),
]

SKILL_CASES = [
    Case("skill", "SKILL.md missing", ("dispatch", "once"), 0, "unknown skill 'agent'", skill_file(None), kind="run"),
    Case(
        "skill",
        "no front matter",
        ("dispatch", "once"),
        0,
        "must start with YAML front matter",
        skill_file("just text\n"),
        kind="run",
    ),
    Case(
        "skill",
        "front matter not YAML",
        ("dispatch", "once"),
        0,
        "front matter",
        skill_file("---\ndescription: [unclosed\n---\nx\n"),
        kind="run",
    ),
    Case(
        "skill",
        "name differs from folder",
        ("dispatch", "once"),
        0,
        "does not match the folder name",
        skill_file("---\nname: other\ndescription: d\n---\nx\n"),
        kind="run",
    ),
    Case(
        "skill",
        "stored skill name with ../",
        ("dispatch", "once"),
        0,
        "invalid skill name '../agent'",
        task_skills(["../agent"]),
        kind="run",
    ),
]

DATABASE_CASES = [
    Case(
        "database",
        "not a database file",
        ("task", "list"),
        2,
        "is not a Vigil database",
        db_bytes(b"not sqlite\n" * 100),
    ),
    Case("database", "from a newer schema", ("task", "list"), 2, "schema version 99, newer than", user_version(99)),
    Case(
        "database",
        "read-only file, write attempted",
        ("task", "add", "x"),
        1,
        "read-only; nothing was changed",
        read_only(DB, True),
        undo=read_only(DB, False),
    ),
    Case(
        "database",
        "read-only folder, write attempted",
        ("task", "add", "x"),
        1,
        "readable and writable",
        read_only("data", True),
        undo=read_only("data", False),
    ),
    Case(
        "database",
        "read-only folder, read only",
        ("task", "list"),
        1,
        "readable and writable",
        read_only("data", True),
        undo=read_only("data", False),
    ),
    Case(
        "database",
        "file-size limit (ulimit -f)",
        ("task", "add", "x", "-d", "y" * 100_000),
        1,
        "nothing of this change was stored",
        file_limit_bytes=64 * 1024,
    ),
    Case(
        "database",
        "full disk (a small tmpfs)",
        ("task", "add", "x", "-d", "y" * 100_000),
        1,
        "the disk is full; nothing of this change was stored",
        fill_disk,
        undo=free_disk,
        needs_root=True,
    ),
]

# The daemon itself, on a simulated clock.
DAEMON_CASES = [
    Case(
        "sensor",
        "dst: cron */15 in Europe/Berlin, started at 02:05 in the repeated hour",
        ("run",),
        0,
        "stopped",
        paused(BERLIN_EVERY_15),
        kind="daemon",
        simulated_from=int(datetime(2026, 10, 25, 1, 5, tzinfo=UTC).timestamp() * 1000),  # 02:05 CET
        makes_tasks=True,
    ),
]

CASES: list[Case] = [*CLI, *CONFIG_CASES, *SENSOR_CASES, *AGENT_CASES, *SKILL_CASES, *DATABASE_CASES, *DAEMON_CASES]
