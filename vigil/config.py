"""``vigil.toml`` → one frozen ``Settings`` value, built once and passed down.

Every section and key, with its default, is in docs/configuration.md. Durations are
written ``30s``, ``5m``, ``2h``, ``1d``. An error names the file, the key and what
was expected; an unknown key is an error too (a typo must not be silently ignored).
``[[sensors]]`` entries are kept as raw tables here and checked by the sensors
package, which knows the built-ins.
"""

from __future__ import annotations

import itertools
import math
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from vigil.agent_clis import CLI_FACTS
from vigil.codework import CODE_KEYS, CodeOptions, options_from
from vigil.durations import MAX_DURATION_DAYS, parse_duration_ms
from vigil.errors import ConfigError, InputError
from vigil.github import DEFAULT_API_URL, DEFAULT_TOKEN_ENV
from vigil.models import MAX_RETRIES, model_name_problem
from vigil.store_url import check_store_url, mask_password

CONFIG_NAME = "vigil.toml"
STORE_URL_ENV = "VIGIL_STORE_URL"  # a PostgreSQL URL; wins over [store] url
AGENT_EXECUTORS = tuple(CLI_FACTS)  # the agent CLIs: accounts, usage limits, fallback
EXECUTORS = (*AGENT_EXECUTORS, "command", "dry-run")
# The loop's backoff after transient failures (overload, 5xx, cut streams), by how
# long the outage has lasted: it waits the longest step not longer than the outage so
# far (the first step at least), so a provider that recovers is probed again within
# about as long as it was down, and never more than 10 minutes later
# ([dispatch] outage_backoff; dispatch.guard).
OUTAGE_BACKOFF_MS = (30_000, 60_000, 120_000, 300_000, 600_000)
MAX_LANES = 256  # [dispatch] lanes: each is a lock file or an advisory lock to try in turn
MAX_INT = 1_000_000_000  # the largest integer a key takes, unless it says less
MIN_HEARTBEAT_MS = 100  # a heartbeat renews the lease: it must tick


@dataclass(frozen=True)
class StoreSettings:
    """Where the store lives: the SQLite file at ``path``, or the PostgreSQL database
    at ``url`` (None: SQLite). ``synchronous`` is SQLite's; ``busy_timeout_ms`` is
    how long a write waits for another's lock (SQLite's busy timeout, PostgreSQL's
    ``lock_timeout``) before the unit of work is retried."""

    path: Path  # absolute
    synchronous: str = "FULL"  # FULL: an acknowledged write survives power loss
    busy_timeout_ms: int = 5000
    url: str | None = None  # from VIGIL_STORE_URL, else [store] url

    @property
    def location(self) -> str:
        """What to show people: the URL with its password masked, or the file's path."""
        return str(self.path) if self.url is None else mask_password(self.url)


# The agent reports back through Vigil's MCP tools (``mcp__vigil__*``, always
# allowed), not through the shell: `vigil` and `sqlite3` in Bash are refused, so that
# an attempt on the database or on a person-only command is a recorded denial even
# where the OS sandbox would have stopped it anyway.
CLAUDE_DISALLOWED_TOOLS = ("Bash(vigil:*)", "Bash(sqlite3:*)")
ON_DENIAL = ("review", "complete")  # [dispatch] on_denial


@dataclass(frozen=True)
class Account:
    """One account of an agent CLI (``[[executors.claude.accounts]]``): a ``name`` and
    what selects it: ``config_dir``, the folder that keeps its login (Claude Code's
    ``CLAUDE_CONFIG_DIR``, Codex's ``CODEX_HOME``), or ``api_key_env``, the name of
    the variable of ``vigil run``'s environment that holds its key (passed to the CLI
    as its own key variable). Exactly one of the two is set. ``reserve`` (0–1, None:
    none) is the share of each usage window kept for a person's own use: unattended
    work stops on the account when the CLI reports less than that left."""

    name: str
    config_dir: Path | None = None  # absolute
    api_key_env: str | None = None
    reserve: float | None = None


