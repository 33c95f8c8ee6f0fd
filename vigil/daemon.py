"""``vigil run`` and ``vigil dispatch once``: the composition root of the long-running
process (it may import every package, lazily, inside functions).

``vigil run`` opens the store, takes a dispatcher lane (``[dispatch] lanes``; with
the default of one, the single-dispatcher lock) or waits in standby until one is
free, recovers what dead dispatchers left, starts the sensors and runs the
dispatcher until SIGTERM/SIGINT; a lost lane sends it back to standby. Standing by
or not, it recovers orphaned runs periodically (dispatch/recovery.py). The first
signal stops gracefully (the running task gets ``[dispatch] shutdown_grace``); a
second one cuts the grace short. See docs/running.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from vigil.clock import ACCELERATED_CLOCK_ENV, AcceleratedClock, Clock, SystemClock, clock_from_env, real_seconds
from vigil.config import Settings
from vigil.errors import DatabaseReplaced, InputError, LockHeld, OperationError
from vigil.fate import Policy
from vigil.logfile import CappedFilter, PrintableFilter, private_log_handler
from vigil.models import Task
from vigil.redaction import RedactingFilter, Redactor

if TYPE_CHECKING:
    from dispatch.alerts import AlertHook
    from dispatch.executors import Executor
    from dispatch.lanes import LaneLock
    from dispatch.loop import Dispatcher
    from sensors.runner import SensorRunner
    from vigil.store import Store

log = logging.getLogger("vigil.daemon")

LOG_FILE = "vigil.log"
LOG_MAX_BYTES = 5 * 1024 * 1024
LOG_BACKUPS = 5
CONSOLE_TIME = "[%Y-%m-%d %H:%M:%S]"
QUIET_LOGGERS = ("apscheduler", "httpx", "httpcore", "asyncio")
STALE_CHECK_MS = 60_000  # how often, in clock time, the watchdog looks for stale parts
STALE_CHECK_MIN_S = 1.0  # ... but under an accelerated clock not more often than this (real)


def configure_logging(settings: Settings, *, console: bool = True) -> None:
    """Log INFO and up to the console (stderr: rich on a terminal, plain lines
    otherwise) and to ``logs/vigil.log``, rotated at 5 MB with five old files kept."""
    from rich.console import Console
    from rich.logging import RichHandler

    # what the agent is given, and the chat bot's token whatever its variable is named
    masked = (*settings.dispatch.pass_env, *((settings.telegram.token_env,) if settings.telegram else ()))
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    for handler in list(root.handlers):
        root.removeHandler(handler)
    try:
        file_handler = private_log_handler(
            settings.logs_dir / LOG_FILE,
            max_bytes=LOG_MAX_BYTES,
            backups=LOG_BACKUPS,
            pass_env=masked,
        )
    except OSError as err:
        raise OperationError(f"cannot write the log {settings.logs_dir / LOG_FILE}: {err.strerror}") from None
    handlers: list[logging.Handler] = [file_handler]
    if console and sys.stderr.isatty():
        # the date as the log file writes it, not the locale's (%x: 12/04/26)
        rich = RichHandler(console=Console(stderr=True), show_path=False, markup=False, log_time_format=CONSOLE_TIME)
        handlers.append(rich)
    elif console:
        # Not a terminal (systemd's journal, a pipe): one plain line per record, unwrapped.
        plain = logging.StreamHandler(sys.stderr)
        plain.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        handlers.append(plain)
    # on the handlers, not the root logger: a logger's filters skip records that
    # propagate up from child loggers
    secrets = RedactingFilter(Redactor.from_env(os.environ, masked))
    for handler in handlers:
        if handler is not file_handler:  # the file handler has its own
            handler.addFilter(secrets)
            handler.addFilter(PrintableFilter())
            handler.addFilter(CappedFilter())
        root.addHandler(handler)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


def _daemon_clock() -> Clock:
    """The system clock, or the accelerated clock ``VIGIL_ACCELERATED_CLOCK`` asks
    for (a testing aid; loudly logged). Raises ``ConfigError`` for a bad value."""
    clock = clock_from_env(os.environ)
    if isinstance(clock, AcceleratedClock):
        log.warning(
            "%s is set: simulated time runs %g times faster than real time", ACCELERATED_CLOCK_ENV, clock.factor
        )
    return clock


def _executor_factory(settings: Settings, clock: Clock) -> Callable[[str], Executor]:
    """Executors by name, built once each."""
    from dispatch.executors import build_executor

    built: dict[str, Executor] = {}

    def factory(name: str) -> Executor:
        if name not in built:
            built[name] = build_executor(name, settings, clock=clock)
        return built[name]

    return factory


def _make_dispatcher(store: Store, settings: Settings, clock: Clock, alerts: AlertHook, worker_id: str) -> Dispatcher:
    """The dispatcher with its guard (gate, budget, approvals, alerts)."""
    from dispatch.guard import Guard
    from dispatch.loop import Dispatcher

    guard = Guard(store, settings, clock, alerts)
    return Dispatcher(store, settings, _executor_factory(settings, clock), clock, worker_id, guard=guard)


def _make_alerts(settings: Settings, store: Store) -> AlertHook:
    from dispatch.alerts import alert_hook

    return alert_hook(settings, store)


def _make_lanes(settings: Settings, clock: Clock, worker_id: str) -> LaneLock:
    """The lanes of the store: advisory locks on PostgreSQL, lock files beside a
    SQLite database (refused for lanes > 1 on a network filesystem: ``ConfigError``)."""
    from dispatch.lanes import FileLanes, refuse_network_filesystem

    lanes = settings.dispatch.lanes
    if settings.store.url is not None:
        from vigil.store.postgres.lanes import PostgresLanes

        return PostgresLanes(settings.store.url, lanes, name=f"vigil dispatcher {worker_id}")
    refuse_network_filesystem(settings.store.path, lanes)
    return FileLanes(settings.store.path, lanes, clock)


@contextlib.contextmanager
def every_lane(settings: Settings, purpose: str, why: str) -> Iterator[None]:
    """Hold every dispatcher lane of the SQLite home for the block (``purpose`` says
    who, to a dispatcher that stands by meanwhile). Raises ``InputError`` naming the
    dispatchers that hold one, with ``why`` they must stop first."""
    from dispatch.lanes import AllLanes

    lanes = AllLanes(settings.store.path, settings.dispatch.lanes, SystemClock(), purpose)
    if not lanes.try_acquire():
        raise InputError(
            f"a dispatcher is running on this home ({lanes.holders()}); stop every 'vigil run' first: {why}"
        )
    try:
        yield
    finally:
        lanes.release()


class _Signals:
    """SIGTERM/SIGINT → ``stop``; a second signal → ``on_second`` (hurry)."""

    def __init__(self, stop: asyncio.Event) -> None:
        self.stop = stop
        self.on_second: Callable[[], None] | None = None
        self._loop = asyncio.get_running_loop()

    def __enter__(self) -> _Signals:
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._loop.add_signal_handler(sig, self._received, sig)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._loop.remove_signal_handler(sig)

    def _received(self, sig: signal.Signals) -> None:
        if not self.stop.is_set():
            log.info("%s received: stopping (again to skip the grace period)", sig.name)
            self.stop.set()
        elif self.on_second is not None:
            log.info("%s received again: ending the running task now", sig.name)
            self.on_second()


class _Sensors:
    """The sensor runner, started at most once."""

    def __init__(self, store: Store, settings: Settings, clock: Clock, on_created: Callable[[], None]) -> None:
        from sensors.config import load_sensor_specs
        from sensors.runner import SensorRunner

        specs = load_sensor_specs(settings)
        self._runner: SensorRunner | None = None
        if specs:
            self._runner = SensorRunner(store, settings, clock, specs, on_created=on_created)
        self._started = False
        self.count = len(specs)

    async def start(self) -> None:
        if self._runner is not None and not self._started:
            await self._runner.start()
            self._started = True
            log.info("%d sensor(s) started", self.count)

    async def stop(self) -> None:
        if self._runner is not None and self._started:
            self._started = False
            await self._runner.stop()


async def serve(settings: Settings, *, clock: Clock | None = None) -> int:
    """Run sensors and the dispatcher until a signal; returns the exit code (0)."""
    from dispatch.standby import StandbyNotice, release_lane, wait_for_lane
    from dispatch.worker_ids import new_worker_id
    from vigil.store import open_store

    clock = clock or _daemon_clock()
    stop = asyncio.Event()
    worker_id = new_worker_id()
    lanes = _make_lanes(settings, clock, worker_id)
    store = await open_store(settings, clock)
    alerts = _make_alerts(settings, store)
    lost: list[str] = []  # why the database file cannot be used any more
    try:
        dispatcher = _make_dispatcher(store, settings, clock, alerts, worker_id)

        def file_lost(problem: str) -> None:
            lost.append(problem)
            dispatcher.hurry(problem)  # the running task's outcome could not be recorded anyway

        watcher = _watch_file(store, stop, file_lost)
        # late-bound: a lost lane replaces the dispatcher
        sensors = _Sensors(store, settings, clock, lambda: dispatcher.wake())  # noqa: PLW0108
        # late-bound like the sensors' wake-up; own commits do not wake the dispatcher
        recovery = _recovering(store, settings, clock, stop, lambda: dispatcher.wake())  # noqa: PLW0108
        notice = StandbyNotice(store, clock, worker_id, settings.dispatch.heartbeat_ms)

        async def standing_by() -> None:
            await notice.start()
            if settings.dispatch.standby_sensors:
                await sensors.start()

        with _Signals(stop) as signals:
            try:
                while await wait_for_lane(lanes, stop, on_standby=standing_by):
                    await notice.stop()
                    signals.on_second = dispatcher.hurry
                    if await _dispatch(
                        dispatcher,
                        lanes,
                        store=store,
                        settings=settings,
                        alerts=alerts,
                        clock=clock,
                        stop=stop,
                        sensors=sensors,
                    ):
                        await lanes.release()  # lost: stand by for a lane again
                        dispatcher = _make_dispatcher(store, settings, clock, alerts, worker_id)
            finally:
                for helper in (recovery, watcher):
                    helper.cancel()
                await asyncio.gather(recovery, watcher, return_exceptions=True)
                await notice.stop()
                await sensors.stop()
        if lost:
            raise DatabaseReplaced(lost[0])
        log.info("stopped")
        return 0
    finally:
        await alerts.drain(stopping=True)  # a stop never waits on a notification service
        if lanes.lane is not None and not lost:  # stopped while dispatching: the last one out says so
            await release_lane(dispatcher, lanes)
        await lanes.release()
        await store.close()


def _recovering(
    store: Store, settings: Settings, clock: Clock, stop: asyncio.Event, on_recovered: Callable[[], None]
) -> asyncio.Task[None]:
    """Standing by or dispatching, this process settles what dead dispatchers left,
    every recovery interval until ``stop``."""
    from dispatch.recovery import keep_recovering, recovery_interval_s
    from dispatch.salvage import Salvager

    every_s = recovery_interval_s(settings.dispatch.lease_ms)
    policy = Policy(settings.dispatch)
    salvage = Salvager(settings)
    return asyncio.create_task(
        keep_recovering(
            store, clock, stop, interval_s=every_s, policy=policy, on_recovered=on_recovered, salvage=salvage
        )
    )


def _watch_file(store: Store, stop: asyncio.Event, on_problem: Callable[[str], None]) -> asyncio.Task[None]:
    """Watch the SQLite file under the store (``vigil.database_file``); on
    PostgreSQL, a task that does nothing."""
    from vigil.database_file import watch_database_file
    from vigil.store.sqlite import SqliteStore

    if not isinstance(store, SqliteStore):
        return asyncio.create_task(asyncio.sleep(0))
    return asyncio.create_task(watch_database_file(store.file_problem, stop, on_problem))


async def _dispatch(
    dispatcher: Dispatcher,
    lanes: LaneLock,
    *,
    store: Store,
    settings: Settings,
    alerts: AlertHook,
    clock: Clock,
    stop: asyncio.Event,
    sensors: _Sensors,
) -> bool:
    """Recover, start the sensors and helpers, and dispatch while the lane is held.
    Returns True when the lane was lost, False on ``stop``."""
    from dispatch.agents.doctor import widenings
    from dispatch.environment import base_env
    from dispatch.recovery import recover_orphans
    from dispatch.salvage import Salvager
    from dispatch.standby import dispatch_in_lane
    from dispatch.task_alerts import forward_task_events
    from dispatch.watchdog import watch
    from vigil.retention import keep_pruned
    from vigil.wal import keep_wal_small, wal_path_of

    log.info(
        "dispatcher %s on %s (executor %s, lane %s of %d)",
        dispatcher.worker_id,
        settings.home,
        settings.dispatch.executor,
        lanes.lane,
        lanes.lanes,
    )
    for line in widenings(settings, base_env(settings, executor=settings.dispatch.executor)):
        log.warning("the agent can reach beyond its workspace: %s", line)
    await recover_orphans(store, clock, policy=Policy(settings.dispatch), salvage=Salvager(settings))
    await sensors.start()
    # Overdue sensors and a hung dispatcher loop alert from inside; a dead
    # process is caught by `vigil alerts check` from cron.
    every_s = max(STALE_CHECK_MIN_S, real_seconds(clock, STALE_CHECK_MS))
    watchdog = asyncio.create_task(watch(store, settings, alerts, clock, stop, interval_s=every_s))
    helpers = [watchdog, asyncio.create_task(keep_pruned(store, settings, clock, stop))]
    if lanes.lane == 0:  # one process sends them (and polls the chat), however many lanes dispatch
        helpers.append(asyncio.create_task(forward_task_events(store, settings, alerts, clock)))
        helpers.append(asyncio.create_task(_chat(settings, clock, stop)))
    if settings.store.url is None:  # PostgreSQL has no WAL file of ours to keep small
        wal = wal_path_of(settings.store.path)
        helpers.append(asyncio.create_task(keep_wal_small(store, stop, wal_path=wal)))
    try:
        return await dispatch_in_lane(dispatcher, lanes, stop)
    finally:
        for helper in helpers:
            helper.cancel()
        await asyncio.gather(*helpers, return_exceptions=True)


async def _chat(settings: Settings, clock: Clock, stop: asyncio.Event) -> None:
    """The Telegram bot (``[chat.telegram]``, vigil.chat); imported only when configured."""
    if settings.telegram is not None:
        from vigil.chat.service import chat_forever

        await chat_forever(settings, clock, stop)


async def dispatch_once(settings: Settings, *, clock: Clock | None = None) -> tuple[Task | None, str | None]:
    """Run the next due task in the foreground. Returns the task as recorded (None
    when nothing ran) and, when nothing ran because the loop is paused or gated,
    the reason.

    Takes a dispatcher lane (raises ``LockHeld`` naming the holders when every lane
    is taken) and recovers what dead dispatchers left first.
    """
    from dispatch.recovery import recover_orphans
    from dispatch.salvage import Salvager
    from dispatch.standby import release_lane
    from dispatch.worker_ids import new_worker_id
    from vigil.store import open_store

    clock = clock or _daemon_clock()
    worker_id = new_worker_id()
    lanes = _make_lanes(settings, clock, worker_id)
    try:
        if not await lanes.try_acquire():
            who = await lanes.holders()
            running = "a dispatcher is running" if lanes.lanes == 1 else "every dispatcher lane is taken"
            raise LockHeld(f"{running} ({who}); it runs due tasks itself")
        store = await open_store(settings, clock)
        alerts = _make_alerts(settings, store)
        try:
            await recover_orphans(store, clock, policy=Policy(settings.dispatch), salvage=Salvager(settings))
            dispatcher = _make_dispatcher(store, settings, clock, alerts, worker_id)
            stop = asyncio.Event()
            with _Signals(stop) as signals:
                signals.on_second = dispatcher.hurry
                try:
                    task = await dispatcher.run_once(stop)
                finally:
                    await release_lane(dispatcher, lanes)
            held = dispatcher.claim_restriction
            return task, None if held is None else held.reason
        finally:
            await alerts.drain(stopping=True)
            await store.close()
    finally:
        await lanes.release()


def run_daemon(settings: Settings) -> int:
    """``vigil run``: log to the console and logs/vigil.log, serve until a signal."""
    configure_logging(settings)
    return asyncio.run(serve(settings))
