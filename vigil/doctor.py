"""``vigil doctor``: checks the home, the config, the database, the loop (the one
truth of ``vigil.liveness``, as ``vigil status`` and the TUI say it), the versions
and the configured agent CLI.

Each check prints one line (``ok``, ``warn`` or ``FAIL``); the command fails if any
check failed. It never creates or modifies an SQLite database; on PostgreSQL it
opens the store as every command does (an empty database gets the schema). The
agent CLI's own checks live with the executors (``dispatch.agents.doctor``) and are
handed in by the CLI as ``agent_checks``; so is ``--probe``'s live request per
account (``dispatch.agents.doctor.probe_findings``), as ``probe_checks``, which only it makes.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Literal

from vigil.agent_clis import CLI_FACTS
from vigil.clock import SystemClock
from vigil.config import CONFIG_NAME, Settings, load_settings
from vigil.distribution import DISTRIBUTION
from vigil.errors import VigilError
from vigil.home import find_home
from vigil.liveness import LoopCondition, LoopHealth, loop_health
from vigil.models import NOTIFY_KEY
from vigil.render import failing_notifiers
from vigil.store.sqlite import SqliteStore
from vigil.store.sqlite.schema import SCHEMA_VERSION

Echo = Callable[[str], None]


@dataclass(frozen=True)
class Finding:
    """One line of the report: ``level`` is ``ok``, ``warn`` or ``fail``."""

    level: Literal["ok", "warn", "fail"]
    what: str
    detail: str


AgentChecks = Callable[[Settings], Awaitable[list[Finding]]]
# What the config says beyond its own keys, checked as `vigil run` checks it when
# it starts (the sensors' entries); returns how many there are, raises VigilError.
ConfigChecks = Callable[[Settings], int]


class _Report:
    def __init__(self, echo: Echo, findings: list[Finding] | None = None) -> None:
        self._echo = echo
        self._findings = findings
        self.failed = False

    def _say(self, finding: Finding) -> None:
        if self._findings is not None:
            self._findings.append(finding)
        shown = "FAIL" if finding.level == "fail" else finding.level
        self._echo(f"{shown:<5} {finding.what:<10} {finding.detail}")

    def ok(self, what: str, detail: str) -> None:
        self._say(Finding("ok", what, detail))

    def warn(self, what: str, detail: str) -> None:
        self._say(Finding("warn", what, detail))

    def fail(self, what: str, detail: str) -> None:
        self.failed = True
        self._say(Finding("fail", what, detail))

    def add(self, finding: Finding) -> None:
        {"ok": self.ok, "warn": self.warn, "fail": self.fail}[finding.level](finding.what, finding.detail)


def _versions(report: _Report) -> None:
    parts = [f"python {sys.version.split()[0]}", f"sqlite {sqlite3.sqlite_version}"]
    for package in (DISTRIBUTION, "textual", "apscheduler"):
        try:
            parts.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{package} missing")
    report.ok("versions", ", ".join(parts))
    if sqlite3.sqlite_version_info < (3, 35, 0):
        report.fail("sqlite", f"{sqlite3.sqlite_version} is too old; 3.35 or newer is needed")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def _postgres(report: _Report, settings: Settings) -> None:
    """Open the PostgreSQL store (creating its schema in an empty database, as any
    command would) and count its tasks."""
    from vigil.store import open_store

    try:
        store = await open_store(settings)
    except VigilError as err:
        report.fail("database", str(err))
        return
    try:
        counts = await store.count_by_status()
        loop_values = await store.loop_values()
        _loop(report, loop_health(loop_values, SystemClock().now_ms(), settings.dispatch.heartbeat_ms))
        _notifiers(report, settings, loop_values.get(NOTIFY_KEY))
    except VigilError as err:
        report.fail("database", str(err))
        return
    finally:
        await store.close()
    driver = f"psycopg {metadata.version('psycopg')}"
    report.ok("database", f"{settings.store.location} (PostgreSQL, {driver}, {sum(counts.values())} tasks)")


async def _database(report: _Report, settings: Settings) -> None:
    if settings.store.url is not None:
        await _postgres(report, settings)
        return
    path = settings.store.path
    if not path.exists():
        report.ok("database", f"{path} not created yet (created on first use)")
        return
    try:
        store = await SqliteStore.open(path, synchronous=settings.store.synchronous)
    except VigilError as err:
        report.fail("database", str(err))
        return
    try:
        check = await store.integrity_check()
        counts = await store.count_by_status()
        loop_values = await store.loop_values()
        _loop(report, loop_health(loop_values, SystemClock().now_ms(), settings.dispatch.heartbeat_ms))
        _notifiers(report, settings, loop_values.get(NOTIFY_KEY))
    finally:
        await store.close()
    if check != "ok":
        report.fail("database", f"{path}: integrity check: {check}")
        return
    total = sum(counts.values())
    report.ok("database", f"{path} (schema v{SCHEMA_VERSION}, {total} tasks, integrity ok)")
    if _mode(path) & 0o077:
        report.warn("database", f"{path} is readable by others (mode {_mode(path):o}); chmod 600 it")
    if _mode(path.parent) & 0o077:
        report.warn("database", f"{path.parent} is open to others (mode {_mode(path.parent):o}); chmod 700 it")


def _notifiers(report: _Report, settings: Settings, health: object) -> None:
    """The ``[alerts] notify`` services: a warning for each whose last send failed."""
    if not settings.alerts.notify:
        return
    failing = failing_notifiers(health)
    for line in failing:
        report.warn("alerts", f"{line}; try `vigil alerts test`")
    if not failing:
        report.ok("alerts", f"{len(settings.alerts.notify)} notification URL(s), none failing so far")


def _loop(report: _Report, health: LoopHealth) -> None:
    """The loop, as ``vigil status`` and the TUI say it (``vigil.liveness``): a
    closed gate or a dispatcher that died is a warning that says what to do."""
    quiet = (LoopCondition.RUNNING, LoopCondition.STANDBY, LoopCondition.STOPPED, LoopCondition.NOT_STARTED)
    if health.condition in quiet and not health.gate_closed:
        report.ok("loop", health.summary())
    else:
        report.warn("loop", health.summary())


def _accounts(report: _Report, settings: Settings) -> None:
    """Each account of the executor and its fallbacks: its login folder exists, or
    its key variable is set. A missing login fails every run on that account as an
    auth failure, which waits for a person; a key variable may be set only in the
    service's environment, so its absence here is a warning. A ``reserve`` on an
    account selected by its key is a warning too: it does nothing, as the CLIs
    report a usage window's use only for a subscription login (Claude Code's
    ``rate_limit_event``, Codex's ``x-codex-*`` headers from ChatGPT), never for an
    API key."""
    for executor in dict.fromkeys((settings.dispatch.executor, *settings.dispatch.fallback)):
        cli = settings.agent_cli(executor)
        for account in cli.accounts if cli is not None else ():
            what = f"account {executor}:{account.name}"
            if account.config_dir is not None:
                if account.config_dir.is_dir():
                    report.ok(what, f"login in {account.config_dir}")
                else:
                    login = CLI_FACTS[executor].login.format(account.config_dir)
                    report.fail(what, f"{account.config_dir} does not exist: log in with {login}")
            elif account.api_key_env is not None:
                if os.environ.get(account.api_key_env):
                    report.ok(what, f"key from ${account.api_key_env}")
                else:
                    report.warn(what, f"${account.api_key_env} is not set here; vigil run needs it in its environment")
                if account.reserve is not None:
                    report.warn(
                        what,
                        f"reserve = {account.reserve:g} does nothing: an account selected by an API key gets no "
                        "usage windows from its CLI (only a subscription login does); take it out, or log in with "
                        "a subscription and use config_dir",
                    )


def _guardrails(report: _Report, settings: Settings) -> None:
    """What bounds a loop left alone: retention (disk) and the daily budget (spend).
    Their absence is a warning, not a failure: a person may mean it."""
    from vigil.durations import format_duration

    def kept(ms: int | None) -> str:
        if ms is None:
            return "for ever"
        return f"{ms // 86_400_000}d" if ms % 86_400_000 == 0 else format_duration(ms)

    r = settings.retention
    if r.keep_finished_ms is None:
        report.warn("retention", "off: finished tasks are kept for ever (set [retention] keep_finished)")
    else:
        report.ok(
            "retention",
            f"finished tasks {kept(r.keep_finished_ms)}, events {kept(r.keep_events_ms)}, "
            f"cost archive {kept(r.keep_costs_ms)}",
        )
    b = settings.budget
    if b.daily_usd is None:
        report.warn("budget", "no daily cap: spend is unbounded (set [budget] daily_usd)")
    else:
        warnings = ", ".join(f"{round(f * 100)}%" for f in b.warn_at) or "none"
        urgent = f"priority ≤ {b.urgent_priority} still runs above it"
        report.ok("budget", f"${b.daily_usd:.2f} per 24 h ({urgent}), warnings at {warnings}")


async def run_checks(
    home_arg: str | None,
    echo: Echo,
    agent_checks: AgentChecks | None = None,
    config_checks: ConfigChecks | None = None,
    *,
    findings: list[Finding] | None = None,
    probe_checks: AgentChecks | None = None,
) -> bool:
    """Run every check, printing one line each; True when nothing failed.
    ``agent_checks`` runs the configured agent CLI for real, its ``--version``
    first (None, or an executor without a CLI: the executor's name is its line);
    ``config_checks`` checks what `vigil run` would refuse in the config (the
    sensors: None, not checked). ``findings`` (if given) receives each
    line as a ``Finding`` too (``vigil doctor --json``). ``probe_checks`` (None:
    none) makes a live request per account (``vigil doctor --probe``): a probe
    that fails fails the doctor."""
    report = _Report(echo, findings)
    _versions(report)
    try:
        home = find_home(home_arg)
    except VigilError as err:
        report.fail("home", str(err))
        return False
    report.ok("home", str(home))
    try:
        settings = load_settings(home)
    except VigilError as err:
        report.fail("config", str(err))
        return False
    where = str(settings.config_path or f"no {CONFIG_NAME}: defaults")
    try:
        sensors = None if config_checks is None else config_checks(settings)
    except VigilError as err:
        report.fail("config", str(err))  # `vigil run` would refuse to start
        return False
    report.ok("config", where if sensors is None else f"{where} ({sensors} sensor{'' if sensors == 1 else 's'})")
    await _database(report, settings)
    findings = [] if agent_checks is None else await agent_checks(settings)
    for finding in findings or [Finding("ok", "executor", settings.dispatch.executor)]:
        report.add(finding)
    _accounts(report, settings)
    for finding in [] if probe_checks is None else await probe_checks(settings):
        report.add(finding)
    _guardrails(report, settings)
    if not settings.skills_dir.is_dir():
        report.warn("skills", f"{settings.skills_dir} does not exist")
    else:
        count = sum(1 for p in settings.skills_dir.glob("*/SKILL.md"))
        report.ok("skills", f"{settings.skills_dir} ({count} skills)")
    return not report.failed