ACCOUNT_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")


@dataclass(frozen=True)
class AgentCliSettings:
    """How to start one agent CLI. ``command`` is the argv prefix.

    ``permission_mode``, ``allowed_tools``, ``disallowed_tools``, ``bash_sandbox``
    and ``add_dirs`` are Claude Code's (``[executors.claude]``); ``add_dirs`` are
    folders, relative ones to the home.

    ``sandbox`` is Codex's (``[executors.codex]``), which also reads ``add_dirs``
    (more folders its sandbox lets the agent write).
    """

    command: tuple[str, ...]
    model: str | None = None
    max_budget_usd: float | None = None
    extra_args: tuple[str, ...] = ()
    # acceptEdits: the agent edits files in its workspace (never elsewhere: Claude
    # Code asks, and in print mode asking is refusing)
    permission_mode: str = "acceptEdits"
    allowed_tools: tuple[str, ...] = ()
    disallowed_tools: tuple[str, ...] = CLAUDE_DISALLOWED_TOOLS
    # Bash runs inside Claude Code's OS sandbox (writes only in the workspace) and is
    # then allowed without asking; where the sandbox cannot run, Bash is limited to
    # allowed_tools (``vigil doctor`` says what to install)
    bash_sandbox: bool = True
    add_dirs: tuple[str, ...] = ()
    sandbox: str = "workspace-write"
    # several accounts: a usage limit stops only the one that met it (empty: the CLI's
    # own, as its variables in vigil run's environment select it)
    accounts: tuple[Account, ...] = ()
    # the attempt after a transient failure, a timeout (a stalled run ends as one) or
    # an interrupted run continues the agent's session instead of starting over
    resume_after_failure: bool = True


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    cache_read: float = 0.0
    cache_write: float = 0.0


@dataclass(frozen=True)
class DispatchSettings:
    executor: str = "dry-run"
    timeout_ms: int = 30 * 60_000
    max_retries: int = 3
    retry_backoff_ms: int = 30_000  # first retry delay; doubles per attempt, with jitter
    retry_backoff_max_ms: int = 3_600_000
    usage_limit_fallback_ms: int = 3_600_000  # when a usage limit names no reset time
    lease_ms: int = 120_000
    heartbeat_ms: int = 15_000
    shutdown_grace_ms: int = 30_000
    standby_sensors: bool = False  # a standby `vigil run` also runs its sensors
    lanes: int = 1  # dispatchers that may run a task at once, across every host (1-MAX_LANES)
    identity: str = "IDENTITY.md"
    pass_env: tuple[str, ...] = ()  # extra environment variables handed to the agent
    workdir: Path | None = None  # the agents' workspace (absolute); None = a scratch folder per task
    # a successful run the agent did not close itself, with refused actions: "review"
    # holds the task for a person; "complete" completes it as before
    on_denial: str = "review"
    keep_workspace_ms: int = 7 * 86_400_000  # a finished task's scratch folder, then retention removes it
    # a run whose agent prints nothing for this long is ended as stalled (0: never)
    stall_timeout_ms: int = 600_000
    # executors to run a task on when every account of its own is limited, in order
    fallback: tuple[str, ...] = ()
    # the shortest an automatic gate lasts (a usage limit, a backoff), whatever the
    # provider said: a reset already past must not make a hot loop
    min_gate_ms: int = 30_000
    # the loop's waits after transient failures, by how long the outage has lasted
    # (never longer than that, but for the first step): OUTAGE_BACKOFF_MS
    outage_backoff_ms: tuple[int, ...] = OUTAGE_BACKOFF_MS
    # code work for every task that says nothing itself (repo, base, workspace, checks,
    # review, merge): docs/coding.md
    code: CodeOptions = field(default_factory=CodeOptions)
    keep_branches: bool = True  # a task's branch outlives its worktree (retention removes only the folder)
    check_sandbox: bool = True  # checks run in bubblewrap (where it is installed), writing only the workspace


