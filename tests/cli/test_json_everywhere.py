"""`--json` on every command that prints data, with the field names docs/cli.md
lists; and `vigil doctor` checks the config as `vigil run` does."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
import pytest

from tests.conftest import VigilRunner
from vigil.cli import main

pytestmark = pytest.mark.slow

# Every command that prints data (what it found, made or did) rather than one
# confirmation line; docs/cli.md lists each with its fields.
PRINTS_DATA = (
    "task add", "task list", "task show", "task diff", "events", "stats", "doctor", "backup", "restore", "store prune",
    "sensors list", "sensors run", "sensors skips", "dispatch once", "status", "alerts test", "alerts check",
)  # fmt: skip


def command(path: str) -> click.Command:
    found: click.Command = main
    for name in path.split():
        assert isinstance(found, click.Group)
        found = found.commands[name]
    return found


def test_every_command_that_prints_data_takes_json_and_docs_list_it() -> None:
    cli_md = (Path(__file__).parents[2] / "docs" / "cli.md").read_text()
    for path in PRINTS_DATA:
        options = [opt for param in command(path).params if isinstance(param, click.Option) for opt in param.opts]
        assert "--json" in options, path
        assert f"| `vigil {path} --json` |" in cli_md, path


def test_doctor_fails_a_config_vigil_run_refuses_and_says_so_in_json(home: Path, vigil: VigilRunner) -> None:
    config = home / "vigil.toml"
    good = vigil("doctor", "--json")
    checks = {c["what"]: c for c in json.loads(good.stdout)["checks"]}
    assert checks["config"]["level"] == "ok"

    config.write_text(config.read_text() + '\n[[sensors]]\nuse = "inbx"\n')
    refused = vigil("run")
    assert refused.returncode == 2
    assert "unknown use 'inbx'" in refused.stderr

    text = vigil("doctor")
    assert text.returncode == 1
    assert any(line.startswith("FAIL  config") and "unknown use 'inbx'" in line for line in text.stdout.splitlines())
    report = json.loads(vigil("doctor", "--json").stdout)
    assert report["ok"] is False
    (config_check,) = [c for c in report["checks"] if c["what"] == "config"]
    assert config_check["level"] == "fail"
    assert "[[sensors]] #1 (use 'inbx')" in config_check["detail"]


def test_dispatch_once_json_says_what_ran(vigil: VigilRunner) -> None:
    idle = vigil("dispatch", "once", "--json")
    assert idle.returncode == 3
    assert json.loads(idle.stdout) == {"ran": False, "task": None, "not_claiming": "no task is due"}
    vigil("task", "add", "dry run it", check=True)
    ran = vigil("dispatch", "once", "--json", check=True)
    report = json.loads(ran.stdout)
    assert report["ran"] is True
    assert report["not_claiming"] is None
    assert (report["task"]["subject"], report["task"]["status"]) == ("dry run it", "completed")


def test_backup_and_restore_json_name_the_files(vigil: VigilRunner, tmp_path: Path, home: Path) -> None:
    vigil("task", "add", "kept", check=True)
    copy = tmp_path / "copy.db"
    report = json.loads(vigil("backup", str(copy), "--json", check=True).stdout)
    assert report == {"path": str(copy.resolve()), "bytes": copy.stat().st_size}
    assert report["bytes"] > 0
    restored = json.loads(vigil("restore", str(copy), "--json", check=True).stdout)
    assert set(restored) == {"database", "backup", "tasks", "kept"}
    assert (restored["backup"], restored["tasks"]) == (str(copy.resolve()), 1)
    assert Path(restored["kept"]).exists()


def test_alerts_test_and_check_json(home: Path, vigil: VigilRunner, tmp_path: Path) -> None:
    got = tmp_path / "alert.json"
    hook = tmp_path / "hook.py"
    hook.write_text(f"import sys, pathlib\npathlib.Path({str(got)!r}).write_text(sys.stdin.read())\n")
    config = home / "vigil.toml"
    config.write_text(config.read_text() + f'\n[alerts]\ncommand = ["{sys.executable}", "{hook}"]\n')
    report = json.loads(vigil("alerts", "test", "--json", check=True).stdout)
    assert report == {"ok": True, "notify": [], "command": {"program": sys.executable, "ok": True, "error": None}}
    assert json.loads(got.read_text())["event"] == "test"
    assert json.loads(vigil("alerts", "check", "--json", check=True).stdout) == {"alerts": []}
