"""The smaller tables of ``vigil.toml``: ``[budget]``, ``[alerts]``, ``[limits]``,
``[retention]``, ``[tui]``, ``[checks]``, ``[chat.telegram]``, ``[serve]`` and
``[github]``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from vigil.config.section import Section, subtable
from vigil.config.settings import (
    CHAT_KINDS,
    DEFAULT_NOTIFY_KINDS,
    NOTIFY_KINDS,
    TASK_EVENT_ALERTS,
    AlertSettings,
    BudgetSettings,
    ChecksSettings,
    GitHubSettings,
    LimitsSettings,
    NotifyTarget,
    RetentionSettings,
    ServeSettings,
    TelegramSettings,
    TuiSettings,
)
from vigil.errors import ConfigError


def read_budget(data: Mapping[str, Any], source: Path | None) -> BudgetSettings:
    section = Section(subtable(data, "budget", source), "budget", source)
    defaults = BudgetSettings()
    urgent = section.int_("urgent_priority", defaults.urgent_priority, minimum=1)
    if urgent > 9:
        raise section._fail("urgent_priority", "a priority from 1 to 9")
    settings = BudgetSettings(
        daily_usd=section.opt_float("daily_usd"),
        urgent_priority=urgent,
        warn_at=section.fractions("warn_at", defaults.warn_at),
        per_sensor=section.amounts("per_sensor"),
    )
    section.done()
    return settings


def read_alerts(data: Mapping[str, Any], source: Path | None) -> AlertSettings:
    section = Section(subtable(data, "alerts", source), "alerts", source)
    defaults = AlertSettings()
    settings = AlertSettings(
        command=section.argv("command", ()),
        timeout_ms=section.duration_ms("timeout", defaults.timeout_ms),
        stale_dispatcher_ms=section.duration_ms("stale_dispatcher", defaults.stale_dispatcher_ms),
        stale_sensor_ms=section.duration_ms("stale_sensor", defaults.stale_sensor_ms),
        task_events=_task_events(section),
        pass_env=section.argv("pass_env", ()),
        notify=_notify(section),
        held_loop_ms=section.duration_ms("held_loop", defaults.held_loop_ms),
    )
    section.done()
    return settings


def _notify(section: Section) -> tuple[NotifyTarget, ...]:
    """``notify = ["ntfy://…", {url = "tgram://…", kinds = ["waiting", "failed"]}]``."""
    value = section._get("notify")
    if value is None:
        return ()
    expected = 'a list of URLs or tables {url = "…", kinds = [...]}, kinds among ' + ", ".join(NOTIFY_KINDS)
    if not isinstance(value, list):
        raise section._fail("notify", expected)
    targets = []
    for entry in value:
        url, kinds = (entry, DEFAULT_NOTIFY_KINDS) if isinstance(entry, str) else (None, None)
        if isinstance(entry, dict) and set(entry) <= {"url", "kinds"}:
            url, kinds = entry.get("url"), entry.get("kinds", DEFAULT_NOTIFY_KINDS)
        valid_kinds = isinstance(kinds, list | tuple) and kinds and all(k in NOTIFY_KINDS for k in kinds)
        if not isinstance(url, str) or "://" not in url or not valid_kinds:
            raise section._fail("notify", expected)
        targets.append(NotifyTarget(url, tuple(dict.fromkeys(kinds))))  # type: ignore[arg-type]
    return tuple(targets)


def _task_events(section: Section) -> tuple[str, ...]:
    value = section._get("task_events")
    if value is None:
        return ()
    if not isinstance(value, list) or not all(v in TASK_EVENT_ALERTS for v in value):
        raise section._fail("task_events", f"a list of {' and '.join(repr(k) for k in TASK_EVENT_ALERTS)}")
    return tuple(dict.fromkeys(value))


def read_limits(data: Mapping[str, Any], source: Path | None) -> LimitsSettings:
    section = Section(subtable(data, "limits", source), "limits", source)
    defaults = LimitsSettings()
    settings = LimitsSettings(
        max_depth=section.int_("max_depth", defaults.max_depth),
        max_children=section.int_("max_children", defaults.max_children),
        max_per_source_per_day=section.int_("max_per_source_per_day", defaults.max_per_source_per_day),
        per_source=section.counts("per_source"),
        max_consecutive_failures=section.int_("max_consecutive_failures", defaults.max_consecutive_failures),
        agent_priority_floor=section.int_("agent_priority_floor", defaults.agent_priority_floor, minimum=1, maximum=9),
    )
    section.done()
    return settings


def read_retention(data: Mapping[str, Any], source: Path | None) -> RetentionSettings:
    section = Section(subtable(data, "retention", source), "retention", source)
    names = ("keep_finished", "keep_events", "keep_costs", "keep_keys")
    keep = {key: section.duration_ms(key, 0) if section.has(key) else None for key in names}
    for key, value in keep.items():
        if value is not None and value < 3_600_000:
            raise section._fail(key, "a duration of at least 1h")
    settings = RetentionSettings(
        keep_finished_ms=keep["keep_finished"],
        keep_events_ms=keep["keep_events"],
        every_ms=section.duration_ms("every", RetentionSettings.every_ms),
        keep_costs_ms=keep["keep_costs"],
        keep_keys_ms=keep["keep_keys"],
    )
    if settings.every_ms < 1000:
        raise section._fail("every", "a duration of at least 1s")
    section.done()
    return settings


def read_tui(data: Mapping[str, Any], source: Path | None) -> TuiSettings:
    section = Section(subtable(data, "tui", source), "tui", source)
    zone = section.opt_str("timezone")
    if zone is not None:
        try:
            ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise section._fail("timezone", "an IANA time zone such as 'Europe/Paris'") from None
    section.done()
    return TuiSettings(timezone=zone)


def read_checks(data: Mapping[str, Any], source: Path | None) -> ChecksSettings:
    section = Section(subtable(data, "checks", source), "checks", source)
    settings = ChecksSettings(network=section.bool_("network", ChecksSettings.network))
    section.done()
    return settings


def read_telegram(data: Mapping[str, Any], source: Path | None, agent_env: tuple[str, ...]) -> TelegramSettings | None:
    """``[chat.telegram]``; None when the table is absent. The token's variable may
    not be one the agent is given (``[dispatch] pass_env``)."""
    chat = subtable(data, "chat", source)
    for name in chat:
        if name != "telegram":
            raise ConfigError(f"{source}: [chat.{name}] unknown chat service (expected telegram)")
    if "telegram" not in chat:
        return None
    section = Section(subtable(chat, "telegram", source), "chat.telegram", source)
    defaults = TelegramSettings()
    chat_id = section._get("chat_id")
    if chat_id is not None and (not isinstance(chat_id, int) or isinstance(chat_id, bool) or chat_id == 0):
        raise section._fail("chat_id", "a Telegram chat id (a non-zero integer)")
    api_url = section.str_("api_url", defaults.api_url)
    if not api_url.startswith(("https://", "http://")):
        raise section._fail("api_url", "an http(s) URL such as https://api.telegram.org/bot")
    kinds = section._get("kinds")
    if kinds is not None and (not isinstance(kinds, list) or not all(k in CHAT_KINDS for k in kinds)):
        raise section._fail("kinds", "a list among " + ", ".join(CHAT_KINDS))
    settings = TelegramSettings(
        token_env=section.str_("token_env", defaults.token_env),
        chat_id=chat_id,
        api_url=api_url,
        kinds=defaults.kinds if kinds is None else tuple(dict.fromkeys(kinds)),
        poll_ms=section.duration_ms("poll", defaults.poll_ms),
        retry_ms=section.duration_ms("retry", defaults.retry_ms),
    )
    section.done()
    if settings.token_env in agent_env:
        raise section.error(f"token_env: {settings.token_env} is in [dispatch] pass_env: the agent would get the token")
    return settings


PUBLIC_URL_EXPECTED = "an http:// or https:// address without a query (https://host or https://host/path)"


def is_public_url(url: str) -> bool:
    """Whether ``url`` (its trailing slash removed) can be where browsers open the
    dashboard: http or https, a host, no query or fragment."""
    scheme, _, rest = url.partition("://")
    return scheme in ("http", "https") and bool(rest) and not rest.startswith("/") and not set("?# ") & set(rest)


def read_serve(data: Mapping[str, Any], source: Path | None) -> ServeSettings:
    section = Section(subtable(data, "serve", source), "serve", source)
    defaults = ServeSettings()
    host = section.str_("host", defaults.host)
    public_url = section.opt_str("public_url")
    if public_url is not None:
        public_url = public_url.rstrip("/")
        if not is_public_url(public_url):
            raise section._fail("public_url", PUBLIC_URL_EXPECTED)
    settings = ServeSettings(
        host=host,
        port=section.int_("port", defaults.port, minimum=1, maximum=65535),
        public_url=public_url,
    )
    section.done()
    return settings


def read_github(data: Mapping[str, Any], source: Path | None) -> GitHubSettings:
    section = Section(subtable(data, "github", source), "github", source)
    defaults = GitHubSettings()
    api_url = section.str_("api_url", defaults.api_url).rstrip("/")
    if not api_url.startswith(("http://", "https://")):
        raise section._fail("api_url", "an http:// or https:// URL")
    settings = GitHubSettings(
        remote=section.str_("remote", defaults.remote),
        api_url=api_url,
        token_env=section.str_("token_env", defaults.token_env),
    )
    section.done()
    return settings