@dataclass(frozen=True)
class SensorDefaults:
    max_tasks_per_run: int = 100
    timeout_ms: int = 30_000
    max_backoff_ms: int = 3_600_000
    jitter_ms: int = 2_000
    misfire_grace_ms: int = 60_000


@dataclass(frozen=True)
class BudgetSettings:
    """A rolling-24 h spend cap in USD. ``daily_usd`` None means no cap (warnings
    and the urgency exemption then never apply)."""

    daily_usd: float | None = None
    urgent_priority: int = 1  # tasks this urgent (priority ≤ this) still run above the cap
    warn_at: tuple[float, ...] = (0.5, 0.8, 1.0)  # fractions of the cap; each alerts once per window
    # USD per rolling 24 h for the work a sensor started (its tasks and their follow-ups)
    per_sensor: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class AlertSettings:
    """The alert hook: ``command`` (an argv) gets one JSON event on stdin. Empty: no hook."""

    command: tuple[str, ...] = ()
    timeout_ms: int = 30_000
    stale_dispatcher_ms: int = 300_000  # a heartbeat older than this is a stale dispatcher
    stale_sensor_ms: int = 3_600_000  # a sensor overdue by this long is stale
    # Task events the hook subscribes to (TASK_EVENT_ALERTS); empty: none. A task
    # that failed for good is always sent (task_failed), subscribed or not.
    task_events: tuple[str, ...] = ()
    pass_env: tuple[str, ...] = ()  # the daemon's variables the hook gets (beyond PATH, HOME, locale, proxies)
    notify: tuple[NotifyTarget, ...] = ()  # notification services (apprise URLs), each with its kinds
    # a loop held this long by a gate that ends by itself (a usage limit, an outage's
    # backoff) alerts once, and once more when it ends; shorter holds stay quiet
    held_loop_ms: int = 1_800_000


TASK_EVENT_ALERTS = ("added", "completed")  # [alerts] task_events: what may be subscribed to
# [alerts] notify: the kinds a URL may get, and the alert events each names
NOTIFY_KINDS: dict[str, tuple[str, ...]] = {
    "waiting": ("task_waiting",),
    "failed": ("task_failed",),
    "gated": ("gate_changed", "auth_failed", "fallback_skipped", "account_held"),
    "over_budget": ("budget_warning",),
    "denied": ("task_denied",),
    "stale": ("dispatcher_stale", "sensor_stale"),
    "added": ("task_added",),
    "completed": ("task_completed",),
}
DEFAULT_NOTIFY_KINDS = ("waiting", "failed", "gated", "over_budget")


@dataclass(frozen=True)
class NotifyTarget:
    """One notification service: an apprise URL (``ntfy://…``, ``tgram://…``,
    ``mailto://…``, ``json://…``) and the kinds of alert it gets (``NOTIFY_KINDS``)."""

    url: str
    kinds: tuple[str, ...] = DEFAULT_NOTIFY_KINDS

    def wants(self, event_kind: str) -> bool:
        """Whether this service gets an alert of ``event_kind`` (a test alert: always)."""
        return event_kind == "test" or any(event_kind in NOTIFY_KINDS[kind] for kind in self.kinds)


@dataclass(frozen=True)
class LimitsSettings:
    """Flood limits, enforced where tasks are inserted; 0 disables a limit.

    Depth counts follow-ups along the parent chain (a task without parent is depth 0).
    Tasks per source are counted over the last 24 h; people (source ``human``) are
    never limited. ``per_source`` overrides the daily count for named sources.
    """

    max_depth: int = 5
    max_children: int = 20
    max_per_source_per_day: int = 500
    per_source: Mapping[str, int] = field(default_factory=dict)
    max_consecutive_failures: int = 5  # failed runs in a row that gate the loop
    # the most urgent priority an agent's task may have (1 most urgent … 9); an agent's
    # follow-up is also never more urgent than its parent (``vigil.store.limits``)
    agent_priority_floor: int = 1


