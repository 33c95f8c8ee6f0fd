"""``vigil tui --serve`` in a real headless Chromium: with the token the dashboard
renders and answers keys; from a phone-sized page a person answers a question and
approves a review by touch, recorded as a person's acts with the browser session
named; without the token, or with a wrong one, nothing is served and no app process
starts; SIGTERM with two tabs open ends every process."""

from __future__ import annotations

import asyncio
import signal
import urllib.error
import urllib.request
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.tui.browser import Screen, Served, alive, browser_missing, chromium, until
from vigil.clock import SystemClock
from vigil.config import load_settings
from vigil.dashboard_access import make_token
from vigil.models import ApprovalState, NewTask, Note, Outcome, OutcomeKind, Task, TaskEvent, TaskStatus
from vigil.store import open_store

if (missing := browser_missing()) is not None:
    pytest.skip(missing, allow_module_level=True)

from playwright.sync_api import Browser, ViewportSize  # after the skip: it may be missing

pytestmark = pytest.mark.slow  # a browser and a server for each test
T = TypeVar("T")
PHONE: ViewportSize = {"width": 390, "height": 844}  # CSS pixels, as a phone's browser lays out the page


def in_thread(work: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run ``work()`` to its end on a thread of its own: Playwright's sync API keeps an
    event loop running in this one."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, work()).result()


def read(home: Path, task_id: int) -> tuple[Task, list[TaskEvent], list[Note]]:
    """The task as stored, its audit trail and its notes, read from this (sync) test."""

    async def run() -> tuple[Task, list[TaskEvent], list[Note]]:
        store = await open_store(load_settings(home), SystemClock())
        try:
            return await store.get_task(task_id), await store.list_events(task_id), await store.list_notes(task_id)
        finally:
            await store.close()

    return in_thread(run)


def status(home: Path, task_id: int) -> TaskStatus:
    return read(home, task_id)[0].status


def prepare(home: Path) -> dict[str, int]:
    """A pending task, one whose agent asked a question, one awaiting review."""

    async def run() -> dict[str, int]:
        store = await open_store(load_settings(home), SystemClock())
        try:
            ids = {}
            for name, subject in (("asked", "Deploy the release"), ("review", "Rotate the staging keys")):
                added = await store.add_task(NewTask(subject))
                assert added.task_id is not None
                claim = await store.claim_next(worker="w", lease_ms=600_000)
                assert claim is not None
                if name == "asked":
                    await store.ask(claim.task.id, "Deploy to staging or to prod?", ["staging", "prod"], actor="agent")
                    outcome = Outcome(OutcomeKind.SUCCESS)
                else:
                    outcome = Outcome(OutcomeKind.SUCCESS, summary="keys rotated", permission_denials=("Bash: rm x",))
                await store.record(claim, outcome, worker="w")
                ids[name] = added.task_id
            pending = await store.add_task(NewTask("Write the weekly report"))
            assert pending.task_id is not None
            ids["pending"] = pending.task_id
            return ids
        finally:
            await store.close()

    return in_thread(run)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as launched:
        yield launched


@pytest.fixture
def served(home: Path) -> Iterator[Served]:
    server = Served(home)
    try:
        yield server
    finally:
        server.close()


def test_with_the_token_the_queue_renders_keys_work_and_a_link_opens_its_task(
    home: Path, served: Served, browser: Browser, tmp_path: Path
) -> None:
    ids = prepare(home)
    token = make_token(home)
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    screen = Screen(page)
    screen.attach()
    page.goto(f"{served.url}/?token={token}")
    assert page.url == f"{served.url}/"  # the token left the address bar for a cookie
    text = screen.wait_for("Write the weekly report")
    assert "Queue" in text
    assert "Deploy the release" in text
    page.screenshot(path=str(tmp_path / "queue.png"))
    assert (tmp_path / "queue.png").stat().st_size > 10_000
    assert screen.size is not None
    assert screen.size[0] > 60  # a desktop's width: the queue, not Needs you
    page.locator(".xterm-screen").click()  # focus the terminal, as a person would
    page.keyboard.press("6")
    screen.wait_for(lambda t: "Needs you  2 tasks" in t)
    page.keyboard.press("3")
    screen.wait_for("History")
    page.close()
    # a link to a task (as a notification carries) opens that task's screen
    linked = browser.new_page(viewport={"width": 1280, "height": 800})
    task_screen = Screen(linked)
    task_screen.attach()
    linked.goto(f"{served.url}/?task={ids['review']}&token={token}")
    task_screen.wait_for("keys rotated")
    assert f"#{ids['review']}" in task_screen.text()
    linked.close()
    until(lambda: served.log.count("ended after") == 2, "both sessions logged as ended")
    assert served.children() == []  # each tab's app process ended with its tab
    assert token not in served.log  # no access log keeps the links


def test_from_a_phone_a_person_answers_a_question_and_approves_a_review_by_touch(
    home: Path, served: Served, browser: Browser, tmp_path: Path
) -> None:
    ids = prepare(home)
    token = make_token(home)
    # A device scale of 1: headless Chromium's software renderer drew the canvas at 3× under a scale of 3
    # (taps still landed), which would make the screenshot (docs/needs-you.png) show a third of the page.
    context = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True, device_scale_factor=1)
    page = context.new_page()
    screen = Screen(page)
    screen.attach()
    page.goto(f"{served.url}/?token={token}")
    text = screen.wait_for("Rotate the staging keys")
    assert screen.size is not None
    assert screen.size[0] <= 60  # a phone's width: it opens on Needs you
    assert "Needs you" in text
    assert "Q: Deploy to staging or to prod?" in text
    page.screenshot(path=str(tmp_path / "needs-you.png"))
    # answer: the Answer button, then the answer box (a choice's number), then its button
    screen.tap("Answer")
    screen.wait_for("The agent asks")
    page.keyboard.type("2")
    screen.wait_for(lambda t: "2" in t.split("Your answer", 1)[-1])
    screen.tap("Answer (enter)")
    until(lambda: status(home, ids["asked"]) is TaskStatus.PENDING, "the answer stored")
    screen.wait_for(lambda t: "Deploy the release" not in t and "Approve" in t)
    # approve the reviewed result: its Approve button, then Yes
    screen.tap("Approve")
    screen.wait_for("Yes (enter)")
    screen.tap("Yes")
    until(lambda: status(home, ids["review"]) is TaskStatus.COMPLETED, "the approval stored")
    screen.wait_for("nothing waits")
    context.close()
    answered, _, notes = read(home, ids["asked"])
    approved, events, _ = read(home, ids["review"])
    assert answered.answer == "prod"
    assert approved.review == ApprovalState.APPROVED
    actors = {event.actor for event in events if event.kind == "status" and event.to_value == "completed"}
    assert len(actors) == 1
    (actor,) = actors
    assert actor.startswith("human (browser session ")
    session = actor.removeprefix("human (browser session ").rstrip(")")
    assert f"browser session {session} started" in served.log
    assert [(n.author, n.text) for n in notes] == [(actor, "answer: prod")]  # the same person, the same tab


