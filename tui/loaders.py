"""What each screen shows, read from the store in one bounded batch of queries.

Loaders run in a Textual worker and return frozen values; widgets never query.
Every query here is bounded: the queue is a window of ``WINDOW_ROWS`` rows on the
store's answer to the screen's filter and sort (``Store.task_window``: the page,
its total and the counts from one snapshot), history a keyset page in finish
order, costs a time window (``ix_runs_finished``). ``now_ms`` comes from the
app's clock.

Every text in what they return has its control and bidirectional characters
written as escapes (``vigil.printable.printable_values``): subjects, notes and
errors come from sensors and agents, and an escape sequence drawn raw would drive
the terminal (set its title, write its clipboard, hide text). The store keeps them
as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from tui.loop_state import judged
from tui.times import Times
from vigil.accounts import AccountState, account_states
from vigil.budget import BudgetUse, budget_use
from vigil.clock import MS_PER_DAY
from vigil.config import BudgetSettings, Settings
from vigil.liveness import LoopHealth
from vigil.models import CostRow, Note, Run, SensorState, Task, TaskEvent
from vigil.printable import printable_values
from vigil.status import LockProbe
from vigil.store import CostGroup, Store
from vigil.task_query import TaskQuery, TaskWindow

WINDOW_ROWS = 100  # rows of the queue table at once (two screens and more): a window moved over every match
HISTORY_PAGE = 100
RECENT_MS = 10 * 60_000  # a task that finished this recently stays in the live table, dimmed
HOUR_MS = 3_600_000


@dataclass(frozen=True)
class HourlyUse:
    """Runs and spend per hour of the last 24, oldest hour first, the current last."""

    runs: tuple[int, ...] = (0,) * 24
    cost_usd: tuple[float, ...] = (0.0,) * 24


@dataclass(frozen=True)
class QueueSnapshot:
    """The queue screen's data at one moment.

    ``window`` is the page of the query the screen asked for (and the counts, the
    running tasks, the next task, the recently finished ones, from the same
    snapshot); ``loop_values`` the loop's state as read, and ``lock`` what the
    lanes' locks said then (None: not probed, or PostgreSQL), whose one truth
    (``health``) depends on the time it is judged at: a heartbeat ages."""

    window: TaskWindow
    loop_values: Mapping[str, object]
    heartbeat_ms: int
    query: TaskQuery = field(default_factory=TaskQuery)
    cost_today_usd: float = 0.0
    tokens_today: int = 0
    hourly: HourlyUse = field(default_factory=HourlyUse)
    accounts: tuple[AccountState, ...] = ()  # the agent CLIs' accounts and their limits
    lock: LockProbe | None = None

    def health(self, now_ms: int) -> LoopHealth:
        """The loop at ``now_ms`` (``vigil.liveness``), judged from what was read."""
        return judged(self.loop_values, now_ms, self.heartbeat_ms, self.lock)

    @property
    def tasks(self) -> tuple[Task, ...]:
        return self.window.tasks

    @property
    def recent(self) -> tuple[Task, ...]:
        return self.window.recent


def start_of_day(now_ms: int) -> int:
    return now_ms - now_ms % MS_PER_DAY


def hour_key(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H")


async def load_queue(
    store: Store,
    query: TaskQuery,
    now_ms: int,
    *,
    offset: int = 0,
    heartbeat_ms: int,
    today_ms: int | None = None,
    with_recent: bool = False,
    view_of: QueueSnapshot | None = None,
    settings: Settings | None = None,
    lock: LockProbe | None = None,
) -> QueueSnapshot:
    """One refresh of the queue screen: the window (one snapshot), the loop's state,
    the 24-hour use and today's spend. ``today_ms``: the start of the day whose
    spend the header shows (None: the UTC day). ``with_recent``: also what finished
    in the last ``RECENT_MS`` (the unfiltered view shows it, dimmed). ``view_of``:
    only the view changed since this snapshot (a filter, a sort, the window
    moved), not the data: its loop state and use are kept, only the window is read.
    ``settings`` name the accounts the header shows (None: none); ``lock``: what
    the lanes' locks say (``tui.loop_state.probe_lanes``; None: the heartbeat alone)."""
    window = await store.task_window(
        query, offset=offset, limit=WINDOW_ROWS, recent_since_ms=now_ms - RECENT_MS if with_recent else None
    )
    window = printable_values(window)
    if view_of is not None:
        return replace(view_of, window=window, query=query)
    loop_values = await store.loop_values()
    hours = await store.cost_rollup(since_ms=now_ms - now_ms % HOUR_MS - 23 * HOUR_MS, by=CostGroup.HOUR)
    by_hour = {row.key: row for row in hours}
    first_hour = now_ms - 23 * HOUR_MS
    keys = [hour_key(first_hour + i * HOUR_MS) for i in range(24)]
    hourly = HourlyUse(
        runs=tuple(by_hour[k].runs if k in by_hour else 0 for k in keys),
        cost_usd=tuple(by_hour[k].cost_usd if k in by_hour else 0.0 for k in keys),
    )
    today = start_of_day(now_ms) if today_ms is None else today_ms
    today_rows = await store.cost_rollup(since_ms=today, by=CostGroup.DAY)
    return QueueSnapshot(
        window=window,
        loop_values=printable_values(loop_values),
        heartbeat_ms=heartbeat_ms,
        query=query,
        cost_today_usd=sum(r.cost_usd for r in today_rows),
        tokens_today=sum(r.tokens_in + r.tokens_out for r in today_rows),
        hourly=hourly,
        accounts=() if settings is None else tuple(account_states(settings, loop_values, now_ms)),
        lock=lock,
    )


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


async def load_history_page(store: Store, query: str, *, before: tuple[int, int] | None) -> tuple[Task, ...]:
    """One keyset page of finished tasks, the latest finish first; ``query`` "" means
    no search; ``before``: the last row's (``completed_at``, ``id``) (None: the top)."""
    return printable_values(tuple(await store.finished_tasks(query.strip(), before=before, limit=HISTORY_PAGE)))


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
