"""The rolling-24 h spend cap (``[budget]``): how much is used, and which warnings are due.

Spend is what the agent CLIs reported (``runs.cost_usd``) for runs finished in the
last 24 h. Above ``daily_usd`` only tasks a person made at least as urgent as
``urgent_priority`` (priority ≤ it) are claimed (``exempt``): a person added the
task at that priority or set it so. An agent's follow-up, a sensor's task, or one
whose priority only an agent or a sensor chose waits for the budget, however
urgent (a person can raise it: ``vigil task prio``).

Each ``warn_at`` fraction alerts once per window: it fires when spend reaches it
and it has not fired in the last 24 h. The times each fired are kept in
``loop_state`` under ``budget_warnings`` (``{"0.5": epoch_ms}``).

``per_sensor`` caps the work each sensor started (its tasks and their follow-ups,
``vigil stats --by sensor``) the same way; the dispatcher puts such a task back
unrun while its sensor is over the cap (``dispatch.guard``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from vigil.clock import MS_PER_DAY
from vigil.config import BudgetSettings
from vigil.models import Task
from vigil.store import Store

WINDOW_MS = MS_PER_DAY
WARNINGS_KEY = "budget_warnings"
PRIORITY_KINDS = ("created", "priority")  # the audit rows that set a task's priority


def is_person(actor: str) -> bool:
    """Whether ``actor`` (an audit row's) is a person: ``human``, ``human via
    telegram …``, ``human (browser session …)``."""
    return actor.startswith("human")


async def exempt(store: Store, task: Task, settings: BudgetSettings) -> bool:
    """Whether ``task`` runs above the daily budget: it is at least as urgent as
    ``urgent_priority`` and a person made it so (the last audit row that set its
    priority is a person's; with none left, a person added it). The same rule as
    the claim's over the budget (the store's ``PERSON_SET_PRIORITY``)."""
    if task.priority > settings.urgent_priority:
        return False
    set_by = [event.actor for event in await store.list_events(task.id) if event.kind in PRIORITY_KINDS]
    return is_person(set_by[-1]) if set_by else task.source == "human"


@dataclass(frozen=True, slots=True)
class BudgetUse:
    """Spend in the window ending at ``at``. ``cap_usd`` None: no cap configured."""

    spent_usd: float
    cap_usd: float | None
    at: int

    @property
    def fraction(self) -> float | None:
        """Spend as a fraction of the cap (None without a cap; a zero cap is always full)."""
        if self.cap_usd is None:
            return None
        return 1.0 if self.cap_usd <= 0 else self.spent_usd / self.cap_usd

    @property
    def over(self) -> bool:
        return self.cap_usd is not None and self.spent_usd >= self.cap_usd


async def budget_use(store: Store, settings: BudgetSettings, now_ms: int) -> BudgetUse:
    """Spend over the last 24 h against the cap (one read)."""
    return BudgetUse(await store.spend_since(now_ms - WINDOW_MS), settings.daily_usd, now_ms)


def due_warnings(use: BudgetUse, settings: BudgetSettings, fired: dict[str, object]) -> list[float]:
    """The ``warn_at`` fractions reached and not fired within the window, lowest first."""
    fraction = use.fraction
    if fraction is None:
        return []
    due = []
    for threshold in settings.warn_at:
        last = fired.get(str(threshold))
        recent = isinstance(last, int) and use.at - last < WINDOW_MS
        if fraction >= threshold and not recent:
            due.append(threshold)
    return due


async def claim_warnings(
    store: Store, use: BudgetUse, settings: BudgetSettings, values: Mapping[str, object] | None = None
) -> list[float]:
    """Mark the due warnings as fired and return them; a warning another process
    claimed first is not returned (compare-and-set on ``budget_warnings``).
    ``values``: the loop state the caller just read (saves a read when nothing is due)."""
    while True:
        raw = (values if values is not None else await store.loop_values()).get(WARNINGS_KEY)
        values = None  # a failed compare-and-set reads afresh
        fired = dict(raw) if isinstance(raw, dict) else {}
        due = due_warnings(use, settings, fired)
        if not due:
            return []
        fired.update({str(threshold): use.at for threshold in due})
        if await store.replace_loop_value(WARNINGS_KEY, raw, fired):
            return due


async def claim_once(store: Store, key: str, now_ms: int) -> bool:
    """Whether the warning ``key`` (e.g. ``sensor:feeds``) may fire now: True at most
    once per window, marked in ``budget_warnings`` with a compare-and-set."""
    while True:
        raw = (await store.loop_values()).get(WARNINGS_KEY)
        fired = dict(raw) if isinstance(raw, dict) else {}
        last = fired.get(key)
        if isinstance(last, int) and now_ms - last < WINDOW_MS:
            return False
        fired[key] = now_ms
        if await store.replace_loop_value(WARNINGS_KEY, raw, fired):
            return True


def budget_json(use: BudgetUse) -> dict[str, object]:
    """The budget's use for ``vigil status --json`` and ``vigil stats --json``."""
    return {"spent_usd": use.spent_usd, "cap_usd": use.cap_usd, "fraction": use.fraction, "over": use.over}


def budget_line(use: BudgetUse) -> str:
    """One line for people: spend of the last 24 h against the cap."""
    if use.cap_usd is None:
        return f"budget: ${use.spent_usd:.2f} spent in the last 24 h (no cap)"
    over = "; over the cap: only urgent tasks run, those a person made urgent" if use.over else ""
    return f"budget: ${use.spent_usd:.2f} of ${use.cap_usd:.2f} in the last 24 h ({use.fraction or 0:.0%}){over}"
