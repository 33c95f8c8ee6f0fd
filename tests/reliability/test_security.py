"""Security: private files, no shell, skills stay in their folder, secrets masked,
an explicit agent environment, outside text fenced as data.

Each test runs the real ``vigil`` in a subprocess on a fresh home (umask 000 where
file modes are checked: the code, not the umask, must make files private).
"""

from __future__ import annotations

import ast
import json
import os
import stat
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.reliability.support import read_record, run_vigil, write_probe_skill
from vigil.clock import SystemClock
from vigil.config import load_settings
from vigil.models import NewTask
from vigil.store import open_store
from vigil.store.sqlite import SqliteStore

pytestmark = pytest.mark.slow

PACKAGES = ("vigil", "dispatch", "sensors", "tui")
METACHARS = "; touch {c}1 && $(touch {c}2) `touch {c}3` | touch {c}4 > {c}5 ' \" \\ $HOME *"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def task_json(home: Path, task_id: int) -> dict[str, object]:
    shown = run_vigil(home, "task", "show", str(task_id), "--json")
    assert shown.returncode == 0, shown.stderr
    value: dict[str, object] = json.loads(shown.stdout)
    return value


def test_database_logs_and_transcripts_are_private_even_with_umask_000(home: Path) -> None:
    added = run_vigil(home, "task", "add", "private", umask=0)
    assert added.returncode == 0, added.stderr
    ran = run_vigil(home, "dispatch", "once", umask=0)
    assert ran.returncode == 0, ran.stderr
    settings = load_settings(home)
    db = settings.store.path
    assert (mode(db), mode(db.parent)) == (0o600, 0o700)
    log = settings.logs_dir / "vigil.log"
    assert "task #1" in log.read_text(encoding="utf-8")
    assert (mode(log), mode(log.parent)) == (0o600, 0o700)
    transcripts = list((settings.logs_dir / "runs").iterdir())
    assert [p.name for p in transcripts] == ["1-1.jsonl"]
    assert (mode(transcripts[0]), mode(transcripts[0].parent)) == (0o600, 0o700)


def test_a_log_left_world_readable_is_made_private(home: Path) -> None:
    logs = home / "logs"
    (logs / "vigil.log").write_text("old line\n", encoding="utf-8")
    (logs / "vigil.log").chmod(0o644)
    run_vigil(home, "task", "add", "x", umask=0)
    assert run_vigil(home, "dispatch", "once", umask=0).returncode == 0
    assert mode(logs / "vigil.log") == 0o600
    assert (logs / "vigil.log").read_text(encoding="utf-8").startswith("old line\n")


async def test_wal_and_shared_memory_files_are_private(home: Path) -> None:
    old = os.umask(0)
    try:
        store = await SqliteStore.open(home / "data" / "vigil.db", clock=SystemClock())
        try:
            await store.add_task(NewTask("in the log"))
            wal = home / "data" / "vigil.db-wal"
            shm = home / "data" / "vigil.db-shm"
            assert (mode(wal), mode(shm)) == (0o600, 0o600)
        finally:
            await store.close()
    finally:
        os.umask(old)


