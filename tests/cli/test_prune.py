"""`vigil store prune` through the CLI (in this process), on a home whose history was
written ten days ago (a manual clock) and today."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tests.conftest import VigilRunner
from vigil.clock import ManualClock, SystemClock
from vigil.config import load_settings
from vigil.models import NewTask, Outcome, OutcomeKind
from vigil.store.sqlite import SqliteStore

DAY_MS = 86_400_000
ALL = "pending,active,blocked,completed,failed,canceled"


def _seed(home: Path) -> list[Path]:
    """Three finished tasks ten days old (transcripts in logs/runs/), one finished
    today and one pending; returns the old transcripts."""
    settings = load_settings(home)
    runs = settings.logs_dir / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    clock = ManualClock(SystemClock().now_ms() - 10 * DAY_MS)
    old: list[Path] = []

    async def work() -> None:
        async with await SqliteStore.open(settings.store.path, clock=clock) as store:
            for n in range(4):
                if n == 3:
                    clock.set(SystemClock().now_ms())
                await store.add_task(NewTask(f"task {n}", source="sensor:feeds"))
                claim = await store.claim_next(worker="w", lease_ms=60_000)
                assert claim is not None
                transcript = runs / f"{claim.task.id}-1.jsonl"
                transcript.write_text("{}\n", encoding="utf-8")
                if n < 3:
                    old.append(transcript)
                outcome = Outcome(OutcomeKind.SUCCESS, cost_usd=0.5, tokens_in=100, transcript_path=str(transcript))
                await store.record(claim, outcome, worker="w")
            await store.add_task(NewTask("still to do"))

    asyncio.run(work())
    return old


def _stats(vigil_in_process: VigilRunner, by: str) -> object:
    return json.loads(vigil_in_process("stats", "--since", "30d", "--by", by, "--json", check=True).stdout)["rows"]


def test_prune_dry_run_then_prune_keeps_stats_and_removes_transcripts(
    vigil_in_process: VigilRunner, home: Path
) -> None:
    old = _seed(home)
    before = {by: _stats(vigil_in_process, by) for by in ("day", "skill", "source", "sensor", "model")}

    dry = vigil_in_process("store", "prune", "--older-than", "7d", "--dry-run", check=True)
    assert dry.stdout.startswith("would prune 3 finished task(s), 3 run(s)")
    assert "3 transcript(s)" in dry.stdout
    assert all(path.exists() for path in old)
    assert len(json.loads(vigil_in_process("task", "list", "--status", ALL, "--json", check=True).stdout)["tasks"]) == 5

    done = vigil_in_process("store", "prune", "--older-than", "7d", "--json", check=True)
    report = json.loads(done.stdout)
    assert (report["tasks"], report["runs"], report["transcripts_removed"], report["dry_run"]) == (3, 3, 3, False)
    assert not any(path.exists() for path in old)
    left = json.loads(vigil_in_process("task", "list", "--status", ALL, "--json", check=True).stdout)["tasks"]
    assert sorted(t["subject"] for t in left) == ["still to do", "task 3"]
    assert {by: _stats(vigil_in_process, by) for by in before} == before

    again = vigil_in_process("store", "prune", "--older-than", "7d", check=True)
    assert again.stdout.startswith("pruned 0 finished task(s)")


def test_prune_uses_the_retention_setting(vigil_in_process: VigilRunner, home: Path) -> None:
    _seed(home)
    config = home / "vigil.toml"
    config.write_text(config.read_text(encoding="utf-8") + '\n[retention]\nkeep_finished = "9d"\n', encoding="utf-8")
    assert vigil_in_process("store", "prune", check=True).stdout.startswith("pruned 3 finished task(s)")


def test_prune_refuses_without_a_setting_or_with_a_bad_duration(vigil_in_process: VigilRunner, home: Path) -> None:
    _seed(home)
    off = vigil_in_process("store", "prune")
    assert (off.returncode, off.stderr.count("\n")) == (2, 1)
    assert "retention is off" in off.stderr
    bad = vigil_in_process("store", "prune", "--older-than", "a while")
    assert (bad.returncode, bad.stderr.count("\n")) == (2, 1)
    assert "invalid duration" in bad.stderr
    inside_a_run = vigil_in_process("store", "prune", "--older-than", "1d", env={"VIGIL_TASK_ID": "1"})
    assert inside_a_run.returncode == 2
    assert "only a person" in inside_a_run.stderr
    assert len(json.loads(vigil_in_process("task", "list", "--status", ALL, "--json", check=True).stdout)["tasks"]) == 5


def test_keep_events_alone_prunes_old_audit_rows_and_no_task(vigil_in_process: VigilRunner, home: Path) -> None:
    _seed(home)
    config = home / "vigil.toml"
    config.write_text(config.read_text(encoding="utf-8") + '\n[retention]\nkeep_events = "2d"\n', encoding="utf-8")

    report = json.loads(vigil_in_process("store", "prune", "--json", check=True).stdout)

    # the three old tasks' audit rows (created, active, completed): the tasks stay
    assert (report["tasks"], report["events"]) == (0, 9)
    assert len(json.loads(vigil_in_process("task", "list", "--status", ALL, "--json", check=True).stdout)["tasks"]) == 5
    old = json.loads(vigil_in_process("task", "show", "1", "--json", check=True).stdout)
    assert old["events"] == []


def test_keep_costs_and_keep_keys_show_in_a_dry_run_and_bound_the_archive(
    vigil_in_process: VigilRunner, home: Path
) -> None:
    _seed(home)
    # three old tasks: one archive row, folded at once into a day row (it is ten days old)
    first = json.loads(vigil_in_process("store", "prune", "--older-than", "7d", "--json", check=True).stdout)
    assert (first["tasks"], first["archive_rows_folded"]) == (3, 1)
    assert _stats(vigil_in_process, "day") != []
    config = home / "vigil.toml"
    config.write_text(
        config.read_text(encoding="utf-8") + '\n[retention]\nkeep_costs = "2d"\nkeep_keys = "1d"\n', encoding="utf-8"
    )

    dry = vigil_in_process("store", "prune", "--dry-run", check=True)
    assert "fold 0 archive hour row(s) into days, drop 1 archive row(s) and 0 retired key(s)" in dry.stdout
    assert _stats(vigil_in_process, "day") != []
    report = json.loads(vigil_in_process("store", "prune", "--json", check=True).stdout)

    assert (report["tasks"], report["archive_rows"], report["archive_rows_folded"], report["retired_keys"]) == (
        0,
        1,
        0,
        0,
    )
    rows = json.loads(vigil_in_process("stats", "--since", "30d", "--by", "day", "--json", check=True).stdout)["rows"]
    assert [(row["runs"], row["cost_usd"]) for row in rows] == [(1, 0.5)]  # only today's task is left to count


def test_a_bad_keep_costs_is_one_line_and_exit_2(vigil_in_process: VigilRunner, home: Path) -> None:
    config = home / "vigil.toml"
    config.write_text(config.read_text(encoding="utf-8") + '\n[retention]\nkeep_costs = "10m"\n', encoding="utf-8")
    bad = vigil_in_process("store", "prune", "--dry-run")
    assert (bad.returncode, bad.stderr.count("\n")) == (2, 1)
    assert "[retention] keep_costs: expected a duration of at least 1h" in bad.stderr
