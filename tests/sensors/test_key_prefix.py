"""``key_prefix``: sensors that share one key space dedupe against each other and,
with the empty prefix, against ``vigil task add --key``. Through the real CLI and,
for the race, two processes on one database."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import VigilRunner
from tests.sensors.racers import run_racers
from vigil.store.sqlite import SqliteStore

# Two entries use this one function; each returns the same keys (from its options).
SENSOR = """
import time
from sensors import FoundTask, SensorContext

async def contacts(ctx: SensorContext) -> list[FoundTask]:
    dedup = ctx.options.get("dedup", "open")
    if ctx.options.get("race"):
        slot = int(time.time() * 50)  # both processes compute the same keys in one 20 ms slot
        return [FoundTask(key=f"{slot}-{i}", subject=f"{ctx.name} {slot} {i}", dedup=dedup) for i in range(10)]
    return [FoundTask(key=k, subject=f"Welcome {k} ({ctx.name})", dedup=dedup) for k in ctx.options["keys"]]
"""


def configure(home: Path, entries: str) -> None:
    (home / "contacts.py").write_text(SENSOR)
    with (home / "vigil.toml").open("a") as handle:
        handle.write("\n[limits]\nmax_per_source_per_day = 0\n\n" + entries)


def entry(name: str, prefix: str | None, keys: list[str], dedup: str = "open") -> str:
    line = "" if prefix is None else f'key_prefix = "{prefix}"\n'
    return (
        f'[[sensors]]\nuse = "contacts.py:contacts"\nname = "{name}"\nevery = "1h"\n{line}'
        f'dedup = "{dedup}"\nkeys = {json.dumps(keys)}\n\n'
    )


def tasks_of(vigil: VigilRunner) -> list[dict[str, object]]:
    listed: list[dict[str, object]] = json.loads(vigil("task", "list", "--json", check=True).stdout)["tasks"]
    return sorted(listed, key=lambda t: int(str(t["id"])))


@pytest.mark.parametrize("dedup", ["open", "ever"])
def test_two_sensors_with_one_prefix_dedupe_in_one_cycle(home: Path, vigil: VigilRunner, dedup: str) -> None:
    configure(
        home,
        entry("crm", "contacts", ["alice", "bob"], dedup)
        + entry("mail", "contacts", ["alice", "carol"], dedup)
        + entry("chat", None, ["alice"], dedup),
    )
    run = vigil("sensors", "run", "--json", check=True)
    assert [(r["name"], r["created"], r["ignored"]) for r in json.loads(run.stdout)] == [
        ("crm", 2, 0),
        ("mail", 1, 1),  # alice is already crm's task
        ("chat", 1, 0),  # its own key space: chat:alice
    ]
    tasks = tasks_of(vigil)
    assert [(t["source"], t["source_key"]) for t in tasks] == [
        ("sensor:crm", "contacts:alice"),
        ("sensor:crm", "contacts:bob"),
        ("sensor:mail", "contacts:carol"),
        ("sensor:chat", "chat:alice"),
    ]
    assert all(t["dedup"] == dedup for t in tasks)


def test_the_empty_prefix_shares_the_keys_of_task_add(home: Path, vigil: VigilRunner) -> None:
    configure(home, entry("crm", "", ["alice", "bob"]))
    added = vigil("task", "add", "Welcome alice (by hand)", "--key", "alice", check=True)
    assert added.stdout.strip() == "created task #1"
    run = json.loads(vigil("sensors", "run", "--json", check=True).stdout)
    assert [(r["created"], r["ignored"]) for r in run] == [(1, 1)]  # alice was added by hand
    bob = run[0]["created_ids"][0]
    again = vigil("task", "add", "Welcome bob (by hand)", "--key", "bob", check=True)
    assert again.stdout.strip() == f"exists: task #{bob} already has key 'bob'"
    assert [(t["source"], t["source_key"]) for t in tasks_of(vigil)] == [
        ("human", "alice"),
        ("sensor:crm", "bob"),
    ]


def test_a_bad_key_prefix_is_one_line_naming_the_entry(home: Path, vigil: VigilRunner) -> None:
    configure(home, entry("crm", "a b", ["alice"]))
    result = vigil("sensors", "run")
    assert result.returncode == 2
    assert result.stderr.startswith("vigil: error: vigil.toml: [[sensors]] #1 (name 'crm'): key_prefix: expected")
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("dedup", ["open", "ever"])
async def test_two_processes_racing_two_sensors_of_one_prefix(tmp_path: Path, dedup: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "vigil.toml").write_text("")
    race = f'key_prefix = "contacts"\ndedup = "{dedup}"\nrace = true\n'
    configure(
        home,
        f'[[sensors]]\nuse = "contacts.py:contacts"\nname = "crm"\nevery = "1m"\n{race}\n'
        f'[[sensors]]\nuse = "contacts.py:contacts"\nname = "mail"\nevery = "1m"\n{race}',
    )
    results = run_racers(home, 30)

    assert all(r["statuses"] == ["ok"] and r["rejected"] == 0 for r in results), results
    store = await SqliteStore.open(home / "data" / "vigil.db")
    try:
        tasks = await store.list_tasks(limit=100_000)
    finally:
        await store.close()
    keys = [t.source_key for t in tasks]
    assert len(keys) == len(set(keys))  # one task per key across both sensors and processes
    assert all(k is not None and k.startswith("contacts:") for k in keys)
    assert sum(r["created"] for r in results) == len(tasks)
    assert sum(r["created"] + r["ignored"] for r in results) == 2 * 30 * 2 * 10
    assert {t.source for t in tasks} <= {"sensor:crm", "sensor:mail"}
    # The two processes really raced: both saw keys that were already taken.
    assert all(r["ignored"] > 0 for r in results)