def _shell_calls(path: Path) -> list[str]:
    """Calls in ``path`` that hand a string to a shell."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if not isinstance(node, ast.Call):
            continue
        name = ast.unparse(node.func)
        if name.endswith(("os.system", "os.popen", "create_subprocess_shell", "pty.spawn", "commands.getoutput")):
            found.append(f"{path.name}:{node.lineno} {name}")
        for keyword in node.keywords:
            if keyword.arg == "shell" and not (
                isinstance(keyword.value, ast.Constant) and keyword.value.value is False
            ):
                found.append(f"{path.name}:{node.lineno} {name}(shell=…)")
    return found


def test_no_code_hands_a_string_to_a_shell() -> None:
    files = [p for package in PACKAGES for p in (REPO / package).rglob("*.py")]
    assert len(files) > 50  # the packages were found
    assert [call for path in files for call in _shell_calls(path)] == []


def test_the_shell_check_sees_what_it_looks_for(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import os, subprocess, asyncio\n"
        "os.system('x')\n"
        "subprocess.run('x', shell=True)\n"
        "asyncio.create_subprocess_shell('x')\n"
        "subprocess.run(['x'], shell=False)\n",
        encoding="utf-8",
    )
    assert len(_shell_calls(sample)) == 3


def test_shell_metacharacters_in_every_field_stay_text(home: Path, tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    text = METACHARS.format(c=canary)
    record = tmp_path / "record.json"
    write_probe_skill(home, record)
    added = run_vigil(
        home, "task", "add", text, "--description", text, "--key", text, "--source", text, "--skills", "probe"
    )
    assert added.returncode == 0, added.stderr
    ran = run_vigil(home, "dispatch", "once")  # the probe prints the description back
    assert ran.returncode == 0, ran.stderr

    assert list(tmp_path.glob("canary*")) == []
    got = read_record(record)
    assert got["argv"] == [str(home / "skills" / "probe" / "probe.py"), str(record)]
    payload = json.loads(got["stdin"])
    assert (payload["subject"], payload["description"]) == (text, text)
    task = task_json(home, 1)
    assert (task["subject"], task["source_key"], task["source"], task["status"]) == (text, text, text, "completed")
    assert task["result_detail"] == text  # what the agent printed, stored as text


def test_shell_metacharacters_in_skill_names_are_refused(home: Path, tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    for bad in (f"a;touch {canary}", f"$(touch {canary})", "a b", "A"):
        added = run_vigil(home, "task", "add", "x", "--skills", bad)
        assert added.returncode == 2
        assert "invalid skill name" in added.stderr
    assert not canary.exists()
    assert json.loads(run_vigil(home, "task", "list", "--json").stdout)["tasks"] == []


def test_sensor_output_with_metacharacters_stays_text(home: Path, tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    text = METACHARS.format(c=canary)
    line = json.dumps({"key": text, "subject": text, "description": text})
    script = tmp_path / "emit.py"
    script.write_text(f"print({line!r})\n", encoding="utf-8")
    argv = json.dumps([sys.executable, str(script)])
    config = home / "vigil.toml"
    sensor = f'\n[[sensors]]\nuse = "command"\nname = "meta"\nevery = "1h"\ncommand = {argv}\n'
    config.write_text(config.read_text(encoding="utf-8") + sensor, encoding="utf-8")
    ran = run_vigil(home, "sensors", "run", "meta")
    assert ran.returncode == 0, ran.stderr
    assert run_vigil(home, "dispatch", "once").returncode == 0
    assert list(tmp_path.glob("canary*")) == []
    task = task_json(home, 1)
    assert (task["subject"], task["source_key"], task["source"]) == (text, f"meta:{text}", "sensor:meta")


@pytest.mark.parametrize("name", ["../outside", "..", "a/../../b", "/etc", "skills/../x", "a\nb", "x" * 65])
def test_a_skill_name_cannot_leave_the_skills_folder(home: Path, tmp_path: Path, name: str) -> None:
    added = run_vigil(home, "task", "add", "x", "--skills", name)
    assert added.returncode == 2
    assert "invalid skill name" in added.stderr
    assert added.stderr.count("\n") == 1


async def test_a_stored_task_with_an_escaping_skill_fails_without_reading_outside(home: Path) -> None:
    # the store keeps skills as given (a sensor or an old version may have written
    # them); the check that matters is the one made when the task runs
    outside = home / "outside"
    outside.mkdir()
    (outside / "SKILL.md").write_text("---\ndescription: escaped\n---\nSECRET-SKILL-BODY\n", encoding="utf-8")
    settings = load_settings(home)
    store = await open_store(settings, SystemClock())
    try:
        await store.add_task(NewTask("escape", skills=("../outside",)))
    finally:
        await store.close()
    assert run_vigil(home, "dispatch", "once").returncode == 0
    task = task_json(home, 1)
    assert task["status"] == "failed"
    assert "invalid skill name" in str(task["result_summary"])
    runs = settings.logs_dir / "runs"
    written = [p.read_text(encoding="utf-8") for p in runs.iterdir()] if runs.exists() else []
    assert not any("SECRET-SKILL-BODY" in text for text in written)
