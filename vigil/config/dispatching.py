"""``[dispatch]``: how tasks are run (executor, timeouts, retries, the lease, lanes,
fallback, the outage backoff, code work)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from vigil.codework import CODE_KEYS, CodeOptions, options_from
from vigil.config.section import Section, subtable
from vigil.config.settings import (
    AGENT_EXECUTORS,
    EXECUTORS,
    MAX_LANES,
    MIN_HEARTBEAT_MS,
    ON_DENIAL,
    DispatchSettings,
)
from vigil.durations import parse_duration_ms
from vigil.errors import ConfigError, InputError
from vigil.models import MAX_RETRIES


def _fallback(section: Section) -> tuple[str, ...]:
    """``[dispatch] fallback``: agent CLIs, in order, without repeats."""
    value = section.argv("fallback", ())
    if not all(name in AGENT_EXECUTORS for name in value):
        raise section._fail("fallback", 'a list of agent executors, e.g. ["codex"]')
    return tuple(dict.fromkeys(value))


def _outage_backoff(section: Section, default: tuple[int, ...]) -> tuple[int, ...]:
    """``[dispatch] outage_backoff``: durations, growing (``OUTAGE_BACKOFF_MS``)."""
    value = section._get("outage_backoff")
    if value is None:
        return default
    expected = 'a non-empty list of growing durations, e.g. ["30s", "1m", "2m", "5m", "10m"]'
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise section._fail("outage_backoff", expected)
    try:
        steps = tuple(parse_duration_ms(v) for v in value)
    except InputError:
        raise section._fail("outage_backoff", expected) from None
    if any(later < earlier for earlier, later in itertools.pairwise(steps)) or steps[0] <= 0:
        raise section._fail("outage_backoff", expected)
    return steps


def _lanes(section: Section, default: int) -> int:
    lanes = section.int_("lanes", default, minimum=1)
    if lanes > MAX_LANES:
        raise section._fail("lanes", f"an integer from 1 to {MAX_LANES}")
    return lanes


def _check_lease(section: Section, dispatch: DispatchSettings) -> None:
    """The heartbeat renews the lease of the running task: it must tick, and the lease
    must outlast two of its beats, or crash recovery would take a live agent for an
    orphan (one late beat on a busy machine would be enough)."""
    if dispatch.heartbeat_ms < MIN_HEARTBEAT_MS:
        raise section._fail("heartbeat", f"a duration of at least {MIN_HEARTBEAT_MS}ms")
    if dispatch.lease_ms <= 2 * dispatch.heartbeat_ms:
        where = f"{section._source}: " if section._source else ""
        raise ConfigError(
            f"{where}[dispatch] lease ({dispatch.lease_ms} ms) must be longer than two heartbeats "
            f"(heartbeat = {dispatch.heartbeat_ms} ms): a live agent would be taken for an orphan"
        )


def _workdir(section: Section, home: Path) -> Path | None:
    """``[dispatch] workdir``: a folder, relative to the home (``~`` expanded);
    None when unset. Whether it exists is checked when a task runs."""
    value = section.opt_str("workdir")
    if value is None:
        return None
    if not value.strip():
        raise section._fail("workdir", "a folder (absolute, or relative to the home)")
    return (home / Path(value).expanduser()).resolve()


def _code(section: Section, home: Path) -> CodeOptions:
    """The code options of ``[dispatch]``; ``repo`` made absolute (relative to the
    home, ``~`` expanded)."""
    raw = {key: section._get(key) for key in CODE_KEYS}
    try:
        options = options_from(raw)
    except InputError as err:  # it names the key, what was expected and what was there
        raise section.error(str(err)) from None
    if options.repo is not None:
        options = replace(options, repo=str((home / Path(options.repo).expanduser()).resolve()))
    return options


def read_dispatch(data: Mapping[str, Any], source: Path | None, home: Path) -> DispatchSettings:
    """``[dispatch]``, its folders made absolute (relative to ``home``); raises
    ``ConfigError``."""
    d = Section(subtable(data, "dispatch", source), "dispatch", source)
    defaults = DispatchSettings()
    dispatch = DispatchSettings(
        executor=d.choice("executor", defaults.executor, EXECUTORS),
        timeout_ms=d.duration_ms("timeout", defaults.timeout_ms),
        max_retries=d.int_("max_retries", defaults.max_retries, maximum=MAX_RETRIES),
        retry_backoff_ms=d.duration_ms("retry_backoff", defaults.retry_backoff_ms),
        retry_backoff_max_ms=d.duration_ms("retry_backoff_max", defaults.retry_backoff_max_ms),
        usage_limit_fallback_ms=d.duration_ms("usage_limit_fallback", defaults.usage_limit_fallback_ms),
        lease_ms=d.duration_ms("lease", defaults.lease_ms),
        heartbeat_ms=d.duration_ms("heartbeat", defaults.heartbeat_ms),
        shutdown_grace_ms=d.duration_ms("shutdown_grace", defaults.shutdown_grace_ms),
        standby_sensors=d.bool_("standby_sensors", defaults.standby_sensors),
        lanes=_lanes(d, defaults.lanes),
        identity=d.str_("identity", defaults.identity),
        pass_env=d.argv("pass_env", ()),
        workdir=_workdir(d, home),
        on_denial=d.choice("on_denial", defaults.on_denial, ON_DENIAL),
        keep_workspace_ms=d.duration_ms("keep_workspace", defaults.keep_workspace_ms),
        stall_timeout_ms=d.duration_ms("stall_timeout", defaults.stall_timeout_ms),
        fallback=_fallback(d),
        min_gate_ms=d.duration_ms("min_gate", defaults.min_gate_ms),
        outage_backoff_ms=_outage_backoff(d, defaults.outage_backoff_ms),
        code=_code(d, home),
        keep_branches=d.bool_("keep_branches", defaults.keep_branches),
        check_sandbox=d.bool_("check_sandbox", defaults.check_sandbox),
    )
    _check_lease(d, dispatch)
    d.done()
    return dispatch