@dataclass(frozen=True)
class RetentionSettings:
    """How long history is kept (docs/configuration.md, ``[retention]``). None
    keeps it forever, the default: deleting history cannot be undone, so it is
    something a person turns on."""

    keep_finished_ms: int | None = None  # finished tasks, by their last update
    keep_events_ms: int | None = None  # audit rows of the tasks that stay
    every_ms: int = 3_600_000  # how often `vigil run` prunes
    keep_costs_ms: int | None = None  # the cost archive of pruned tasks, by the end of each row
    keep_keys_ms: int | None = None  # retired source keys, by when they were retired


@dataclass(frozen=True)
class ChecksSettings:
    """How a task's checks run (``[checks]``; which checks: ``[dispatch] checks``).
    ``network`` False: the check sandbox has no network, not even the host's
    loopback; True: it shares the host's."""

    network: bool = False


@dataclass(frozen=True)
class TuiSettings:
    """The dashboard (``[tui]``). ``timezone`` is an IANA zone name for the times it
    shows; None: the machine's zone."""

    timezone: str | None = None


CHAT_KINDS = ("question", "review", "approval", "failed", "gate")  # [chat.telegram] kinds: what the bot sends


@dataclass(frozen=True)
class TelegramSettings:
    """The Telegram bot (``[chat.telegram]``, docs/chat.md). The token is never in the
    config: only the name of the variable that holds it. ``chat_id`` None: the chat
    paired with ``vigil chat pair`` (kept in the database) is the one allowed."""

    token_env: str = "VIGIL_TELEGRAM_TOKEN"  # noqa: S105 (a variable's name, not a token)
    chat_id: int | None = None
    api_url: str = "https://api.telegram.org/bot"  # the token and the method are appended
    kinds: tuple[str, ...] = CHAT_KINDS
    poll_ms: int = 30_000  # how long one getUpdates waits for news (Telegram's long poll)
    retry_ms: int = 30_000  # after Telegram was unreachable, before trying again


def sensor_name(entry: Mapping[str, Any]) -> str | None:
    """A sensor's name as its ``[[sensors]]`` table gives it: ``name``, else the
    built-in's name or the function's (the part of ``use`` after the colon), as
    ``sensors.config`` names it; None for an entry without either."""
    name = entry.get("name")
    if isinstance(name, str) and name:
        return name
    use = entry.get("use")
    return use.rsplit(":", 1)[-1] if isinstance(use, str) and use else None


@dataclass(frozen=True)
class GitHubSettings:
    """How approved work reaches GitHub as a pull request (``[github]``; docs/github.md).
    ``remote``: the git remote of the task's repository that branches are pushed to,
    with the operator's own git credentials. ``api_url``/``token_env``: as the
    github sensor's keys."""

    remote: str = "origin"
    api_url: str = DEFAULT_API_URL
    token_env: str = DEFAULT_TOKEN_ENV


SERVE_PORT = 8377


@dataclass(frozen=True)
class ServeSettings:
    """The dashboard served to a browser (``[serve]``, ``vigil tui --serve``).

    ``host``/``port``: where it listens unless the command line says otherwise; a
    ``host`` that is not loopback is refused unless given as ``--host`` (docs/tui.md).
    ``public_url``: the address people open it at (behind a proxy or a tunnel), no
    trailing slash; None: none is known, and notifications carry no link."""

    host: str = "127.0.0.1"
    port: int = SERVE_PORT
    public_url: str | None = None


