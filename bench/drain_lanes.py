"""Drain rate with lanes: how fast several dispatchers empty a queue together.

Configurations, interleaved round by round: 1, 2, 4 and 8 lanes on PostgreSQL
(that many ``vigil run`` processes, each holding one lane) and 1 dispatcher on
SQLite. Each drain starts the processes on an empty queue, waits until every one
holds its lane, inserts ``TASKS`` tasks in one transaction and times from that
commit until the last task is completed (the queue is polled every 20 ms). The
executor is ``dry-run`` (builds the prompt, runs nothing): what is measured is the
claim → record cycle and the coordination between dispatchers. Both stores are
durable (SQLite ``synchronous=FULL``; PostgreSQL's defaults, ``fsync`` and
``synchronous_commit`` on unless the server says otherwise, read back below).

Beside each rate: CPU time the dispatcher processes used per task, CPU time the
PostgreSQL server's backends for the database used per task (when the server runs
on this machine), and how busy the whole machine was during the drain (from
/proc/stat: every process, other people's included). On PostgreSQL also the
transactions the database committed per task (``pg_stat_database.xact_commit``,
read before the insert and after the dispatchers exited, less the benchmark's own
polling): every statement outside a transaction block counts as one, and so does
each delivery of a notification to a listening session (the server wraps it in a
short transaction), which is why the count grows with the number of dispatchers.

The PostgreSQL server is the one ``VIGIL_TEST_POSTGRES_URL`` names (a user that
may create databases), else a throwaway one started from the system's binaries;
without either, the workload is skipped with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bench.harness import command_line, cpu_seconds, filesystem_of, heading, machine, median, record, workload_args

FULL = {"tasks": 2000, "rounds": 3}
QUICK = {"tasks": 50, "rounds": 1}  # a smoke run: every configuration starts and drains
PG_LANES = (1, 2, 4, 8)
SAFETY_S = 600.0  # bounds every wait; only stops a broken run from hanging
POLL_S = 0.02
STATS_FLUSH_S = 1.0  # for the server's statistics of ended sessions to be readable
READY = re.compile(r"lane \d+ of \d+\)")


@dataclass
class Config:
    name: str
    lanes: int
    postgres: bool
    rates: list[float] = field(default_factory=list)  # tasks/s, one per round
    cpu_ms_per_task: list[float] = field(default_factory=list)  # the dispatchers' own
    server_ms_per_task: list[float] = field(default_factory=list)  # PostgreSQL's backends (NaN: SQLite)
    commits_per_task: list[float] = field(default_factory=list)  # PostgreSQL transactions (NaN: SQLite)
    machine_busy: list[float] = field(default_factory=list)  # fraction of all cores


def busy_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of every core so far, from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def make_home(folder: Path, lanes: int, url: str | None) -> Path:
    from vigil.home import init_home

    home = folder / "home"
    init_home(home)
    store = f'[store]\nurl = "{url}"\n\n' if url else ""
    (home / "vigil.toml").write_text(f'{store}[dispatch]\nexecutor = "dry-run"\nlanes = {lanes}\n')
    return home


@contextlib.contextmanager
def dispatchers(home: Path, count: int, logs: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` ``vigil run`` processes on ``home``; stopped (SIGTERM) at the end."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIGIL_")}
    procs = []
    try:
        for n in range(count):
            with (logs / f"run-{n}.log").open("wb") as log:
                procs.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "vigil", "--home", str(home), "run"],
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        env=env,
                    )
                )
        yield procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def wait_ready(logs: Path, count: int, procs: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + SAFETY_S
    while sum(bool(READY.search(p.read_text(errors="replace"))) for p in logs.glob("run-*.log")) < count:
        if any(proc.poll() is not None for proc in procs):
            raise RuntimeError("a vigil run exited early: " + " | ".join(p.read_text() for p in logs.glob("*.log")))
        if time.monotonic() > deadline:
            raise RuntimeError("the dispatchers did not all take a lane")
        time.sleep(0.05)


async def create_schema(home: Path) -> None:
    """Open the store once, so that its schema exists before the dispatchers start."""
    from vigil.config import load_settings
    from vigil.store import open_store

    await (await open_store(load_settings(home))).close()


def backend_pids(url: str | None) -> list[int]:
    """The server processes serving the database at ``url`` (none for SQLite, or when
    the server runs elsewhere), this query's own excluded."""
    if url is None:
        return []
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    return [int(row[0]) for row in rows if Path(f"/proc/{row[0]}/stat").exists()]


