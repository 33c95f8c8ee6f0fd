"""The arithmetic of the cost archive's last prune steps, shared by both backends
(``sqlite_archive``, ``postgres_archive``): where the fold of hour rows into day
rows stops, and the preview's parameters. No SQL here."""

from __future__ import annotations

DAY_MS = 86_400_000


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
