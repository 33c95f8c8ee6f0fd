"""Retention on the SQLite store: ``prune`` and the SQL it runs.

A prune walks the tasks in id order in bounded batches, each batch one short
``BEGIN IMMEDIATE`` transaction: pick the prunable tasks among the next ids, fold
their runs into ``cost_archive``, retire their source keys, delete them (runs,
events, notes and dependency rows follow by ``ON DELETE CASCADE``). The walk stops
at the first task created after the cutoff: ids grow with creation time, and a task
last updated before the cutoff was created before it, so nothing past that point
can qualify. A parent or dependency the batch freed, if the walk already passed it,
is looked at again (in the same batch while it has room, else in the next).
Then what pruned tasks leave behind is kept bounded (``sqlite_archive``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial

from vigil.models import PruneResult
from vigil.store.pruning import (
    COUNTED,
    Phase,
    PruneTally,
    archive_phase,
    check_prune_limits,
    preview_params,
    run_phases,
)
from vigil.store.sqlite_archive import SQL_ARCHIVE_PREVIEW, archive_steps
from vigil.store.sqlite_base import SqliteBase
from vigil.store.sqlite_db import Database

_FINISHED = "('completed', 'failed', 'canceled')"

# Of the tasks in :ids (a JSON array), those that may go now: finished, last updated
# before :cutoff, not held by a dispatcher (an agent may close its task while its run
# is still being recorded: ix_runs_open), no child left (ix_tasks_parent) and
# nothing left depending on them (ix_task_deps_depends_on).
SQL_PRUNABLE = f"""
SELECT t.id FROM tasks t
WHERE t.id IN (SELECT value FROM json_each(:ids))
  AND t.status IN {_FINISHED} AND t.updated_at < :cutoff AND t.claimed_by IS NULL
  AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.task_id = t.id AND r.finished_at IS NULL)
  AND NOT EXISTS (SELECT 1 FROM tasks c WHERE c.parent_id = t.id)
  AND NOT EXISTS (SELECT 1 FROM task_deps d WHERE d.depends_on = t.id)
ORDER BY t.id
"""

SQL_PRUNE_WALK = "SELECT id, created_at FROM tasks WHERE id > :after ORDER BY id LIMIT :limit"

# The archive rows of the doomed tasks' finished runs. The four flags mark one run
# per task and grouping (its last run overall, in its hour, in its UTC day, with its
# model) so that a roll-up counts each task once per group (sqlite_schema V2). The
# sensor origin is the root of the task's parent chain, read while it still exists.
SQL_ARCHIVE_RUNS = """
WITH RECURSIVE doomed(id) AS (SELECT value FROM json_each(:ids)),
chain(task_id, parent_id, source) AS (
    SELECT t.id, t.parent_id, t.source FROM tasks t WHERE t.id IN doomed
    UNION ALL
    SELECT c.task_id, p.parent_id, p.source FROM chain c JOIN tasks p ON p.id = c.parent_id
),
origin(task_id, sensor) AS (
    SELECT task_id, CASE WHEN source LIKE 'sensor:%' THEN substr(source, 8) ELSE '(none)' END
    FROM chain WHERE parent_id IS NULL
),
flagged AS (
    SELECT r.*, t.skills, t.source, o.sensor,
           (r.finished_at / 3600000) * 3600000 AS hour_ms,
           coalesce(r.model, '(none)') AS model_key,
           row_number() OVER (PARTITION BY r.task_id ORDER BY r.finished_at DESC, r.id DESC) = 1 AS last_any,
           row_number() OVER (PARTITION BY r.task_id, r.finished_at / 3600000
                              ORDER BY r.finished_at DESC, r.id DESC) = 1 AS last_hour,
           row_number() OVER (PARTITION BY r.task_id, r.finished_at / 86400000
                              ORDER BY r.finished_at DESC, r.id DESC) = 1 AS last_day,
           row_number() OVER (PARTITION BY r.task_id, coalesce(r.model, '(none)')
                              ORDER BY r.finished_at DESC, r.id DESC) = 1 AS last_model
    FROM runs r JOIN tasks t ON t.id = r.task_id JOIN origin o ON o.task_id = r.task_id
    WHERE r.task_id IN doomed AND r.finished_at IS NOT NULL
)
INSERT INTO cost_archive (start_ms, span_ms, skills, source, model, sensor, runs, tasks_last, tasks_hour,
                          tasks_day, tasks_model, cost_usd, api_cost_usd, tokens_in, tokens_out,
                          cache_read_tokens, cache_write_tokens)