def cpu_of(pids: list[int]) -> dict[int, float]:
    found = {}
    for pid in pids:
        with contextlib.suppress(OSError, IndexError, ValueError):
            found[pid] = cpu_seconds(pid)
    return found


def commits(url: str | None) -> int:
    """Transactions the database at ``url`` has committed so far (0 for SQLite)."""
    if url is None:
        return 0
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()").fetchone()
    return int(row[0]) if row else 0


async def drain(
    home: Path, tasks: int, procs: list[subprocess.Popen[bytes]], url: str | None
) -> tuple[float, float, float, float, int]:
    """Insert ``tasks`` and wait until all are completed. Returns (tasks/s, the
    dispatchers' CPU ms per task, the server backends' CPU ms per task (NaN when
    not measurable), machine busy fraction, statements this function ran)."""
    from vigil.config import load_settings
    from vigil.models import NewTask, TaskStatus
    from vigil.store import open_store

    store = await open_store(load_settings(home))
    try:
        cpu_before = sum(cpu_seconds(p.pid) for p in procs)
        server_before = cpu_of(backend_pids(url))
        busy_before, total_before = busy_ticks()
        await store.add_tasks([NewTask(f"bench {n}") for n in range(tasks)], actor="human")
        start = time.perf_counter()
        deadline = time.monotonic() + SAFETY_S
        statements = 1  # the insert
        while (await store.count_by_status())[TaskStatus.COMPLETED] < tasks:
            statements += 1
            if time.monotonic() > deadline:
                raise RuntimeError(f"the queue was not drained: {await store.count_by_status()}")
            await asyncio.sleep(POLL_S)
        statements += 1
        elapsed = time.perf_counter() - start
        busy_after, total_after = busy_ticks()
        cpu_ms = (sum(cpu_seconds(p.pid) for p in procs) - cpu_before) * 1000 / tasks
        server_after = cpu_of(list(server_before))
        server_s = sum(server_after[pid] - server_before[pid] for pid in server_after)
        server_ms = server_s * 1000 / tasks if server_after else float("nan")
        busy = (busy_after - busy_before) / max(total_after - total_before, 1)
        return tasks / elapsed, cpu_ms, server_ms, busy, statements
    finally:
        await store.close()


@contextlib.contextmanager
def database(admin_url: str | None) -> Iterator[str | None]:
    """A fresh PostgreSQL database (dropped afterwards), or None for SQLite."""
    if admin_url is None:
        yield None
        return
    from tests.postgres_server import fresh_database

    with fresh_database(admin_url) as url:
        yield url


def one_drain(config: Config, admin_url: str | None, tasks: int) -> None:
    with (
        tempfile.TemporaryDirectory(prefix="vigil-bench-") as tmp,
        database(admin_url if config.postgres else None) as url,
    ):
        folder = Path(tmp)
        home = make_home(folder, config.lanes, url)
        asyncio.run(create_schema(home))
        with dispatchers(home, config.lanes, folder) as procs:
            wait_ready(folder, config.lanes, procs)
            before = commits(url)
            rate, cpu_ms, server_ms, busy, ours = asyncio.run(drain(home, tasks, procs, url))
        # Ended sessions have flushed their statistics; give the server a moment.
        time.sleep(STATS_FLUSH_S if url else 0)
        committed = (commits(url) - before - ours) / tasks if url else float("nan")
    config.commits_per_task.append(committed)
    config.rates.append(rate)
    config.cpu_ms_per_task.append(cpu_ms)
    config.server_ms_per_task.append(server_ms)
    config.machine_busy.append(busy)
    print(
        f"  {config.name}: {rate:,.0f} tasks/s, dispatchers {cpu_ms:.2f} ms CPU/task, "
        f"server {server_ms:.2f} ms CPU/task, {committed:.1f} commits/task, machine {busy:.0%} busy",
        flush=True,
    )


