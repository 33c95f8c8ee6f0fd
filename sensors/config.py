"""``[[sensors]]`` entries of vigil.toml → validated ``SensorSpec`` values.

An entry has the common keys below; every other key is the sensor's own option::

    [[sensors]]
    use = "inbox"              # a built-in, "package.module:function" or "path/file.py:function"
    name = "inbox"             # default: the built-in's or the function's name
    every = "1m"               # or cron = "0 9 * * 1-5" (+ timezone = "Europe/Paris")
    timeout = "30s"            # default: @sensor(timeout=…), else [sensor_defaults] timeout
    priority = 4               # default priority of its tasks (1 most urgent … 9)
    skills = ["triage"]        # default skills of its tasks
    enabled = true
    max_tasks_per_run = 100    # default: [sensor_defaults] max_tasks_per_run
    key_prefix = "contacts"    # default: the name; "" shares the keys of `vigil task add --key`
    catch_up = "once"          # or "skip": runs missed while down (see sensors.spec)
    path = "inbox"             # … the sensor's own options

A bad entry raises ``ConfigError`` naming it: ``vigil.toml: [[sensors]] #2 (name
'inbox'): unknown use 'inbx'``. User sensor code is imported here, at start-up.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sensors.api import SensorFunc, meta_of
from sensors.builtin import BUILTINS
from sensors.runner import parse_schedule
from sensors.spec import CATCH_UPS, CatchUp, SensorSpec
from vigil.config import Settings
from vigil.durations import parse_duration_ms
from vigil.errors import ConfigError, InputError
from vigil.models import MAX_PRIORITY, MIN_PRIORITY

COMMON_KEYS = frozenset(
    {"use", "name", "every", "cron", "timezone", "timeout", "priority", "skills", "enabled", "max_tasks_per_run"}
    | {"key_prefix", "catch_up"}
)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def load_sensor_specs(settings: Settings) -> list[SensorSpec]:
    """Validate ``settings.sensors``; raises ``ConfigError`` naming the bad entry."""
    specs: list[SensorSpec] = []
    seen: dict[str, int] = {}
    where = settings.config_path.name if settings.config_path else "vigil.toml"
    for number, raw in enumerate(settings.sensors, start=1):
        label = f"{where}: [[sensors]] #{number}"
        if isinstance(raw.get("name"), str):
            label += f" (name {raw['name']!r})"
        elif isinstance(raw.get("use"), str):
            label += f" (use {raw['use']!r})"
        try:
            spec = _spec(raw, settings)
        except (ValueError, InputError) as err:
            raise ConfigError(f"{label}: {err}") from None
        if spec.name in seen:
            raise ConfigError(f"{label}: name {spec.name!r} is already used by entry #{seen[spec.name]}")
        seen[spec.name] = number
        specs.append(spec)
    return specs


def _spec(raw: Mapping[str, Any], settings: Settings) -> SensorSpec:
    use = raw.get("use")
    if not isinstance(use, str) or not use.strip():
        raise ValueError("missing 'use' (a built-in name, module:function or path/file.py:function)")
    func, default_name = resolve_use(use, settings.home)
    meta = meta_of(func)

    name = raw.get("name", default_name)
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"name: expected letters, digits, '_', '.', '-' (max 64), got {name!r}")

    every, cron, timezone = (_opt_str(raw, k) for k in ("every", "cron", "timezone"))
    if every or cron:
        schedule = parse_schedule(every, cron, timezone)
    elif meta.every or meta.cron:
        if timezone:
            raise ValueError("timezone needs a cron in this entry")
        schedule = parse_schedule(meta.every, meta.cron)
    else:
        raise ValueError("no schedule: set every or cron")

    timeout_text = _opt_str(raw, "timeout")
    timeout_ms = (
        parse_duration_ms(timeout_text) if timeout_text else meta.timeout_ms or settings.sensor_defaults.timeout_ms
    )
    if timeout_ms <= 0:
        raise ValueError("timeout: must be longer than 0")

    options = {k: v for k, v in raw.items() if k not in COMMON_KEYS}
    if meta.options is not None:
        meta.options(options, settings.home)

    return SensorSpec(
        name=name,
        use=use,
        func=func,
        schedule=schedule,
        timeout_ms=timeout_ms,
        max_tasks=_int(raw, "max_tasks_per_run", settings.sensor_defaults.max_tasks_per_run, 1, 10**9),
        enabled=_bool(raw, "enabled", True),
        options=options,
        priority=_int(raw, "priority", None, MIN_PRIORITY, MAX_PRIORITY),
        skills=_skills(raw),
        description=meta.description,
        key_prefix=_key_prefix(raw),
        catch_up=_catch_up(raw),
    )


def resolve_use(use: str, home: Path) -> tuple[SensorFunc, str]:
    """The function ``use`` names and its default sensor name; raises ``ValueError``."""
    builtin = BUILTINS.get(use)
    if builtin is not None:
        return builtin, use
    if ":" not in use:
        known = ", ".join(sorted(BUILTINS))
        raise ValueError(f"unknown use {use!r} (built-ins: {known}; or module:function, path/file.py:function)")
    target, _, attr = use.rpartition(":")
    module = _load_file(home / target) if target.endswith(".py") or "/" in target else _import(target)
    func = getattr(module, attr, None)
    if func is None:
        raise ValueError(f"use {use!r}: {target} has no {attr!r}")
    if not inspect.iscoroutinefunction(func):
        raise ValueError(f"use {use!r}: {attr} must be an 'async def' function taking a SensorContext")
    return func, attr


def _import(module_name: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except Exception as err:
        raise ValueError(f"cannot import {module_name!r}: {type(err).__name__}: {err}") from None


def _load_file(path: Path) -> Any:
    path = path.resolve()
    if not path.is_file():
        raise ValueError(f"sensor file {path} does not exist")
    # One module per file, named after its path, so two entries share one import.
    module_name = "vigil_sensor_" + hashlib.sha1(str(path).encode()).hexdigest()[:12]  # noqa: S324 - a name, not security
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ValueError(f"cannot load {path} as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as err:
        del sys.modules[module_name]
        raise ValueError(f"cannot import {path}: {type(err).__name__}: {err}") from None
    return module


def _opt_str(raw: Mapping[str, Any], key: str) -> str | None:
    value = raw.get(key)
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise ValueError(f"{key}: expected a non-empty string, got {value!r}")
    return value


def _int(raw: Mapping[str, Any], key: str, default: int | None, low: int, high: int) -> Any:
    value = raw.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{key}: expected an integer {low}-{high}, got {value!r}")
    return value


def _bool(raw: Mapping[str, Any], key: str, default: bool) -> bool:
    value = raw.get(key, default)
    if not isinstance(value, bool):
        raise ValueError(f"{key}: expected true or false, got {value!r}")
    return value


def _key_prefix(raw: Mapping[str, Any]) -> str | None:
    value = raw.get("key_prefix")
    if value is None:
        return None
    if not isinstance(value, str) or (value and not _NAME.fullmatch(value)):
        raise ValueError(f"key_prefix: expected \"\" or letters, digits, '_', '.', '-' (max 64), got {value!r}")
    return value


def _skills(raw: Mapping[str, Any]) -> tuple[str, ...] | None:
    value = raw.get("skills")
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ValueError("skills: expected a list of skill names")
    return tuple(value)


def _catch_up(raw: Mapping[str, Any]) -> CatchUp:
    value = raw.get("catch_up", "once")
    for choice in CATCH_UPS:
        if value == choice:
            return choice
    raise ValueError(f'catch_up: expected "once" or "skip", got {value!r}')
