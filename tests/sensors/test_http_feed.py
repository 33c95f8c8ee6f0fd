"""The http and feed sensors against a real HTTP server on 127.0.0.1, including a
server that is down, slow, returns garbage or an endless body."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from sensors.api import FoundTask, SensorContext
from sensors.builtin.feed import feed
from sensors.builtin.http import http
from sensors.execution import SensorReport
from tests.sensors.conftest import RunnerFactory, SpecFactory
from tests.sensors.webserver import LocalServer, Route, serve
from vigil.store.sqlite import SqliteStore


@pytest.fixture
def web() -> Iterator[LocalServer]:
    yield from serve()


async def other(ctx: SensorContext) -> list[FoundTask]:
    return [FoundTask(key="other", subject="the other sensor ran")]


async def run(make_runner: RunnerFactory, make_spec: SpecFactory, func: Any, **options: Any) -> SensorReport:
    spec = make_spec(func, timeout_ms=options.pop("timeout_ms", 5000), options=options)
    reports = await make_runner(spec, make_spec(other)).run_now()
    assert reports[1].created + reports[1].ignored == 1  # the other sensor is never affected
    return reports[0]


def rss(*items: tuple[str, str]) -> bytes:
    entries = "".join(
        f"<item><guid>{guid}</guid><title>{title}</title><link>http://x/{guid}</link>"
        f"<description>about {title}</description></item>"
        for guid, title in items
    )
    return (
        f'<?xml version="1.0"?><rss version="2.0"><channel><title>Releases</title>{entries}</channel></rss>'
    ).encode()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- http ---------------------------------------------------------------------------


async def test_http_reports_changes_of_content_and_status(
    store: SqliteStore, web: LocalServer, make_runner: RunnerFactory, make_spec: SpecFactory
) -> None:
    web.routes["/page"] = Route(body=b"version 1")
    url = web.url("/page")
    first = await run(make_runner, make_spec, http, url=url)
    assert (first.status, first.created) == ("ok", 0)  # the first run records a baseline
    same = await run(make_runner, make_spec, http, url=url)
    assert same.created == 0

    web.routes["/page"] = Route(body=b"version 2")
    changed = await run(make_runner, make_spec, http, url=url)
    assert changed.created == 1
    web.routes["/page"] = Route(status=503, body=b"down for maintenance")
    status = await run(make_runner, make_spec, http, url=url)
    assert status.created == 1

    subjects = [t.subject for t in await store.list_tasks() if t.source == "sensor:http"]
    assert subjects == [f"{url} answered 503 (was 200)", f"{url} changed"]
    newest = (await store.list_tasks())[0]
    assert "down for maintenance" in newest.description


@pytest.mark.parametrize(
    ("path", "timeout_ms", "status", "error_part"),
    [
        ("/slow", 300, "timeout", "timed out after 0.3s"),
        ("/endless", 5000, "error", "larger than max_bytes (100000)"),
        ("/huge", 5000, "error", "more than max_bytes (100000)"),
    ],
)
async def test_http_target_that_is_slow_or_endless_is_a_sensor_error(
    store: SqliteStore,
    web: LocalServer,
    make_runner: RunnerFactory,
    make_spec: SpecFactory,
    path: str,
    timeout_ms: int,
    status: str,
    error_part: str,
) -> None:
    report = await run(make_runner, make_spec, http, url=web.url(path), max_bytes=100_000, timeout_ms=timeout_ms)
    assert report.status == status
    assert error_part in (report.error or "")
    assert [t.source for t in await store.list_tasks()] == ["sensor:other"]


async def test_http_target_that_is_down_is_a_sensor_error_not_a_task(
    store: SqliteStore, make_runner: RunnerFactory, make_spec: SpecFactory
) -> None:
    report = await run(make_runner, make_spec, http, url=f"http://127.0.0.1:{free_port()}/")
    assert report.status == "error"
    assert "ConnectError" in (report.error or "")
    assert [t.source for t in await store.list_tasks()] == ["sensor:other"]


# --- feed ---------------------------------------------------------------------------


async def test_feed_turns_new_entries_into_tasks_once(
    store: SqliteStore, web: LocalServer, make_runner: RunnerFactory, make_spec: SpecFactory
) -> None:
    web.routes["/feed.xml"] = Route(body=rss(("1", "v1.0")), content_type="application/rss+xml")
    url = web.url("/feed.xml")
    first = await run(make_runner, make_spec, feed, url=url)
    assert (first.status, first.created) == ("ok", 0)  # existing entries are marked seen

    web.routes["/feed.xml"] = Route(body=rss(("3", "v1.2"), ("2", "v1.1"), ("1", "v1.0")))
    second = await run(make_runner, make_spec, feed, url=url)
    assert second.created == 2
    third = await run(make_runner, make_spec, feed, url=url)
    assert (third.created, third.ignored) == (0, 0)

    tasks = [t for t in await store.list_tasks() if t.source == "sensor:feed"]
    assert [t.subject for t in reversed(tasks)] == ["Releases: v1.1", "Releases: v1.2"]  # oldest first
    assert "about v1.2" in tasks[0].description
    state = next(s for s in await store.sensor_states() if s.name == "feed")
    assert state.state["seen"] == ["1", "2", "3"]


async def test_feed_sends_its_etag_and_a_304_costs_nothing(
    store: SqliteStore, web: LocalServer, make_runner: RunnerFactory, make_spec: SpecFactory
) -> None:
    web.routes["/f"] = Route(body=rss(("1", "a")), headers={"ETag": '"v1"'})
    await run(make_runner, make_spec, feed, url=web.url("/f"))
    web.routes["/f"] = Route(status=304)
    report = await run(make_runner, make_spec, feed, url=web.url("/f"))
    assert (report.status, report.created) == ("ok", 0)
    assert web.requests[-1][1].get("If-None-Match") == '"v1"'


@pytest.mark.parametrize(
    ("route", "error_part"),
    [
        (Route(body=b"\x00\xff\x13garbage<<<>>>not xml at all"), "is not an RSS/Atom feed"),
        (Route(body=b"<html><body>a web page</body></html>"), "is not an RSS/Atom feed"),
        (Route(status=500, body=b"oops"), "answered HTTP 500"),
    ],
)
async def test_feed_garbage_is_a_sensor_error(
    store: SqliteStore,
    web: LocalServer,
    make_runner: RunnerFactory,
    make_spec: SpecFactory,
    route: Route,
    error_part: str,
) -> None:
    web.routes["/f"] = route
    report = await run(make_runner, make_spec, feed, url=web.url("/f"))
    assert report.status == "error"
    assert error_part in (report.error or "")
    state = next(s for s in await store.sensor_states() if s.name == "feed")
    assert state.state == {}


async def test_feed_endless_body_is_capped(
    web: LocalServer, make_runner: RunnerFactory, make_spec: SpecFactory
) -> None:
    report = await run(make_runner, make_spec, feed, url=web.url("/endless"), max_bytes=200_000)
    assert report.status == "error"
    assert "larger than max_bytes (200000)" in (report.error or "")
