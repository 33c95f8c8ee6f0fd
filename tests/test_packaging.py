"""Installed the way people install a command-line tool: the wheel ``python -m build``
makes, put into a fresh virtual environment (as ``pipx install .`` does), gives a
working ``vigil``: the CLI, a sensor, the dispatcher, the MCP server, the dashboard
with its stylesheet, and a service unit that runs that very install.

The fresh environment gets the wheel's dependencies from pip's cache or the package
index; nothing else of this checkout is on its path (it runs outside the checkout,
without PYTHONPATH), so a package or data file missing from the wheel fails here."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from vigil.distribution import DISTRIBUTION

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("vigil", "sensors", "dispatch", "tui")
INDEX_UNREACHABLE = ("Could not find a version", "No matching distribution", "Failed to establish a new connection")

# The dashboard, headless, in the installed environment: it loads vigil.tcss from
# the installed tui package and shows the open task, the one the sensor added.
DASHBOARD = """\
import asyncio, sys
from pathlib import Path
from tui.app import VigilApp
from tui.queue_table import QueueTable
from vigil.clock import SystemClock
from vigil.config import load_settings
from vigil.store import open_store

async def main() -> None:
    settings = load_settings(Path(sys.argv[1]))
    app = VigilApp(settings, opener=lambda: open_store(settings), clock=SystemClock())
    async with app.run_test(size=(120, 30)) as pilot:
        for _ in range(600):
            await pilot.pause(0.05)
            if 2 in app.queue_screen.query_one(QueueTable).order:
                print("dashboard shows task #2")
                return
    raise SystemExit("the dashboard never showed the task")

asyncio.run(main())
"""


def _run(argv: list[str], cwd: Path, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIGIL_", "PYTHON", "VIRTUAL_ENV"))}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s, check=False)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin folder of a fresh virtual environment holding only the built wheel
    and its dependencies."""
    folder = tmp_path_factory.mktemp("packaging")
    built = _run([sys.executable, "-m", "build", "--wheel", "--outdir", str(folder / "dist"), str(REPO)], folder)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (folder / "dist").glob("*.whl")
    assert wheel.name.startswith(DISTRIBUTION.replace("-", "_") + "-")
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names} >= set(PACKAGES)
    assert "tui/vigil.tcss" in names
    assert _run([sys.executable, "-m", "venv", str(folder / "venv")], folder).returncode == 0
    bin_dir = folder / "venv" / "bin"
    done = _run([str(bin_dir / "pip"), "install", "--quiet", str(wheel)], folder, timeout_s=600)
    if done.returncode != 0 and any(sign in done.stderr for sign in INDEX_UNREACHABLE):
        pytest.skip("installing the wheel's dependencies needs the package index (or pip's cache holding them)")
    assert done.returncode == 0, done.stderr
    return bin_dir


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_wheel_in_a_fresh_environment_runs_the_tour(installed: Path, tmp_path: Path) -> None:
    home = tmp_path / "agent"

    def vigil(*args: str) -> str:
        done = _run([str(installed / "vigil"), *args], tmp_path)
        assert done.returncode == 0, f"vigil {' '.join(args)}: {done.stderr}"
        assert "Traceback" not in done.stderr
        return done.stdout

    assert vigil("--version") == "vigil, version 0.1.0\n"  # read from the distribution's metadata
    vigil("init", str(home))
    with (home / "vigil.toml").open("a", encoding="utf-8") as config:
        config.write('\n[[sensors]]\nuse = "inbox"\nevery = "1h"\nsettle = "0s"\n')
    (home / "inbox").mkdir()
    (home / "inbox" / "note.txt").write_text("from the inbox\n", encoding="utf-8")
    h = ("--home", str(home))
    assert "created task #1" in vigil(*h, "task", "add", "Triage the note in the inbox", "-p", "3")
    assert "Triage the note in the inbox" in vigil(*h, "task", "list")
    assert "created 1 (#2)" in vigil(*h, "sensors", "run", "inbox")
    assert "#1" in vigil(*h, "dispatch", "once")
    assert "completed" in vigil(*h, "task", "show", "1")
    assert "MCP server" in vigil("mcp", "--help")
    assert f"{DISTRIBUTION} 0.1.0" in vigil(*h, "doctor")
    unit = vigil(*h, "service", "install", "--dry-run")
    (start,) = (line for line in unit.splitlines() if line.startswith("ExecStart="))
    python, rest = start.removeprefix("ExecStart=").split(" ", 1)
    assert Path(python).parent == installed  # this install's interpreter (python3.11 or so)
    assert rest == f"-m vigil --home {home} run"
    shown = _run([str(installed / "python"), "-c", DASHBOARD, str(home)], tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "dashboard shows task #2" in shown.stdout
