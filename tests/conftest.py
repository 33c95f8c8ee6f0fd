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

# The slow tier, which `make check` (the inner loop) leaves out and `make test`
# runs: tests marked slow, tests on PostgreSQL (they need the server), and the
# tests under these folders, modules and test names, which each run real
# processes, a terminal or a Textual app, or search widely, for a second or more.
SLOW_TIER = (
    "tests/agents/test_claude_e2e.py",
    "tests/agents/test_code_e2e.py",
    "tests/agents/test_claude_doctor.py",
    "tests/agents/test_codex_e2e.py",
    "tests/agents/test_codex_doctor.py",
    "tests/agents/test_codex_progress.py",
    "tests/agents/test_limits_claude.py",
    "tests/agents/test_limits_codex.py",
    "tests/agents/test_outages_claude.py",
    "tests/agents/test_wall.py",
    "tests/agents/test_repo_wall.py",
    "tests/code/test_approval.py",
    "tests/agents/test_questions.py",
    "tests/reliability/",
    "tests/cli/test_questions.py",
    "tests/cli/test_readme_tour.py",
    "tests/cli/test_first_hour.py",
    "tests/cli/test_json_everywhere.py",
    "tests/cli/test_task_commands.py",
    "tests/cli/test_tui_inside_run.py",
    "tests/daemon/test_commands.py",
    "tests/daemon/test_lanes_sqlite.py",
    "tests/daemon/test_retention.py::test_vigil_run_prunes_at_start_and_logs_it",
    "tests/daemon/test_run.py",
    "tests/daemon/test_status.py::test_status_cli_json_and_text",
    "tests/daemon/test_wal.py",
    "tests/dispatch/test_agent_acceptance.py",
    "tests/dispatch/test_loop_accelerated.py",
    "tests/dispatch/test_process_groups.py",
    "tests/guard/test_flood_race.py",
    "tests/guard/test_notify.py::test_alerts_test_says_which_urls_succeeded_and_status_and_doctor_report_the_failing_one",
    "tests/sensors/test_cli.py",
    "tests/sensors/test_faults.py::test_a_hanging_sensor_does_not_delay_the_others",
    "tests/sensors/test_race.py",
    "tests/sensors/test_timing.py::test_cron_agrees_with_a_brute_force_search",
    "tests/store/test_claim.py::test_claim_order_equals_sorting_the_due_tasks",
    "tests/store/test_model.py",
    "tests/store/test_postgres_migrate.py",
    "tests/store/test_sqlite_processes.py",
    "tests/tui/test_actions.py",
    "tests/tui/test_answers.py",
    "tests/tui/test_guardrails.py",
    "tests/tui/test_loop_outlives_terminal.py",
    "tests/tui/test_narrow_terminal.py",
    "tests/tui/test_queue_live.py",
    "tests/tui/test_robustness.py",
    "tests/tui/test_screens.py",
    "tests/tui/test_snapshots.py",
    "tests/tui/test_terminal.py",
    "tests/tui/test_diff_terminal.py",
    "tests/tui/test_diff_screen.py",
    "tests/test_skips.py::test_two_runs_one_on_workers_are_summed_up_by_reason",
)


# Tests that judge throughput against a clock (a simulated day at 1,440 times real
# speed, a soak's task count): beside other work they would measure that work.
# `make test` runs them after the rest, side by side (the `alone` marker).
ALONE = (
    "tests/reliability/test_dst.py",
    "tests/reliability/test_soak.py",
    "tests/reliability/test_week.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        callspec = getattr(item, "callspec", None)
        on_postgres = "postgres_server" in getattr(item, "fixturenames", ()) or (
            callspec is not None and callspec.params.get("backend") == "postgres"
        )
        if on_postgres or item.nodeid.startswith(SLOW_TIER):
            item.add_marker(pytest.mark.slow)
        if item.nodeid.startswith(ALONE):
            item.add_marker(pytest.mark.alone)
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
