"""What each screen shows, read from the store in one bounded batch of queries.

Loaders run in a Textual worker and return frozen values; widgets never query.
Every text in what they return has its control and bidirectional characters
written as escapes (``vigil.printable.printable_values``): subjects, notes and
errors come from sensors and agents, and an escape sequence drawn raw would drive
the terminal (set its title, write its clipboard, hide text). The store keeps them
as they are.
Every query here is bounded: the live queue by ``LIVE_LIMIT`` rows, history by a
keyset page, costs by a time window (``ix_runs_finished``), counts by the
trigger-kept ``status_counts`` table. ``now_ms`` comes from the app's clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from tui.filters import TaskFilter
from tui.times import Times
from vigil.accounts import AccountState, account_states
from vigil.budget import BudgetUse, budget_use
from vigil.clock import MS_PER_DAY
from vigil.config import BudgetSettings, Settings
from vigil.gate import GATE_KEY, LoopGate
from vigil.models import (
    FINISHED_STATUSES,
    HEARTBEAT_KEY,
    CostRow,
    DispatcherHeartbeat,
    Note,
    Run,
    SensorState,
    Task,
    TaskEvent,
    TaskStatus,
)
from vigil.printable import printable_values
from vigil.store import CostGroup, Store

LIVE_LIMIT = 500  # rows in the live queue table; more are counted, not shown
HISTORY_PAGE = 100
ACTIVE_LIMIT = 20  # running tasks read for the header (one per lane)
RECENT_MS = 10 * 60_000  # a task that finished this recently stays in the live table, dimmed
RECENT_LIMIT = 5
RAN_STATUSES = (TaskStatus.COMPLETED, TaskStatus.FAILED)
HOUR_MS = 3_600_000


@dataclass(frozen=True)
class QueueSnapshot:
    """The queue screen's data at one moment.

    ``tasks`` is in dispatch order (or newest first when the filter asks for finished
    statuses); ``next_id`` is the task the dispatcher will take next (None: nothing
    due). ``hourly_cost`` has 24 values, oldest hour first, the current hour last.
    """

    taken_at: int
    tasks: tuple[Task, ...]
    counts: dict[TaskStatus, int]
    heartbeat: DispatcherHeartbeat | None
    gate: LoopGate  # the loop's pause or gate (state running: none)
    next_due_at: int | None
    next_id: int | None
    cost_today_usd: float = 0.0
    tokens_today: int = 0
    hourly_cost: tuple[float, ...] = field(default_factory=lambda: (0.0,) * 24)
    limited: bool = False  # more rows matched than the table shows
    active: tuple[Task, ...] = ()  # the running tasks, from the tasks table (newest first)
    recent: tuple[Task, ...] = ()  # completed or failed in the last RECENT_MS (unfiltered view only)
    accounts: tuple[AccountState, ...] = ()  # the agent CLIs' accounts and their limits


def start_of_day(now_ms: int) -> int:
    return now_ms - now_ms % MS_PER_DAY


def hour_key(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H")


def next_to_run(tasks: tuple[Task, ...], now_ms: int) -> int | None:
    """The first due, unblocked pending task in dispatch order."""
    for task in tasks:
        if task.status is TaskStatus.PENDING and task.waiting_on == 0 and task.scheduled_for <= now_ms:
            return task.id
    return None


async def load_queue(
    store: Store, flt: TaskFilter, now_ms: int, *, today_ms: int | None = None, settings: Settings | None = None
) -> QueueSnapshot:
    """One refresh of the queue screen (eight bounded queries). ``today_ms``: the
    start of the day whose spend the header shows (None: the UTC day); ``settings``
    name the accounts it shows (None: none)."""
    if flt.wants_finished:
        rows = await store.list_tasks(statuses=flt.statuses, limit=LIVE_LIMIT)
        ordered = tuple(rows)
    else:
        ordered = tuple(await store.queue(limit=LIVE_LIMIT))
    shown = tuple(t for t in ordered if flt.matches(t))
    counts = await store.count_by_status()
    loop = await store.loop_values()
    hours = await store.cost_rollup(since_ms=now_ms - now_ms % HOUR_MS - 23 * HOUR_MS, by=CostGroup.HOUR)
    by_hour = {row.key: row for row in hours}
    first_hour = now_ms - 23 * HOUR_MS
    hourly = tuple(
        by_hour[key].cost_usd if (key := hour_key(first_hour + i * HOUR_MS)) in by_hour else 0.0 for i in range(24)
    )
    today = start_of_day(now_ms) if today_ms is None else today_ms
    today_rows = await store.cost_rollup(since_ms=today, by=CostGroup.DAY)
    open_count = sum(n for status, n in counts.items() if status not in FINISHED_STATUSES)
    # The header names the running task from the tasks table (a claim is seen at the
    # next probe), not from the heartbeat, which lags by up to a heartbeat.
    active = await store.list_tasks(statuses=(TaskStatus.ACTIVE,), limit=ACTIVE_LIMIT)
    # What just ran stays in view for a while, so a queue that empties within seconds
    # (a new home, dry-run) does not look as if nothing happened. (A canceled task
    # goes at once: a person did that, and saw it.)
    recent: tuple[Task, ...] = ()
    if flt.is_empty:
        finished = await store.list_tasks(statuses=RAN_STATUSES, limit=RECENT_LIMIT)
        recent = tuple(t for t in finished if t.completed_at is not None and now_ms - t.completed_at <= RECENT_MS)
    snapshot = QueueSnapshot(
        taken_at=now_ms,
        tasks=shown,
        counts=counts,
        heartbeat=DispatcherHeartbeat.from_json(loop.get(HEARTBEAT_KEY)),
        gate=LoopGate.from_json(loop.get(GATE_KEY)),
        next_due_at=await store.next_due_at(),
        next_id=next_to_run(ordered, now_ms),
        cost_today_usd=sum(r.cost_usd for r in today_rows),
        tokens_today=sum(r.tokens_in + r.tokens_out for r in today_rows),
        hourly_cost=hourly,
        limited=len(ordered) >= LIVE_LIMIT and (flt.wants_finished or open_count > LIVE_LIMIT),
        active=tuple(active),
        recent=recent,
        accounts=() if settings is None else tuple(account_states(settings, loop, now_ms)),
    )
    return printable_values(snapshot)


@dataclass(frozen=True)
class TaskDetail:
    """Everything the task screen shows about one task."""

    task: Task
    runs: tuple[Run, ...]
    notes: tuple[Note, ...]
    events: tuple[TaskEvent, ...]
    depends_on: tuple[int, ...]


async def load_task(store: Store, task_id: int) -> TaskDetail:
    """Raises ``TaskNotFound`` when the task is gone."""
    detail = TaskDetail(
        task=await store.get_task(task_id),
        runs=tuple(await store.list_runs(task_id)),
        notes=tuple(await store.list_notes(task_id)),
        events=tuple(await store.list_events(task_id)),
        depends_on=tuple(await store.dependencies(task_id)),
    )
    return printable_values(detail)


async def load_history_page(store: Store, query: str, *, before_id: int | None) -> tuple[Task, ...]:
    """One keyset page of finished tasks, newest first; ``query`` "" means no search."""
    if query.strip():
        found = await store.search_tasks(
            query.strip(), statuses=FINISHED_STATUSES, limit=HISTORY_PAGE, before_id=before_id
        )
        return printable_values(tuple(found))
    return printable_values(
        tuple(await store.list_tasks(statuses=FINISHED_STATUSES, limit=HISTORY_PAGE, before_id=before_id))
    )


async def load_sensors(store: Store) -> tuple[SensorState, ...]:
    return printable_values(tuple(await store.sensor_states()))


@dataclass(frozen=True)
class CostSnapshot:
    """Spend over the window, grouped four ways (rows as the store returns them),
    and the rolling-24 h spend against ``[budget] daily_usd`` (``budget.cap_usd``
    None: no cap set)."""

    since_ms: int
    by_day: tuple[CostRow, ...]
    by_skill: tuple[CostRow, ...]
    by_source: tuple[CostRow, ...]
    by_model: tuple[CostRow, ...]
    budget: BudgetUse


def days_of(hours: list[CostRow], times: Times) -> tuple[CostRow, ...]:
    """Hourly rows (UTC ``YYYY-MM-DDTHH`` keys) summed into the days of the zone
    ``times`` shows: the store groups days by UTC. An hour counts whole in the day
    it starts in (a zone half an hour off UTC is off by that much), and ``tasks`` is
    summed over hours (a task whose runs span hours counts in each)."""
    days: dict[str, CostRow] = {}
    for row in hours:
        start = datetime.strptime(row.key, "%Y-%m-%dT%H").replace(tzinfo=UTC)
        key = times.day(int(start.timestamp() * 1000))
        old = days.get(key)
        if old is None:
            days[key] = replace(row, key=key)
            continue
        days[key] = CostRow(
            key,
            old.runs + row.runs,
            old.tasks + row.tasks,
            old.cost_usd + row.cost_usd,
            old.api_cost_usd + row.api_cost_usd,
            old.tokens_in + row.tokens_in,
            old.tokens_out + row.tokens_out,
            old.cache_read_tokens + row.cache_read_tokens,
            old.cache_write_tokens + row.cache_write_tokens,
        )
    return tuple(days[key] for key in sorted(days))


async def load_costs(store: Store, now_ms: int, days: int, budget: BudgetSettings, times: Times) -> CostSnapshot:
    """The window is ``days`` days of the zone ``times`` shows, today included."""
    since = times.start_of_day(now_ms - (days - 1) * MS_PER_DAY)
    hours = await store.cost_rollup(since_ms=since, by=CostGroup.HOUR)
    costs = CostSnapshot(
        since_ms=since,
        by_day=days_of(hours, times),
        by_skill=tuple(await store.cost_rollup(since_ms=since, by=CostGroup.SKILL)),
        by_source=tuple(await store.cost_rollup(since_ms=since, by=CostGroup.SOURCE)),
        by_model=tuple(await store.cost_rollup(since_ms=since, by=CostGroup.MODEL)),
        budget=await budget_use(store, budget, now_ms),
    )
    return printable_values(costs)
