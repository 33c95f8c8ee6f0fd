"""PostgreSQL lanes: advisory locks held by a dedicated session; the server frees a
lane when that session dies, and the holder notices that it lost it."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import psycopg
import pytest

from vigil.store.postgres.lanes import LANE_KEY, PostgresLanes

HOLD_SCRIPT = """
import asyncio, sys
from vigil.store.postgres.lanes import PostgresLanes
async def main():
    lanes = PostgresLanes(sys.argv[1], 1, name="vigil dispatcher held-by-child")
    assert await lanes.try_acquire()
    print("held", flush=True)
    await asyncio.sleep(120)
asyncio.run(main())
"""


def held_lanes(url: str) -> list[int]:
    """The lanes the server says are held in this database."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT objid::int FROM pg_locks WHERE locktype = 'advisory' AND classid = %s AND objsubid = 2 "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) ORDER BY 1",
            (LANE_KEY,),
        ).fetchall()
    return [row[0] for row in rows]


def terminate(url: str, application_name: str) -> int:
    """End the server sessions with that application name; returns how many."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (application_name,),
        ).fetchall()
    return len(rows)


async def test_each_dispatcher_takes_a_free_lane_until_none_is_left(postgres_url: str) -> None:
    first, second, third = (PostgresLanes(postgres_url, 2, name=f"vigil dispatcher d{n}") for n in range(3))
    try:
        assert await first.try_acquire()
        assert await second.try_acquire()
        assert not await third.try_acquire()
        assert (first.lane, second.lane, third.lane) == (0, 1, None)
        assert held_lanes(postgres_url) == [0, 1]
        assert await first.still_held()
        holders = await third.holders()
        assert "lane 0: vigil dispatcher d0" in holders
        assert "lane 1: vigil dispatcher d1" in holders
        assert third.where.startswith("advisory locks in ")
        assert third.where.endswith(postgres_url.rsplit("/", 1)[1])

        await first.release()
        await first.release()  # idempotent
        assert held_lanes(postgres_url) == [1]
        assert await third.try_acquire()
        assert third.lane == 0
    finally:
        for lanes in (first, second, third):
            await lanes.release()
    assert held_lanes(postgres_url) == []


async def test_a_lost_session_is_noticed_and_frees_the_lane(postgres_url: str) -> None:
    holder = PostgresLanes(postgres_url, 1, name="vigil dispatcher doomed")
    other = PostgresLanes(postgres_url, 1, name="vigil dispatcher waiting")
    try:
        assert await holder.try_acquire()
        assert not await other.try_acquire()

        assert terminate(postgres_url, "vigil dispatcher doomed") == 1

        assert not await holder.still_held()
        assert holder.lane is None
        assert await other.try_acquire()
        assert other.lane == 0
        assert not await holder.try_acquire()  # retried on a new session: taken now
    finally:
        await holder.release()
        await other.release()


async def test_the_server_frees_the_lane_of_a_killed_process(postgres_url: str) -> None:
    proc = subprocess.Popen([sys.executable, "-c", HOLD_SCRIPT, postgres_url], stdout=subprocess.PIPE, text=True)
    ours = PostgresLanes(postgres_url, 1, name="vigil dispatcher survivor")
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "held"
        assert not await ours.try_acquire()
        assert "held-by-child" in await ours.holders()

        proc.kill()
        proc.wait(timeout=10)

        deadline = time.monotonic() + 30  # safety net only
        while not await ours.try_acquire():
            assert time.monotonic() < deadline, "the lane of a dead process was not freed"
            await asyncio.sleep(0.05)
        assert ours.lane == 0
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        await ours.release()


async def test_an_unreachable_server_is_a_one_line_error() -> None:
    from vigil.errors import OperationError

    lanes = PostgresLanes("postgresql://vigil@127.0.0.1:1/nowhere", 1, name="vigil dispatcher x")
    with pytest.raises(OperationError) as failed:
        await lanes.try_acquire()
    assert "\n" not in str(failed.value)
    assert "connection refused" in str(failed.value)
    assert not await lanes.still_held()
    assert await lanes.holders() == "other dispatchers"


async def test_others_held_sees_other_sessions_lanes(postgres_url: str) -> None:
    ours = PostgresLanes(postgres_url, 2, name="vigil dispatcher ours")
    theirs = PostgresLanes(postgres_url, 2, name="vigil dispatcher theirs")
    try:
        assert await ours.try_acquire()
        assert not await ours.others_held()
        assert await theirs.try_acquire()
        assert await ours.others_held()
        await theirs.release()
        assert not await ours.others_held()
        await ours.release()
        assert not await ours.others_held()
        assert held_lanes(postgres_url) == []  # the probe took nothing and kept no session
        assert terminate(postgres_url, "vigil dispatcher ours") == 0
    finally:
        await ours.release()
        await theirs.release()