@dataclass(frozen=True)
class Settings:
    home: Path
    config_path: Path | None
    store: StoreSettings
    dispatch: DispatchSettings = field(default_factory=DispatchSettings)
    claude: AgentCliSettings = field(default_factory=lambda: AgentCliSettings(("claude",)))
    codex: AgentCliSettings = field(default_factory=lambda: AgentCliSettings(("codex",)))
    prices: Mapping[str, Price] = field(default_factory=dict)
    sensor_defaults: SensorDefaults = field(default_factory=SensorDefaults)
    sensors: tuple[Mapping[str, Any], ...] = ()  # raw [[sensors]] tables, checked by sensors.config
    budget: BudgetSettings = field(default_factory=BudgetSettings)
    alerts: AlertSettings = field(default_factory=AlertSettings)
    limits: LimitsSettings = field(default_factory=LimitsSettings)
    retention: RetentionSettings = field(default_factory=RetentionSettings)
    tui: TuiSettings = field(default_factory=TuiSettings)
    checks: ChecksSettings = field(default_factory=ChecksSettings)
    telegram: TelegramSettings | None = None  # [chat.telegram]; None: no chat bot
    github: GitHubSettings = field(default_factory=GitHubSettings)
    serve: ServeSettings = field(default_factory=ServeSettings)

    @property
    def agent_clis(self) -> dict[str, AgentCliSettings]:
        """Each agent CLI's settings, by executor name: its ``[executors.NAME]``,
        the field of that name."""
        return {name: getattr(self, name) for name in CLI_FACTS}

    def agent_cli(self, executor: str) -> AgentCliSettings | None:
        """The settings of the agent CLI ``executor``; None for an executor that is
        no agent CLI (``command``, ``dry-run``)."""
        return self.agent_clis.get(executor)

    @property
    def skills_dir(self) -> Path:
        return self.home / "skills"

    @property
    def sensor_names(self) -> frozenset[str]:
        """The names of the sensors ``[[sensors]]`` configures (read from the raw
        tables: nothing is imported). A sensor removed from the config keeps its row
        in the store; status and the Sensors screen show only these."""
        return frozenset(name for entry in self.sensors if (name := sensor_name(entry)) is not None)

    @property
    def logs_dir(self) -> Path:
        return self.home / "logs"


