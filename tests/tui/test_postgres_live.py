"""The TUI on a PostgreSQL store: a task that another process adds shows up by itself,
carried by the store's change notifications (there is no file to watch)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from tests.tui.conftest import PROBE_S, add, wait_for
from tests.tui.helpers import cell, shown_ids
from tui.app import VigilApp
from vigil.clock import ManualClock
from vigil.config import load_settings
from vigil.store import open_store


async def test_task_added_by_another_process_on_postgres_appears(
    home: Path, postgres_migrated_url: str, clock: ManualClock
) -> None:
    config = home / "vigil.toml"
    config.write_text(config.read_text() + f'\n[store]\nurl = "{postgres_migrated_url}"\n')
    settings = load_settings(home)
    assert settings.store.url == postgres_migrated_url
    db = await open_store(settings, clock)
    try:
        await add(db, "already there")
    finally:
        await db.close()

    app = VigilApp(settings, opener=lambda: open_store(settings, clock), clock=clock, probe_interval_s=PROBE_S)
    async with app.run_test(size=(120, 30)):
        await wait_for(lambda: len(shown_ids(app)) == 1, "first row")
        assert app.watcher.path is None  # nothing on disk to watch: notifications only
        # another process: the real CLI, finding the database through vigil.toml alone
        env = {k: v for k, v in os.environ.items() if not k.startswith("VIGIL_")}
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "vigil",
            "--home",
            str(home),
            "task",
            "add",
            "from another process",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        out, err = await proc.communicate()
        assert proc.returncode == 0, err.decode()
        new_id = int(out.decode().split("#")[1])
        await wait_for(lambda: new_id in shown_ids(app), "the new task on screen")
        assert cell(app, new_id, "subject") == "from another process"
        assert not (settings.store.path).exists()  # no SQLite file was created on the side