SELECT hour_ms, 3600000, skills, source, model_key, sensor, count(*), sum(last_any), sum(last_hour),
       sum(last_day), sum(last_model), total(cost_usd), total(api_cost_usd), sum(tokens_in),
       sum(tokens_out), sum(cache_read_tokens), sum(cache_write_tokens)
FROM flagged WHERE true
GROUP BY hour_ms, skills, source, model_key, sensor
ON CONFLICT (start_ms, span_ms, skills, source, model, sensor) DO UPDATE SET
    runs = runs + excluded.runs, tasks_last = tasks_last + excluded.tasks_last,
    tasks_hour = tasks_hour + excluded.tasks_hour, tasks_day = tasks_day + excluded.tasks_day,
    tasks_model = tasks_model + excluded.tasks_model, cost_usd = cost_usd + excluded.cost_usd,
    api_cost_usd = api_cost_usd + excluded.api_cost_usd, tokens_in = tokens_in + excluded.tokens_in,
    tokens_out = tokens_out + excluded.tokens_out,
    cache_read_tokens = cache_read_tokens + excluded.cache_read_tokens,
    cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens
"""

_IDS = "(SELECT value FROM json_each(:ids))"

# What the doomed tasks take with them, counted before the delete cascades.
SQL_PRUNE_COUNTS = f"""
SELECT (SELECT count(*) FROM runs WHERE task_id IN {_IDS}) AS runs,
       (SELECT count(*) FROM task_events WHERE task_id IN {_IDS}) AS events,
       (SELECT count(*) FROM notes WHERE task_id IN {_IDS}) AS notes,
       (SELECT count(*) FROM task_deps WHERE task_id IN {_IDS} OR depends_on IN {_IDS}) AS dependencies
"""
SQL_PRUNE_TRANSCRIPTS = f"""
SELECT transcript_path FROM runs WHERE task_id IN {_IDS} AND transcript_path IS NOT NULL ORDER BY id
"""
# Parents and dependencies of the doomed tasks: each may be free to go once they are.
SQL_PRUNE_FREED = f"""
SELECT parent_id FROM tasks WHERE id IN {_IDS} AND parent_id IS NOT NULL
UNION
SELECT depends_on FROM task_deps WHERE task_id IN {_IDS}
"""
# A key retired again (an ``open`` key many tasks used) keeps its latest retirement.
SQL_RETIRE_KEYS = f"""
INSERT INTO retired_keys (source_key, retired_at)
SELECT source_key, :now FROM tasks WHERE id IN {_IDS} AND source_key IS NOT NULL
ON CONFLICT (source_key) DO UPDATE SET retired_at = max(retired_at, excluded.retired_at)
"""
SQL_PRUNE_TASKS = f"DELETE FROM tasks WHERE id IN {_IDS}"

SQL_EVENTS_WALK = "SELECT id, at FROM task_events WHERE id > :after ORDER BY id LIMIT :limit"
SQL_DELETE_EVENTS = f"DELETE FROM task_events WHERE id IN {_IDS}"

# Dry run: everything a full prune would delete, in one read. A task stays if it
# is not prunable itself, or is the parent or a dependency of a task that stays
# (a fixpoint the recursive CTE reaches by walking up from every task that stays).
SQL_PRUNE_PREVIEW = f"""
WITH RECURSIVE kept(id) AS (
    SELECT id FROM tasks WHERE status NOT IN {_FINISHED} OR updated_at >= :cutoff OR claimed_by IS NOT NULL
    UNION
    SELECT task_id FROM runs WHERE finished_at IS NULL
    UNION
    SELECT t.parent_id FROM kept k JOIN tasks t ON t.id = k.id WHERE t.parent_id IS NOT NULL
    UNION
    SELECT d.depends_on FROM kept k JOIN task_deps d ON d.task_id = k.id
),
doomed(id) AS (
    SELECT id FROM tasks WHERE status IN {_FINISHED} AND updated_at < :cutoff
    EXCEPT SELECT id FROM kept
)
SELECT (SELECT count(*) FROM doomed) AS tasks,
       (SELECT count(*) FROM runs WHERE task_id IN doomed) AS runs,
       (SELECT count(*) FROM task_events WHERE task_id IN doomed) AS events,
       (SELECT count(*) FROM task_events WHERE at < :events_cutoff AND task_id NOT IN doomed) AS old_events,
       (SELECT count(*) FROM notes WHERE task_id IN doomed) AS notes,
       (SELECT count(*) FROM task_deps WHERE task_id IN doomed OR depends_on IN doomed) AS dependencies,
       (SELECT json_group_array(transcript_path) FROM
           (SELECT transcript_path FROM runs WHERE task_id IN doomed AND transcript_path IS NOT NULL
            ORDER BY id)) AS transcripts
