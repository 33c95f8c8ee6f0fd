"""The settings: one frozen ``Settings`` value, a dataclass per section of
``vigil.toml`` with its defaults, and the constants they use. Built by
``vigil.config.loading``; import them from ``vigil.config``."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vigil.agent_clis import CLI_FACTS
from vigil.codework import CodeOptions
from vigil.github import DEFAULT_API_URL, DEFAULT_TOKEN_ENV
from vigil.store_url import mask_password

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
