"""``Store.prune``, written once for both backends.

A prune walks the tasks in id order in bounded batches, each batch one short write
transaction: pick the prunable tasks among the next ids, fold their runs into
``cost_archive``, retire their source keys, delete them (runs, events, notes and
dependency rows follow by ``ON DELETE CASCADE``). The walk stops at the first task
created after the cutoff: ids grow with creation time, and a task last updated
before the cutoff was created before it, so nothing past that point can qualify. A
parent or dependency the batch freed, if the walk already passed it, is looked at
again (in the same batch while it has room, else in the next). Then old audit rows,
and what pruned tasks leave behind in the cost archive, are kept bounded, in
batches too. The SQL is ``vigil.store.sql.retention`` (both backends' texts side
by side); every batch hops to the store's worker thread on its own, so other
callers get the connection between batches.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TypeVar

from vigil.clock import Clock
from vigil.errors import InputError
from vigil.models import PruneResult
from vigil.store.sql.retention import (
    ADD_FOLDED_DAYS,
    ARCHIVE_PREVIEW,
    ARCHIVE_RUNS,
    DELETE_EVENTS,
    DROP_COSTS,
    DROP_KEYS,
    EVENTS_WALK,
    FOLD_HOURS,
    PRUNABLE,
    PRUNE_COUNTS,
    PRUNE_PREVIEW,
    PRUNE_TASKS,
    PRUNE_WALK,
    RETIRE_KEYS,
)
from vigil.store.threaded import Hopping
from vigil.store.transaction import Engine, Sql, Tx

T = TypeVar("T")

DAY_MS = 86_400_000
COUNTED = ("tasks", "runs", "events", "notes", "dependencies")


def fold_line(fold_before_ms: int) -> int:
    """The start of the UTC day holding ``fold_before_ms``: the hours of every day
    before it are folded, so no hour at or after ``fold_before_ms`` is."""
    return fold_before_ms // DAY_MS * DAY_MS


def preview_params(
    fold_before_ms: int | None, costs_before_ms: int | None, keys_before_ms: int | None
) -> dict[str, int]:
    """The archive preview query's parameters; a step not asked for counts nothing
    (0: no archive row or key is older than the epoch)."""
    return {
        "fold_before": 0 if fold_before_ms is None else fold_line(fold_before_ms),
        "costs_before": 0 if costs_before_ms is None else costs_before_ms,
        "keys_before": 0 if keys_before_ms is None else keys_before_ms,
    }


def check_prune_limits(batch_size: int, max_batches: int | None) -> None:
    """Raises ``InputError`` for a batch size or batch count below one."""
    if batch_size < 1:
        raise InputError(f"batch size must be 1 or more, not {batch_size}")
    if max_batches is not None and max_batches < 1:
        raise InputError(f"max batches must be 1 or more, not {max_batches}")


@dataclass
class PruneTally:
    """A prune in progress: where the task walk is and what was removed so far."""

    cutoff: int
    batch_size: int
    now: int  # when the keys of this prune's tasks are retired (epoch ms)
    after: int = 0  # the walk's cursor: every id up to here has been looked at
    walked_all: bool = False
    recheck: set[int] = field(default_factory=set)  # freed ids the walk already passed
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTED, 0))
    transcripts: list[str] = field(default_factory=list)
    archive: dict[str, int] = field(default_factory=dict)  # folded, costs, keys

    def walking(self) -> bool:
        """Whether tasks are left to look at (unwalked ids, or freed ones to recheck)."""
        return not (self.walked_all and not self.recheck)

    def add(self, counts: Mapping[str, int], transcripts: Iterable[str]) -> None:
        """Count a committed batch."""
        for name, n in counts.items():
            self.counts[name] += n
        self.transcripts.extend(transcripts)

    def result(self, batches: int, complete: bool) -> PruneResult:
        return PruneResult(
            **self.counts, transcripts=tuple(self.transcripts), batches=batches, complete=complete, **self.archive
        )


@dataclass
class Phase:
    """Batches of one kind, run while ``pending()`` says so; ``batch`` runs one (its
    own transaction) and counts it into the tally."""

    pending: Callable[[], bool]
    batch: Callable[[], Awaitable[None]]


def archive_phase(tally: PruneTally, name: str, run: Callable[[], Awaitable[int]]) -> Phase:
    """A cost-archive step: ``run`` takes at most ``batch_size`` rows and returns how
    many it took; a batch that took fewer ends the step."""
    tally.archive.setdefault(name, 0)
    state = {"done": False}

    async def batch() -> None:
        taken = await run()
        tally.archive[name] += taken
        state["done"] = taken < tally.batch_size

    return Phase(lambda: not state["done"], batch)


async def run_phases(tally: PruneTally, phases: Sequence[Phase], max_batches: int | None) -> PruneResult:
    """Run the phases in order, stopping after ``max_batches`` batches in all (None:
    until done); the result says whether the prune completed."""
    batches = 0
    for phase in phases:
        while phase.pending():
            if max_batches is not None and batches >= max_batches:
                return tally.result(batches, complete=False)
            await phase.batch()
            batches += 1
    return tally.result(batches, complete=True)


@dataclass(frozen=True)
class ArchiveStep:
    """One archive step: its statements run in order in each batch; the last one's
    row count is how many rows the batch took (a statement with nothing to run on
    the backend counts for nothing)."""

    name: str  # the PruneResult field it counts into
    statements: tuple[Sql, ...]
    before: int

    def batch(self, limit: int) -> Callable[[Tx], int]:
        def body(tx: Tx) -> int:
            return [tx.run(sql, {"before": self.before, "limit": limit}) for sql in self.statements][-1]

        return body


def archive_steps(fold: int | None, costs: int | None, keys: int | None) -> list[ArchiveStep]:
    """The steps a prune asked for, in the order they run (old costs go before the
    fold, so rows about to be dropped are not folded first)."""
    steps = []
    if costs is not None:
        steps.append(ArchiveStep("costs", (DROP_COSTS,), costs))
    if fold is not None:
        steps.append(ArchiveStep("folded", (ADD_FOLDED_DAYS, FOLD_HOURS), fold_line(fold)))
    if keys is not None:
        steps.append(ArchiveStep("keys", (DROP_KEYS,), keys))
    return steps


def _ids(tx: Tx, sql: Sql, params: Mapping[str, object]) -> list[int]:
    return [int(r["id"]) for r in tx.all(sql, params)]


def _delete(tx: Tx, doomed: list[int], counts: dict[str, int], transcripts: list[str], now_ms: int) -> set[int]:
    """Archive, count and delete ``doomed`` (their keys retired at ``now_ms``);
    returns the ids they freed (their parents and dependencies, which may now be
    prunable)."""
    ids = {"ids": tx.array(doomed)}
    tx.run(ARCHIVE_RUNS, ids)
    row = tx.one(PRUNE_COUNTS, ids)
    assert row is not None
    for name in ("runs", "events", "notes", "dependencies"):
        counts[name] += int(row[name])
    transcripts.extend(str(path) for path in tx.loads(row["transcripts"]))
    tx.run(RETIRE_KEYS, {**ids, "now": now_ms})
    tx.run(PRUNE_TASKS, ids)
    counts["tasks"] += len(doomed)
    return {int(i) for i in tx.loads(row["freed"])}


def task_batch(tally: PruneTally) -> Callable[[Tx], Callable[[], None]]:
    """One batch: at most ``batch_size`` tasks looked at and deleted. Returns how to
    move the tally on, applied only once the transaction committed (a batch retried
    while the database was busy starts over from the same place)."""

    def body(tx: Tx) -> Callable[[], None]:
        after, walked_all = tally.after, tally.walked_all
        queue = sorted(tally.recheck)[: tally.batch_size]
        rest = set(tally.recheck) - set(queue)
        if not walked_all and len(queue) < tally.batch_size:
            limit = tally.batch_size - len(queue)
            rows = tx.all(PRUNE_WALK, {"after": after, "limit": limit})
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
            prunable = _ids(tx, PRUNABLE, {"ids": tx.array(queue), "cutoff": tally.cutoff})
            if not prunable:
                break  # what is not prunable now is freed again by whatever holds it
            doomed = prunable[:room]
            rest.update(prunable[room:])
            freed = _delete(tx, doomed, counts, transcripts, tally.now)
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


def preview(cutoff: int, events_cutoff: int | None, archive: tuple[int | None, ...]) -> Callable[[Tx], PruneResult]:
    """A dry run: what a full prune would delete, read in one go."""

    def body(tx: Tx) -> PruneResult:
        fold, costs, keys = archive
        kept = tx.one(ARCHIVE_PREVIEW, preview_params(fold, costs, keys))
        row = tx.one(PRUNE_PREVIEW, {"cutoff": cutoff, "events_cutoff": events_cutoff or 0})
        assert row is not None
        assert kept is not None
        return PruneResult(
            tasks=int(row["tasks"]),
            runs=int(row["runs"]),
            events=int(row["events"]) + int(row["old_events"]),
            notes=int(row["notes"]),
            dependencies=int(row["dependencies"]),
            transcripts=tuple(str(p) for p in tx.loads(row["transcripts"])),
            folded=int(kept["folded"]),
            costs=int(kept["costs"]),
            keys=int(kept["keys"]),
        )

    return body


@dataclass
class EventWalk:
    """Old audit rows of the tasks that stay, deleted in id order: ``at`` grows with
    the id, so the walk ends at the first row at or after the cutoff."""

    cutoff: int
    batch_size: int
    after: int = 0
    done: bool = False

    def batch(self, tx: Tx) -> tuple[int, bool, int]:
        """One batch: the new cursor, whether the walk is done, the rows deleted."""
        rows = tx.all(EVENTS_WALK, {"after": self.after, "limit": self.batch_size})
        old: list[int] = []
        done = len(rows) < self.batch_size
        for row in rows:
            if row["at"] >= self.cutoff:
                done = True
                break
            old.append(int(row["id"]))
        tx.run(DELETE_EVENTS, {"ids": tx.array(old)})
        return (old[-1] if old else self.after), done, len(old)


class AsyncRetention(Hopping):
    """``Store.prune``: many short transactions, one hop per batch, so other callers
    of the same store get the connection between batches."""

    engine: Engine
    _clock: Clock

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
        """Delete finished tasks (completed, failed, canceled) last updated before
        ``finished_before_ms`` (epoch ms), with their runs, events, notes and
        dependency rows. Never deleted: an open task; a task a dispatcher still
        holds (``claimed_by`` set, or a run not yet recorded); a task that still
        has a child (any status: its chain stays whole, so ``origin_of`` and the
        SENSOR roll-up keep working); a task another remaining task depends on. A parent or a
        dependency freed by the tasks deleted is deleted in the same call (unless
        ``max_batches`` stops it first).

        Before a task goes, its runs' spend and tokens are added to the cost
        archive (UTC hour x skills x source x model x sensor origin x account), so
        ``cost_rollup`` and ``spend_since`` keep their totals; its source key stays
        used (retired now, by the store's clock), so a later ``ever`` add of that
        key is still refused.

        Then what pruned tasks left behind is bounded, each step in batches too:
        ``costs_before_ms`` (None: keep) deletes archive rows that ended at or
        before it; ``fold_before_ms`` (None: no fold) folds the archive's hour rows
        of every UTC day that ended at or before the start of the day holding it
        into one row per day and group, keeping every sum (a roll-up or spend
        window that starts on a day boundary, or after that day line, is as exact
        as before; one starting inside a folded day counts that whole day);
        ``keys_before_ms`` (None: keep) deletes keys retired before it, after which
        an ``ever`` add may use such a key again.

        ``events_before_ms`` (None: keep) also deletes older audit rows of the
        tasks that stay. Works in batches of at most ``batch_size`` tasks (or audit
        rows), each its own short transaction: a batch is atomic, the whole prune
        is not, and other writers get the lock between batches. ``max_batches``
        None runs until nothing is left. Idempotent: a second call finds nothing.
        ``dry_run`` deletes nothing and reports what a full prune would delete
        (archive rows and keys counted as they are before the prune).

        Returns the counts and the transcript paths of the deleted runs (the
        caller deletes those files). Raises ``InputError`` for a ``batch_size`` or
        ``max_batches`` below 1, ``StoreBusy``, ``StoreError``.
        """
        check_prune_limits(batch_size, max_batches)
        archive = (fold_before_ms, costs_before_ms, keys_before_ms)
        if dry_run:
            return await self._hop(self.engine.read, preview(finished_before_ms, events_before_ms, archive))
        tally = PruneTally(finished_before_ms, batch_size, now=self._clock.now_ms())

        async def write(body: Callable[[Tx], T]) -> T:
            return await self._hop(self.engine.write, body)

        async def tasks() -> None:
            (await write(task_batch(tally)))()

        phases = [Phase(tally.walking, tasks)]
        if events_before_ms is not None:
            walk = EventWalk(events_before_ms, batch_size)

            async def events() -> None:
                walk.after, walk.done, deleted = await write(walk.batch)
                tally.counts["events"] += deleted

            phases.append(Phase(lambda: not walk.done, events))
        for step in archive_steps(*archive):
            phases.append(archive_phase(tally, step.name, partial(write, step.batch(batch_size))))
        return await run_phases(tally, phases, max_batches)