"""


class RetentionMethods(SqliteBase):
    """``Store.prune`` (mixed into ``SqliteStore``)."""

    async def prune(
        self,
        *,
        finished_before_ms: int,
        events_before_ms: int | None = None,
        batch_size: int = 200,
        max_batches: int | None = None,
        dry_run: bool = False,
        fold_before_ms: int | None = None,
        costs_before_ms: int | None = None,
        keys_before_ms: int | None = None,
    ) -> PruneResult:
        check_prune_limits(batch_size, max_batches)
        archive = (fold_before_ms, costs_before_ms, keys_before_ms)
        if dry_run:
            return await self._preview(finished_before_ms, events_before_ms, archive)
        tally = PruneTally(finished_before_ms, batch_size, now=self._clock.now_ms())

        async def task_batch() -> None:
            moved_on = await self._db.write(self._task_batch(tally))
            moved_on()

        phases = [Phase(tally.walking, task_batch)]
        if events_before_ms is not None:
            events = _EventWalk(events_before_ms, batch_size)

            async def event_batch() -> None:
                tally.counts["events"] += await events.run(self._db)

            phases.append(Phase(lambda: not events.done, event_batch))
        for step in archive_steps(*archive):
            phases.append(archive_phase(tally, step.name, partial(self._db.write, step.batch(batch_size))))
        return await run_phases(tally, phases, max_batches)

    def _task_batch(self, tally: PruneTally) -> Callable[[sqlite3.Connection], Callable[[], None]]:
        """One batch: at most ``batch_size`` tasks looked at and deleted. Returns
        how to move the tally on, applied only once the transaction committed (a
        batch retried after SQLITE_BUSY starts over from the same place)."""

        def body(conn: sqlite3.Connection) -> Callable[[], None]:
            after, walked_all = tally.after, tally.walked_all
            queue = sorted(tally.recheck)[: tally.batch_size]
            rest = set(tally.recheck) - set(queue)
            if not walked_all and len(queue) < tally.batch_size:
                limit = tally.batch_size - len(queue)
                rows = conn.execute(SQL_PRUNE_WALK, {"after": after, "limit": limit}).fetchall()
                walked_all = len(rows) < limit
                for row in rows:
                    if row["created_at"] >= tally.cutoff:
                        walked_all = True
                        break
                    queue.append(int(row["id"]))
                    after = int(row["id"])
            counts = dict.fromkeys(COUNTED, 0)
            transcripts: list[str] = []
            room = tally.batch_size
            while queue:
                prunable = _ids(conn, SQL_PRUNABLE, {"ids": json.dumps(queue), "cutoff": tally.cutoff})
                if not prunable:
                    break  # what is not prunable now is freed again by whatever holds it
                doomed = prunable[:room]
                rest.update(prunable[room:])
                freed = _delete(conn, doomed, counts, transcripts, tally.now)
                room -= len(doomed)
                # a freed task the walk has not reached yet will be met by the walk
                queue = sorted(i for i in freed if i <= after and i not in doomed)
                if room == 0:
                    rest.update(queue)
                    break

            def commit() -> None:
                tally.after, tally.walked_all, tally.recheck = after, walked_all, rest
                tally.add(counts, transcripts)

            return commit

        return body

    async def _preview(
        self, finished_before_ms: int, events_before_ms: int | None, archive: tuple[int | None, int | None, int | None]
    ) -> PruneResult:
        params = {"cutoff": finished_before_ms, "events_cutoff": events_before_ms or 0}

        def body(conn: sqlite3.Connection) -> PruneResult:
            kept = conn.execute(SQL_ARCHIVE_PREVIEW, preview_params(*archive)).fetchone()
            row = conn.execute(SQL_PRUNE_PREVIEW, params).fetchone()
            return PruneResult(
                tasks=int(row["tasks"]),
                runs=int(row["runs"]),
                events=int(row["events"]) + int(row["old_events"]),
                notes=int(row["notes"]),
                dependencies=int(row["dependencies"]),
                transcripts=tuple(str(p) for p in json.loads(row["transcripts"])),
                folded=int(kept["folded"]),
                costs=int(kept["costs"]),
                keys=int(kept["keys"]),
            )

        return await self._db.read(body)


def _ids(conn: sqlite3.Connection, sql: str, params: Mapping[str, object]) -> list[int]:
    return [int(r[0]) for r in conn.execute(sql, params)]


def _delete(
    conn: sqlite3.Connection, doomed: list[int], counts: dict[str, int], transcripts: list[str], now_ms: int
) -> set[int]:
    """Archive, count and delete ``doomed`` (their keys retired at ``now_ms``);
    returns the ids they freed (their parents and dependencies, which may now be
    prunable)."""
    ids = {"ids": json.dumps(doomed)}
    conn.execute(SQL_ARCHIVE_RUNS, ids)
    row = conn.execute(SQL_PRUNE_COUNTS, ids).fetchone()
    for name in ("runs", "events", "notes", "dependencies"):
        counts[name] += int(row[name])
    transcripts.extend(str(r[0]) for r in conn.execute(SQL_PRUNE_TRANSCRIPTS, ids))
    freed = set(_ids(conn, SQL_PRUNE_FREED, ids))
    conn.execute(SQL_RETIRE_KEYS, {**ids, "now": now_ms})
    conn.execute(SQL_PRUNE_TASKS, ids)
    counts["tasks"] += len(doomed)
    return freed


@dataclass
class _EventWalk:
    """Old audit rows of the tasks that stay, deleted in id order: ``at`` grows
    with the id, so the walk ends at the first row at or after the cutoff."""

    cutoff: int
    batch_size: int
    after: int = 0
    done: bool = False

    async def run(self, db: Database) -> int:
        """One batch in its own transaction; returns the rows deleted."""

        def body(conn: sqlite3.Connection) -> tuple[int, bool, int]:
            rows = conn.execute(SQL_EVENTS_WALK, {"after": self.after, "limit": self.batch_size}).fetchall()
            old: list[int] = []
            done = len(rows) < self.batch_size
            for row in rows:
                if row["at"] >= self.cutoff:
                    done = True
                    break
                old.append(int(row["id"]))
            conn.execute(SQL_DELETE_EVENTS, {"ids": json.dumps(old)})
            return (old[-1] if old else self.after), done, len(old)

        self.after, self.done, deleted = await db.write(body)
        return deleted