def _amount(value: object) -> bool:
    """A number of dollars: finite (TOML has nan and inf) and not negative."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


class _Section:
    """Typed access to one TOML table; every error names file and key."""

    def __init__(self, table: Mapping[str, Any], name: str, source: Path | None) -> None:
        self._table = table
        self._name = name
        self._source = source
        self._seen: set[str] = set()

    def _fail(self, key: str, expected: str) -> ConfigError:
        return self.error(f"{key}: expected {expected}, got {self._table[key]!r}")

    def error(self, message: str) -> ConfigError:
        """``message`` (``key: what is wrong``) as an error naming the file and section."""
        where = f"{self._source}: " if self._source else ""
        return ConfigError(f"{where}[{self._name}] {message}")

    def _get(self, key: str) -> Any:
        self._seen.add(key)
        return self._table.get(key)

    def str_(self, key: str, default: str) -> str:
        value = self._get(key)
        if value is None:
            return default
        if not isinstance(value, str) or not value.strip():
            raise self._fail(key, "a non-empty string")
        return value

    def opt_str(self, key: str) -> str | None:
        value = self._get(key)
        if value is not None and not isinstance(value, str):
            raise self._fail(key, "a string")
        return value

    def choice(self, key: str, default: str, choices: tuple[str, ...]) -> str:
        value = self.str_(key, default)
        if value not in choices:
            raise self._fail(key, "one of " + ", ".join(repr(c) for c in choices))
        return value

    def int_(self, key: str, default: int, minimum: int = 0, maximum: int = MAX_INT) -> int:
        value = self._get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
            raise self._fail(key, f"an integer ≥ {minimum} (at most {maximum})")
        return value

    def opt_float(self, key: str) -> float | None:
        value = self._get(key)
        if value is None:
            return None
        if not _amount(value):
            raise self._fail(key, "a non-negative number")
        return float(value)

    def bool_(self, key: str, default: bool) -> bool:
        value = self._get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self._fail(key, "true or false")
        return value

    def has(self, key: str) -> bool:
        return key in self._table

    def duration_ms(self, key: str, default: int) -> int:
        value = self._get(key)
        if value is None:
            return default
        expected = f"a duration such as 30s, 5m, 2h, 1d (at most {MAX_DURATION_DAYS}d)"
        if not isinstance(value, str):
            raise self._fail(key, expected)
        try:
            return parse_duration_ms(value)
        except InputError:
            raise self._fail(key, expected) from None

    def argv(self, key: str, default: tuple[str, ...]) -> tuple[str, ...]:
        value = self._get(key)
        if value is None:
            return default
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self._fail(key, "a list of strings (an argv, not a shell string)")
        if key == "command" and not value:
            raise self._fail(key, "a non-empty list of strings")
        return tuple(value)

    def fractions(self, key: str, default: tuple[float, ...]) -> tuple[float, ...]:
        """A list of numbers in (0, 1], sorted and without repeats."""
        value = self._get(key)
        if value is None:
            return default
        if not isinstance(value, list) or not all(
            isinstance(f, int | float) and not isinstance(f, bool) and 0 < f <= 1 for f in value
        ):
            raise self._fail(key, "a list of fractions in (0, 1], e.g. [0.5, 0.8, 1.0]")
        return tuple(sorted({float(f) for f in value}))

    def amounts(self, key: str) -> dict[str, float]:
        """A table of name = number ≥ 0 (empty when absent)."""
        value = self._get(key)
        if value is None:
            return {}
        if not isinstance(value, dict) or not all(_amount(n) for n in value.values()):
            raise self._fail(key, "a table of name = USD, e.g. feeds = 2.0")
        return {name: float(n) for name, n in value.items()}

    def counts(self, key: str) -> dict[str, int]:
        """A table of name = integer ≥ 0 (empty when absent)."""
        value = self._get(key)
        if value is None:
            return {}
        if not isinstance(value, dict) or not all(
            isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= MAX_INT for n in value.values()
        ):
            raise self._fail(key, 'a table of name = count, e.g. "sensor:feeds" = 50')
        return dict(value)

    def done(self) -> None:
        """Raise for keys nobody read: most likely typos."""
        unknown = sorted(set(self._table) - self._seen)
        if unknown:
            where = f"{self._source}: " if self._source else ""
            raise ConfigError(f"{where}[{self._name}] unknown key {unknown[0]!r}")


def _fallback(section: _Section) -> tuple[str, ...]:
    """``[dispatch] fallback``: agent CLIs, in order, without repeats."""
    value = section.argv("fallback", ())
    if not all(name in AGENT_EXECUTORS for name in value):
        raise section._fail("fallback", 'a list of agent executors, e.g. ["codex"]')
    return tuple(dict.fromkeys(value))


def _outage_backoff(section: _Section, default: tuple[int, ...]) -> tuple[int, ...]:
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


def _lanes(section: _Section, default: int) -> int:
    lanes = section.int_("lanes", default, minimum=1)
    if lanes > MAX_LANES:
        raise section._fail("lanes", f"an integer from 1 to {MAX_LANES}")
    return lanes


def _check_lease(section: _Section, dispatch: DispatchSettings) -> None:
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


def _table(data: Mapping[str, Any], key: str, source: Path | None) -> Mapping[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: {key}: expected a table [{key}]")
    return value


def _accounts(section: _Section, executor: str, home: Path, source: Path | None) -> tuple[Account, ...]:
    """``[[executors.NAME.accounts]]``: each a name plus one selector."""
    value = section._get("accounts")
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(entry, dict) for entry in value):
        raise section._fail("accounts", "[[executors." + executor + ".accounts]] tables")
    dir_key = CLI_FACTS[executor].folder_key  # the key that names an account's folder
    accounts: list[Account] = []
    for number, entry in enumerate(value, start=1):
        table = _Section(entry, f"executors.{executor}.accounts #{number}", source)
        if not table.has("name"):
            where = f"{source}: " if source else ""
            raise ConfigError(f"{where}[executors.{executor}.accounts #{number}] name: required")
        name = table.str_("name", "")
        if not ACCOUNT_NAME.fullmatch(name):
            raise table._fail("name", "a name of lowercase letters, digits, '-' or '_' (at most 32)")
        if any(account.name == name for account in accounts):
            raise table._fail("name", "a name no other account of this executor has")
        folder, key_env = table.opt_str(dir_key), table.opt_str("api_key_env")
        reserve = table.opt_float("reserve")
        if reserve is not None and reserve > 1:
            raise table._fail("reserve", "a share of the window between 0 and 1, such as 0.2")
        table.done()
        if (folder is None) == (key_env is None):
            where = f"{source}: " if source else ""
            raise ConfigError(
                f"{where}[executors.{executor}.accounts] {name}: expected one of {dir_key} or api_key_env"
            )
        config_dir = None if folder is None else (home / Path(folder).expanduser()).resolve()
        accounts.append(Account(name, config_dir=config_dir, api_key_env=key_env, reserve=reserve))
    return tuple(accounts)


def _agent_cli(data: Mapping[str, Any], name: str, source: Path | None, home: Path) -> AgentCliSettings:
    section = _Section(_table(data, name, source), f"executors.{name}", source)
    model = section.opt_str("model")
    if model is not None and model_name_problem(model) is not None:
        raise section._fail("model", "a model name such as claude-sonnet-4-5 (never starting with '-')")
    settings = AgentCliSettings(
        command=section.argv("command", (name,)),
        model=model,
        max_budget_usd=section.opt_float("max_budget_usd"),
        extra_args=section.argv("extra_args", ()),
        accounts=_accounts(section, name, home, source),
        resume_after_failure=section.bool_("resume_after_failure", True),
    )
    facts = CLI_FACTS[name]  # the keys of this CLI's own, with the defaults as read above
    own: dict[str, Any] = {key: section.choice(key, getattr(settings, key), ok) for key, ok in facts.choices.items()}
    own |= {key: section.argv(key, getattr(settings, key)) for key in facts.lists}
    own |= {key: section.bool_(key, getattr(settings, key)) for key in facts.flags}
    settings = replace(settings, **own)
    section.done()
    return settings


def _prices(data: Mapping[str, Any], source: Path | None) -> dict[str, Price]:
    prices = {}
    for model, table in _table(data, "prices", source).items():
        if not isinstance(table, dict):
            raise ConfigError(f"{source}: [prices] {model}: expected a table of per-million-token prices")
        section = _Section(table, f"prices.{model}", source)
        prices[model] = Price(
            input=section.opt_float("input") or 0.0,
            output=section.opt_float("output") or 0.0,
            cache_read=section.opt_float("cache_read") or 0.0,
            cache_write=section.opt_float("cache_write") or 0.0,
        )
        section.done()
    return prices


def _budget(data: Mapping[str, Any], source: Path | None) -> BudgetSettings:
    section = _Section(_table(data, "budget", source), "budget", source)
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


def _alerts(data: Mapping[str, Any], source: Path | None) -> AlertSettings:
    section = _Section(_table(data, "alerts", source), "alerts", source)
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


def _notify(section: _Section) -> tuple[NotifyTarget, ...]:
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


def _task_events(section: _Section) -> tuple[str, ...]:
    value = section._get("task_events")
    if value is None:
        return ()
    if not isinstance(value, list) or not all(v in TASK_EVENT_ALERTS for v in value):
        raise section._fail("task_events", f"a list of {' and '.join(repr(k) for k in TASK_EVENT_ALERTS)}")
    return tuple(dict.fromkeys(value))


def _limits(data: Mapping[str, Any], source: Path | None) -> LimitsSettings:
    section = _Section(_table(data, "limits", source), "limits", source)
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


def _retention(data: Mapping[str, Any], source: Path | None) -> RetentionSettings:
    section = _Section(_table(data, "retention", source), "retention", source)
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


def _tui(data: Mapping[str, Any], source: Path | None) -> TuiSettings:
    section = _Section(_table(data, "tui", source), "tui", source)
    zone = section.opt_str("timezone")
    if zone is not None:
        try:
            ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise section._fail("timezone", "an IANA time zone such as 'Europe/Paris'") from None
    section.done()
    return TuiSettings(timezone=zone)


def _checks(data: Mapping[str, Any], source: Path | None) -> ChecksSettings:
    section = _Section(_table(data, "checks", source), "checks", source)
    settings = ChecksSettings(network=section.bool_("network", ChecksSettings.network))
    section.done()
    return settings


def _telegram(data: Mapping[str, Any], source: Path | None, agent_env: tuple[str, ...]) -> TelegramSettings | None:
    """``[chat.telegram]``; None when the table is absent. The token's variable may
    not be one the agent is given (``[dispatch] pass_env``)."""
    chat = _table(data, "chat", source)
    for name in chat:
        if name != "telegram":
            raise ConfigError(f"{source}: [chat.{name}] unknown chat service (expected telegram)")
    if "telegram" not in chat:
        return None
    section = _Section(_table(chat, "telegram", source), "chat.telegram", source)
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


def _serve(data: Mapping[str, Any], source: Path | None) -> ServeSettings:
    section = _Section(_table(data, "serve", source), "serve", source)
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


def _store_url(section: _Section, source: Path | None, env: Mapping[str, str]) -> str | None:
    """``VIGIL_STORE_URL`` if set (it wins: the password can stay out of the file),
    else ``[store] url``; None means the SQLite file."""
    from_file = section.opt_str("url")
    if env.get(STORE_URL_ENV):
        return check_store_url(env[STORE_URL_ENV], STORE_URL_ENV)
    if from_file is None:
        return None
    return check_store_url(from_file, f"{source}: [store] url" if source else "[store] url")


def _workdir(section: _Section, home: Path) -> Path | None:
    """``[dispatch] workdir``: a folder, relative to the home (``~`` expanded);
    None when unset. Whether it exists is checked when a task runs."""
    value = section.opt_str("workdir")
    if value is None:
        return None
    if not value.strip():
        raise section._fail("workdir", "a folder (absolute, or relative to the home)")
    return (home / Path(value).expanduser()).resolve()


def _code(section: _Section, home: Path) -> CodeOptions:
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


def _github(data: Mapping[str, Any], source: Path | None) -> GitHubSettings:
    section = _Section(_table(data, "github", source), "github", source)
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

    store = _Section(_table(data, "store", source), "store", source)
    store_settings = StoreSettings(
        path=(home / store.str_("path", "data/vigil.db")).resolve(),
        synchronous=store.choice("synchronous", "FULL", ("FULL", "NORMAL")),
        busy_timeout_ms=store.duration_ms("busy_timeout", 5000),
        url=_store_url(store, source, os.environ if env is None else env),
    )
    store.done()

    d = _Section(_table(data, "dispatch", source), "dispatch", source)
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

    executors = _table(data, "executors", source)
    for name in executors:
        if name not in CLI_FACTS:
            raise ConfigError(f"{source}: [executors.{name}] unknown executor (expected {' or '.join(CLI_FACTS)})")

    s = _Section(_table(data, "sensor_defaults", source), "sensor_defaults", source)
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
        claude=_agent_cli(executors, "claude", source, home),
        codex=_agent_cli(executors, "codex", source, home),
        prices=_prices(data, source),
        sensor_defaults=sensor_defaults,
        sensors=tuple(sensors),
        budget=_budget(data, source),
        alerts=_alerts(data, source),
        limits=_limits(data, source),
        retention=_retention(data, source),
        tui=_tui(data, source),
        checks=_checks(data, source),
        telegram=_telegram(data, source, dispatch.pass_env),
        github=_github(data, source),
        serve=_serve(data, source),
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
