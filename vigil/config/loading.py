"""``vigil.toml`` → ``Settings``: ``load_settings`` reads the home's file,
``settings_from_mapping`` checks every section (the sections' own modules) and
builds the value; ``[store]`` and ``[sensor_defaults]`` are read here."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vigil.agent_clis import CLI_FACTS
from vigil.config.dispatching import read_dispatch
from vigil.config.executors import read_agent_cli, read_prices
from vigil.config.section import Section, subtable
from vigil.config.sections import (
    read_alerts,
    read_budget,
    read_checks,
    read_github,
    read_limits,
    read_retention,
    read_serve,
    read_telegram,
    read_tui,
)
from vigil.config.settings import CONFIG_NAME, STORE_URL_ENV, SensorDefaults, Settings, StoreSettings
from vigil.errors import ConfigError
from vigil.store_url import check_store_url


def _store_url(section: Section, source: Path | None, env: Mapping[str, str]) -> str | None:
    """``VIGIL_STORE_URL`` if set (it wins: the password can stay out of the file),
    else ``[store] url``; None means the SQLite file."""
    from_file = section.opt_str("url")
    if env.get(STORE_URL_ENV):
        return check_store_url(env[STORE_URL_ENV], STORE_URL_ENV)
    if from_file is None:
        return None
    return check_store_url(from_file, f"{source}: [store] url" if source else "[store] url")


def settings_from_mapping(
    data: Mapping[str, Any], home: Path, source: Path | None, env: Mapping[str, str] | None = None
) -> Settings:
    """Build ``Settings`` from parsed TOML and ``env`` (None: the process environment,
    read for ``VIGIL_STORE_URL``); raises ``ConfigError``."""
    known = {"store", "dispatch", "executors", "prices", "sensor_defaults", "sensors", "budget", "alerts"}
    known |= {"limits", "retention", "tui", "checks", "chat", "github", "serve"}
    for key in data:
        if key not in known:
            raise ConfigError(f"{source}: unknown section or key {key!r}")

    store = Section(subtable(data, "store", source), "store", source)
    store_settings = StoreSettings(
        path=(home / store.str_("path", "data/vigil.db")).resolve(),
        synchronous=store.choice("synchronous", "FULL", ("FULL", "NORMAL")),
        busy_timeout_ms=store.duration_ms("busy_timeout", 5000),
        url=_store_url(store, source, os.environ if env is None else env),
    )
    store.done()

    dispatch = read_dispatch(data, source, home)

    executors = subtable(data, "executors", source)
    for name in executors:
        if name not in CLI_FACTS:
            raise ConfigError(f"{source}: [executors.{name}] unknown executor (expected {' or '.join(CLI_FACTS)})")

    s = Section(subtable(data, "sensor_defaults", source), "sensor_defaults", source)
    sd = SensorDefaults()
    sensor_defaults = SensorDefaults(
        max_tasks_per_run=s.int_("max_tasks_per_run", sd.max_tasks_per_run, minimum=1),
        timeout_ms=s.duration_ms("timeout", sd.timeout_ms),
        max_backoff_ms=s.duration_ms("max_backoff", sd.max_backoff_ms),
        jitter_ms=s.duration_ms("jitter", sd.jitter_ms),
        misfire_grace_ms=s.duration_ms("misfire_grace", sd.misfire_grace_ms),
    )
    s.done()

    sensors = data.get("sensors", [])
    if not isinstance(sensors, list) or not all(isinstance(e, dict) for e in sensors):
        raise ConfigError(f"{source}: sensors: expected [[sensors]] tables")

    return Settings(
        home=home,
        config_path=source,
        store=store_settings,
        dispatch=dispatch,
        claude=read_agent_cli(executors, "claude", source, home),
        codex=read_agent_cli(executors, "codex", source, home),
        prices=read_prices(data, source),
        sensor_defaults=sensor_defaults,
        sensors=tuple(sensors),
        budget=read_budget(data, source),
        alerts=read_alerts(data, source),
        limits=read_limits(data, source),
        retention=read_retention(data, source),
        tui=read_tui(data, source),
        checks=read_checks(data, source),
        telegram=read_telegram(data, source, dispatch.pass_env),
        github=read_github(data, source),
        serve=read_serve(data, source),
    )


def load_settings(home: Path) -> Settings:
    """Read ``home/vigil.toml`` (absent: all defaults). Raises ``ConfigError``."""
    path = home / CONFIG_NAME
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return settings_from_mapping({}, home, None)
    except OSError as err:
        raise ConfigError(f"{path}: cannot read: {err.strerror}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: not valid TOML: {err}") from None
    return settings_from_mapping(data, home, path)
