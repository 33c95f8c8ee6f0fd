"""What both backends' ``Store.prune`` share, with no SQL: the tally of a prune in
progress, the order and bound of its batches, and the arithmetic of the cost
archive's steps. Each backend (``sqlite_retention``, ``postgres_retention``) writes
the batches themselves, one write transaction each.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from vigil.errors import InputError
from vigil.models import PruneResult

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
