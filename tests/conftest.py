"""Shared fixtures: real SQLite files in tmp_path, a manual clock, a home factory."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import traceback
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.postgres_server import URL_ENV, NoServer, drop_database, fresh_database, migrated_template, throwaway_server
from vigil.clock import ManualClock
from vigil.home import init_home
from vigil.store.sqlite import SqliteStore

REPO = Path(__file__).resolve().parent.parent

# Each test module declares its tier: ``pytestmark = pytest.mark.slow`` (or the mark
# on a test) for the slow tier, which `make check` leaves out and `make test` runs,
# and ``pytest.mark.alone`` besides for the tests `make test` runs after the rest
# (see docs/testing.md); tests/test_tiers.py checks the rules. Tests on PostgreSQL
# are slow wherever they are (they need the server): marked here.


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        callspec = getattr(item, "callspec", None)
        on_postgres = "postgres_server" in getattr(item, "fixturenames", ()) or (
            callspec is not None and callspec.params.get("backend") == "postgres"
        )
        if on_postgres:
            item.add_marker(pytest.mark.slow)
    if hasattr(config, "workerinput"):
        # On pytest-xdist's workers, the slow tier first: the long files start early,
        # and the short ones fill the gaps at the end (their order is kept).
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def store(tmp_path: Path, clock: ManualClock) -> AsyncIterator[SqliteStore]:
    """A store on a real SQLite file, with the manual clock."""
    s = await SqliteStore.open(tmp_path / "data" / "vigil.db", clock=clock)
    yield s
    await s.close()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The admin URL of a real PostgreSQL server for this test session: the one
    ``VIGIL_TEST_POSTGRES_URL`` names, else a throwaway one started here; skips the
    test (with the reason) when neither is possible."""
    if os.environ.get(URL_ENV):
        yield os.environ[URL_ENV]
        return
    try:
        with throwaway_server() as url:
            yield url
    except NoServer as err:
        pytest.skip(f"PostgreSQL tests need a server: {err}")


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """The URL of a fresh, empty PostgreSQL database, dropped after the test."""
    with fresh_database(postgres_server) as url:
        yield url


@pytest.fixture(scope="session")
def postgres_template(postgres_server: str) -> Iterator[str]:
    """The name of a database Vigil's migrations ran on, made once per session."""
    name = migrated_template(postgres_server)
    yield name
    drop_database(postgres_server, name)


@pytest.fixture
def postgres_migrated_url(postgres_server: str, postgres_template: str) -> Iterator[str]:
    """The URL of a fresh PostgreSQL database already migrated to Vigil's schema (a
    copy of the session's template; opening a store on it migrates nothing),
    dropped after the test."""
    with fresh_database(postgres_server, postgres_template) as url:
        yield url


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A fresh home made by `vigil init`'s code path, without the safe defaults the
    command adds ([retention], [budget]): tests that need them write their own."""
    path = tmp_path / "home"
    init_home(path)
    return path


VigilRunner = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def vigil(home: Path) -> VigilRunner:
    """Run the real `vigil` in a subprocess against the test home."""

    def run(
        *args: str,
        input_text: str | None = None,
        env: dict[str, str] | None = None,
        check: bool = False,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[str]:
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("VIGIL_")}
        full_env.update(env or {})
        proc = subprocess.run(
            [sys.executable, "-m", "vigil", "--home", str(home), *args],
            input=input_text,
            capture_output=True,
            text=True,
            env=full_env,
            timeout=timeout,
            check=False,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"vigil {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
        return proc

    return run


@contextmanager
def _logging_as_in_a_new_process() -> Iterator[None]:
    """Logging as a new `vigil` process has it: no handler on the root logger (so a
    warning reaches stderr through logging's last resort, as it would from the
    binary, instead of pytest's capture), level WARNING; handlers a command adds
    are gone afterwards."""
    loggers = [logging.root] + [
        logger for logger in logging.root.manager.loggerDict.values() if isinstance(logger, logging.Logger)
    ]
    handlers = {logger: list(logger.handlers) for logger in loggers}
    root_level = logging.root.level
    logging.root.handlers = []
    logging.root.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for logger in [logging.root, *logging.root.manager.loggerDict.values()]:
            if isinstance(logger, logging.Logger):
                logger.handlers = handlers.get(logger, [])
        logging.root.setLevel(root_level)


@pytest.fixture
def vigil_in_process(home: Path) -> VigilRunner:
    """Run `vigil` against the test home in this process (click's ``CliRunner``):
    the same parser, commands and error mapping as the real binary, without a
    Python start-up per call, for tests where a subprocess proves nothing more.
    Returns what the `vigil` fixture returns; an exception that escapes the CLI
    shows on stderr as the traceback the real binary would print."""
    from click.testing import CliRunner

    from vigil.cli import main

    def run(
        *args: str,
        input_text: str | None = None,
        env: dict[str, str] | None = None,
        check: bool = False,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[str]:
        del timeout  # nothing here waits on another process
        full_env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("VIGIL_")}
        full_env.update(env or {})
        argv = ["--home", str(home), *args]
        with _logging_as_in_a_new_process():
            result = CliRunner().invoke(main, argv, input=input_text, env=full_env, prog_name="vigil")
        stderr = result.stderr
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            stderr += "".join(traceback.format_exception(result.exception))
        proc = subprocess.CompletedProcess(["vigil", *argv], result.exit_code, result.stdout, stderr)
        if check and proc.returncode != 0:
            raise AssertionError(f"vigil {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
        return proc

    return run