def server_durability(admin_url: str) -> str:
    """How durable the server's commits are; raises ``NoServer`` when it cannot be reached."""
    import psycopg

    from tests.postgres_server import NoServer

    try:
        conn = psycopg.connect(admin_url, autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as err:
        raise NoServer(str(err).strip().splitlines()[0]) from None
    with conn:
        fsync = conn.execute("SHOW fsync").fetchone()
        commit = conn.execute("SHOW synchronous_commit").fetchone()
        version = conn.execute("SHOW server_version").fetchone()
        data = conn.execute("SELECT setting FROM pg_settings WHERE name = 'data_directory'").fetchone()
    # only a superuser sees the data folder; a remote server's is not on this machine
    where = f", data on {filesystem_of(Path(data[0]))}" if data and Path(data[0]).is_dir() else ""
    return (
        f"PostgreSQL {version[0] if version else '?'}, fsync={fsync[0] if fsync else '?'}, "
        f"synchronous_commit={commit[0] if commit else '?'}{where}"
    )


def results_table(configs: list[Config], baseline: Config) -> str:
    lines = [
        "| store | dispatchers (lanes) | median tasks/s | × SQLite, 1 dispatcher | dispatcher CPU per task | "
        "server CPU per task | server commits per task | machine busy |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in configs:
        ratio = median([r / b for r, b in zip(c.rates, baseline.rates, strict=True)])
        lines.append(
            f"| {'PostgreSQL' if c.postgres else 'SQLite'} | {c.lanes} | {median(c.rates):,.0f} | {ratio:.2f}× | "
            f"{median(c.cpu_ms_per_task):.2f} ms | {_ms(median(c.server_ms_per_task))} | "
            f"{_count(median(c.commits_per_task))} | {median(c.machine_busy):.0%} |"
        )
    return "\n".join(lines)


def _ms(value: float) -> str:
    return "—" if math.isnan(value) else f"{value:.2f} ms"


def _count(value: float) -> str:
    return "—" if math.isnan(value) else f"{value:.1f}"


@contextlib.contextmanager
def postgres_server() -> Iterator[str]:
    """The admin URL of a server; raises ``NoServer`` (with the reason) if none."""
    from tests.postgres_server import URL_ENV, throwaway_server

    if os.environ.get(URL_ENV):
        yield os.environ[URL_ENV]
        return
    with throwaway_server() as url:
        yield url


def main(argv: list[str] | None = None) -> int:
    from tests.postgres_server import NoServer

    args = workload_args(__doc__.splitlines()[0], argv)
    sizes = QUICK if args.quick else FULL
    started_on = machine()  # the load average as the run starts
    print(f"machine: {started_on}")
    try:
        with postgres_server() as admin_url:
            durability = server_durability(admin_url)
            configs = [Config("SQLite, 1 dispatcher", 1, postgres=False)]
            configs += [Config(f"PostgreSQL, {n} lane(s)", n, postgres=True) for n in PG_LANES]
            heading(f"Drain {sizes['tasks']} tasks, dry-run executor ({durability})")
            for round_no in range(sizes["rounds"]):
                print(f"round {round_no + 1}/{sizes['rounds']}", flush=True)
                for config in configs:
                    one_drain(config, admin_url, sizes["tasks"])
    except NoServer as err:
        print(f"skipped: no PostgreSQL server ({err})")
        return 0
    text = results_table(configs, configs[0])
    print(text)
    if args.record and not args.quick:
        body = (
            f"Command: `{command_line()}`. Machine: {started_on}. {durability}; SQLite synchronous=FULL, WAL.\n\n"
            f"{sizes['tasks']} tasks per drain, median of {sizes['rounds']} interleaved rounds.\n\n{text}"
        )
        recorded = record("drain_lanes", body)
        print("recorded in docs/performance.md" if recorded else "docs/performance.md has no drain_lanes markers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
