"""Helpers for the lanes acceptance tests: a home whose `lane` skill runs
tests/daemon/lane_agent.sh, `vigil run` processes, and what the agents recorded."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

LANE_AGENT = Path(__file__).resolve().parent / "lane_agent.sh"


@dataclass(frozen=True)
class Event:
    kind: str  # start or end
    task_id: int
    run_id: int
    pid: int
    dispatcher_pid: int  # the `vigil run` that started the agent
    ns: int


@dataclass
class Records:
    """The lines tests/daemon/lane_agent.sh appended (see its header)."""

    path: Path

    def events(self) -> list[Event]:
        if not self.path.exists():
            return []
        found = []
        # a line still being appended has no newline yet: leave it for the next read
        for line in self.path.read_text(encoding="utf-8").split("\n")[:-1]:
            kind, *numbers = line.split()
            found.append(Event(kind, *map(int, numbers)))
        return found

    def starts(self) -> list[Event]:
        return [e for e in self.events() if e.kind == "start"]

    def ends(self) -> list[Event]:
        return [e for e in self.events() if e.kind == "end"]

    def max_overlap(self, *, cut_short: dict[int, int] | None = None) -> int:
        """The most agents that were running at one moment. A run that never ended
        (its agent was killed) ends at ``cut_short[run_id]`` (ns) if given, else
        runs on to the end."""
        ends = {e.run_id: e.ns for e in self.ends()}
        ends.update(cut_short or {})
        points = []
        for start in self.starts():
            points.append((start.ns, 1))
            points.append((ends.get(start.run_id, 2**63), -1))
        running = peak = 0
        for _, delta in sorted(points):  # an end sorts before a start at the same ns
            running += delta
            peak = max(peak, running)
        return peak


def write_lane_home(home: Path, records: Path, config: str) -> None:
    """``config`` becomes vigil.toml; the `lane` skill runs the lane agent."""
    (home / "vigil.toml").write_text(config, encoding="utf-8")
    skill = home / "skills" / "lane"
    skill.mkdir(parents=True, exist_ok=True)
    command = json.dumps(["/bin/sh", str(LANE_AGENT), str(records)])
    (skill / "SKILL.md").write_text(
        f"---\ndescription: Records when it starts and ends.\ncommand: {command}\n---\nRecord.\n", encoding="utf-8"
    )


def start_run(home: Path, log_path: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """One `vigil run` with its console log in ``log_path``."""
    with log_path.open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "vigil", "--home", str(home), "run"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
