"""``vigil.toml`` → one frozen ``Settings`` value, built once and passed down.

Every section and key, with its default, is in docs/configuration.md. Durations are
written ``30s``, ``5m``, ``2h``, ``1d``. An error names the file, the key and what
was expected; an unknown key is an error too (a typo must not be silently ignored).
``[[sensors]]`` entries are kept as raw tables here and checked by the sensors
package, which knows the built-ins.

This package's face is what the rest of the code imports, ``from vigil.config
import Settings, load_settings`` (``__all__``: the settings, their constants and the
two builders). Where each part lives::

    settings.py     the frozen dataclasses (Settings and one per section) and the
                    constants they use: what the rest of the code imports
    loading.py      load_settings, settings_from_mapping: vigil.toml → Settings
    section.py      Section: typed access to one TOML table, every error naming
                    the file and the key
    dispatching.py  [dispatch]
    executors.py    [executors.claude], [executors.codex] and their accounts; [prices]
    sections.py     the smaller tables: [budget], [alerts], [limits], [retention],
                    [tui], [checks], [chat.telegram], [serve], [github]
"""

from vigil.config.loading import load_settings, settings_from_mapping
from vigil.config.section import MAX_INT
from vigil.config.sections import PUBLIC_URL_EXPECTED, is_public_url
from vigil.config.settings import (
    ACCOUNT_NAME,
    AGENT_EXECUTORS,
    CHAT_KINDS,
    CLAUDE_DISALLOWED_TOOLS,
    CONFIG_NAME,
    DEFAULT_NOTIFY_KINDS,
    EXECUTORS,
    MAX_LANES,
    MIN_HEARTBEAT_MS,
    NOTIFY_KINDS,
    ON_DENIAL,
    OUTAGE_BACKOFF_MS,
    SERVE_PORT,
    STORE_URL_ENV,
    TASK_EVENT_ALERTS,
    Account,
    AgentCliSettings,
    AlertSettings,
    BudgetSettings,
    ChecksSettings,
    DispatchSettings,
    GitHubSettings,
    LimitsSettings,
    NotifyTarget,
    Price,
    RetentionSettings,
    SensorDefaults,
    ServeSettings,
    Settings,
    StoreSettings,
    TelegramSettings,
    TuiSettings,
    sensor_name,
)

__all__ = [
    "ACCOUNT_NAME",
    "AGENT_EXECUTORS",
    "CHAT_KINDS",
    "CLAUDE_DISALLOWED_TOOLS",
    "CONFIG_NAME",
    "DEFAULT_NOTIFY_KINDS",
    "EXECUTORS",
    "MAX_INT",
    "MAX_LANES",
    "MIN_HEARTBEAT_MS",
    "NOTIFY_KINDS",
    "ON_DENIAL",
    "OUTAGE_BACKOFF_MS",
    "PUBLIC_URL_EXPECTED",
    "SERVE_PORT",
    "STORE_URL_ENV",
    "TASK_EVENT_ALERTS",
    "Account",
    "AgentCliSettings",
    "AlertSettings",
    "BudgetSettings",
    "ChecksSettings",
    "DispatchSettings",
    "GitHubSettings",
    "LimitsSettings",
    "NotifyTarget",
    "Price",
    "RetentionSettings",
    "SensorDefaults",
    "ServeSettings",
    "Settings",
    "StoreSettings",
    "TelegramSettings",
    "TuiSettings",
    "is_public_url",
    "load_settings",
    "sensor_name",
    "settings_from_mapping",
]