def test_without_the_token_nothing_is_served_and_no_app_process_starts(
    home: Path, served: Served, browser: Browser
) -> None:
    from aiohttp import ClientSession, WSServerHandshakeError

    prepare(home)
    token = make_token(home)
    page = browser.new_page()
    for path in ("/", "/static/js/textual.js", "/?token=wrong", "/ws"):
        response = page.goto(f"{served.url}{path}")
        assert response is not None
        assert response.status == 401, path
        assert "needs its token" in page.content()
    page.close()
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{served.url}/", timeout=30)
    assert refused.value.code == 401
    refused.value.close()  # its response holds the socket

    async def websocket(cookie: str | None) -> int:
        cookies = {"vigil_dashboard": cookie} if cookie is not None else {}
        async with ClientSession(cookies=cookies) as session:
            try:
                async with session.ws_connect(f"{served.url}/ws?width=80&height=24") as ws:
                    await ws.close()
                    return 101
            except WSServerHandshakeError as err:
                return err.status

    assert in_thread(lambda: websocket(None)) == 401
    assert in_thread(lambda: websocket("wrong" + token)) == 401
    assert in_thread(lambda: websocket(token[:-1])) == 401
    assert served.children() == []
    assert served.app_pids() == []
    assert "started from" not in served.log
    # the same link with the token gets in (and starts exactly one app)
    assert in_thread(lambda: websocket(token)) == 101
    until(lambda: len(served.app_pids()) == 1, "one app started for the right token")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_or_sigint_with_two_tabs_open_ends_every_process(
    home: Path, served: Served, browser: Browser, sig: signal.Signals
) -> None:
    prepare(home)
    token = make_token(home)
    context = browser.new_context(viewport={"width": 1000, "height": 700})
    pages = [context.new_page(), context.new_page()]
    for page in pages:
        screen = Screen(page)
        screen.attach()
        page.goto(f"{served.url}/?token={token}")
        screen.wait_for("Write the weekly report")
    until(lambda: len(served.app_pids()) == 2, "two app processes")
    pids = served.app_pids()
    assert sorted(served.children()) == sorted(pids)
    assert all(alive(pid) for pid in pids)
    assert served.stop(sig) == 0
    assert [pid for pid in pids if alive(pid)] == []
    assert served.log.count("ended after") == 2
    assert "stopped; every browser session's process has ended" in served.log
    context.close()


def test_a_session_whose_server_was_killed_ends_by_itself(home: Path, served: Served, browser: Browser) -> None:
    # SIGKILL (an out-of-memory kill, a crash) leaves the server no time to end its
    # sessions; textual's web driver alone would keep each tab's app running for good
    prepare(home)
    token = make_token(home)
    page = browser.new_page(viewport={"width": 1000, "height": 700})
    screen = Screen(page)
    screen.attach()
    page.goto(f"{served.url}/?token={token}")
    screen.wait_for("Write the weekly report")
    until(lambda: len(served.app_pids()) == 1, "the session's app")
    (pid,) = served.app_pids()
    served.stop(signal.SIGKILL)
    until(lambda: not alive(pid), "the orphaned session's app to exit")
    page.close()


def test_the_first_serve_makes_the_token_and_logs_its_link_once_and_readonly_reaches_every_session(
    home: Path, browser: Browser
) -> None:
    prepare(home)
    server = Served(home, "--readonly")
    try:
        links = [line.split("open: ", 1)[1] for line in server.lines if "open: " in line]
        assert links == [f"{server.url}/?token={links[0].rsplit('=', 1)[1]}"]
        assert "a token was made (only its SHA-256 is kept" in server.log
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        screen = Screen(page)
        screen.attach()
        page.goto(links[0])
        text = screen.wait_for("Write the weekly report")
        assert "watch only (read-only)" in server.log
        assert "n New" not in text  # no key that writes
        until(lambda: len(server.app_pids()) == 1, "the session's app")
        (pid,) = server.app_pids()
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        assert b"--readonly" in argv
        assert b"--browser-session" in argv
        page.close()
    finally:
        server.stop()
        server.close()
