"""The domain's values: tasks, runs, events, notes, outcomes, sensor state.

Rows become frozen dataclasses. Times are epoch milliseconds (UTC); ``None`` means
"not yet" (``started_at`` of a task that never ran) unless a field says otherwise.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum

from vigil.codework import CheckResult, CodeOptions, RunChanges, Worktree
from vigil.limit_kinds import LimitReport

MIN_PRIORITY = 1  # most urgent
MAX_PRIORITY = 9  # least urgent
DEFAULT_PRIORITY = 5
DEFAULT_MAX_RETRIES = 3
MAX_RETRIES = 1000  # the most retries a task may have (its attempts: one more)
MAX_ID = 2**63 - 1  # ids are the database's 64-bit integers
# A model name as the agent CLIs take it (claude-sonnet-4-5, sonnet[1m], gpt-5-codex,
# us.anthropic.claude-3-7-sonnet-20250219-v1:0, qwen2.5-coder:7b, org/model@rev): it
# goes into the agent's argv, so it never starts with "-" (it would be read as a flag)
# and holds no space or control character.
MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+\[\]-]*")
MODEL_NAME_MAX = 200
# A skill name is a folder name under skills/ and can never be a path.
SKILL_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")
SKILL_NAME_MAX = 64


def model_name_problem(name: object) -> str | None:
    """Why ``name`` is not a model name an agent CLI can be given; None when it is."""
    if isinstance(name, str) and len(name) <= MODEL_NAME_MAX and MODEL_NAME.fullmatch(name):
        return None
    shown = repr(name) if not isinstance(name, str) or len(name) <= 60 else repr(name[:59] + "…")
    return (
        f"invalid model name {shown}: expected a name such as claude-sonnet-4-5 (letters, digits, "
        "and . _ : / @ + [ ] - inside; not starting with '-')"
    )


def skill_name_problem(name: object) -> str | None:
    """Why ``name`` is not a valid skill name; None when it is."""
    if isinstance(name, str) and len(name) <= SKILL_NAME_MAX and SKILL_NAME.fullmatch(name):
        return None
    return f"invalid skill name {name!r}: expected lowercase letters, digits, '-' or '_'"


class TaskStatus(StrEnum):
    PENDING = "pending"
    ACTIVE = "active"
    BLOCKED = "blocked"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELED = "canceled"
    WAITING = "waiting"  # for a person's answer to its agent's question

    @property
    def is_open(self) -> bool:
        """Open tasks hold their source key in the ``open`` dedup scope."""
        return self in OPEN_STATUSES


OPEN_STATUSES = frozenset({TaskStatus.PENDING, TaskStatus.ACTIVE, TaskStatus.BLOCKED, TaskStatus.WAITING})
FINISHED_STATUSES = frozenset({TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELED})


class ApprovalState(StrEnum):
    """Where a task that needs a person's approval stands. A pending one is ``blocked``."""

    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"


class DedupScope(StrEnum):
    """How a source key deduplicates.

    ``open``: at most one pending/active/blocked task per key; a new one may be
    created once it finished. ``ever``: the key is used once, forever.
    """

    OPEN = "open"
    EVER = "ever"


class CostGroup(StrEnum):
    """How ``cost_rollup`` groups finished runs (``vigil stats --by``)."""

    DAY = "day"
    SKILL = "skill"
    SOURCE = "source"
    MODEL = "model"
    HOUR = "hour"  # key "YYYY-MM-DDTHH" (UTC): the TUI's 24-hour chart
    SENSOR = "sensor"  # the sensor that started the task's parent chain; "(none)" for others
    ACCOUNT = "account"  # "executor:account" of the run; "(none)" without one


class OutcomeKind(StrEnum):
    """What became of one attempt; decides retry, gate and final status."""

    SUCCESS = "success"
    FAILED = "failed"  # the agent ran and reported failure; not worth a retry
    TRANSIENT = "transient"  # overload, network, crash: retry with backoff
    USAGE_LIMITED = "usage_limited"  # wait for the reset; the attempt is not counted
    AUTH = "auth"  # credentials are wrong or expired: a person must act
    REFUSED = "refused"  # the CLI refused to start (untrusted folder, bad flag, root): every task would fail alike
    BUDGET = "budget"  # per-run spend cap reached
    TURNS = "turns"  # the agent ran out of turns
    CONTEXT = "context"  # the prompt is too large
    TIMEOUT = "timeout"  # our own per-task timeout ended it
    STALLED = "stalled"  # the agent printed nothing for [dispatch] stall_timeout: ended, retried
    OVER_BUDGET = "over_budget"  # ended mid-run: it would have passed its task's or the daily budget
    INTERRUPTED = "interrupted"  # the dispatcher died or lost its claim mid-run
    STOPPED = "stopped"  # vigil run was stopped (SIGTERM, Ctrl-C) mid-run: not the task's doing
    CANCELED = "canceled"  # a person asked to cancel while it ran
    CHECKS_FAILED = "checks_failed"  # the agent was done, but a check did not pass: retried
    ASKED = "asked"  # the agent asked a person a question: the task waits for the answer
    # the agent CLI's sandbox could not start the agent's commands (bubblewrap failed): retried
    SANDBOX_FAILED = "sandbox_failed"


@dataclass(frozen=True, slots=True)
class GitHubLink:
    """Where a task meets GitHub (``tasks.github``): the repository (``owner/name``),
    the issue it came from and the pull request its work became; None where there
    is none (yet). ``branch`` is the pull request's head branch."""

    repo: str
    issue: int | None = None
    issue_url: str | None = None
    pull: int | None = None
    pull_url: str | None = None
    branch: str | None = None

    def to_json(self) -> str:
        return json.dumps({k: v for k, v in asdict(self).items() if v is not None})

    @property
    def issue_text(self) -> str | None:
        """``owner/name#7 https://…`` for people; None without an issue."""
        return None if self.issue is None else f"{self.repo}#{self.issue} {self.issue_url or ''}".rstrip()

    @property
    def pull_text(self) -> str | None:
        """``owner/name#12 https://… (branch vigil/3-fix)`` for people; None without a pull request."""
        if self.pull is None:
            return None
        branch = f" (branch {self.branch})" if self.branch else ""
        return f"{self.repo}#{self.pull} {self.pull_url or ''}".rstrip() + branch

    @classmethod
    def from_json(cls, text: str | None) -> GitHubLink | None:
        if text is None:
            return None
        value = json.loads(text)
        return cls(**{f.name: value.get(f.name) for f in fields(cls)})


@dataclass(frozen=True, slots=True)
class NewTask:
    """A task to be added. ``scheduled_for`` None means "now"; ``max_retries`` None
    means the configured default; ``skills`` keep their order, a repeat dropped;
    ``model`` None means the skill's or the executor's model."""

    subject: str
    description: str = ""
    priority: int = DEFAULT_PRIORITY
    skills: tuple[str, ...] = ()
    source: str = "human"
    source_key: str | None = None
    dedup: DedupScope = DedupScope.OPEN
    parent_id: int | None = None
    scheduled_for: int | None = None
    depends_on: tuple[int, ...] = ()
    max_retries: int | None = None
    requires_approval: bool = False  # added as blocked until a person approves it
    model: str | None = None  # the agent model for this task; wins over its skills' and the config's
    workdir: str | None = None  # an absolute folder the agent works in; None: the default
    max_cost_usd: float | None = None  # the most its runs may spend together; None: its skill's, else no limit
    # the task's own code options (repository, base, checks, review, merge); None: its
    # skills' and the configuration's (a follow-up without its own gets its parent's)
    code: CodeOptions | None = None
    github: GitHubLink | None = None  # the GitHub issue it came from

    def __post_init__(self) -> None:
        # A skill named twice would load twice into the prompt and count each run
        # twice in the cost by skill: kept once, where it first appears.
        if len(set(self.skills)) != len(self.skills):
            object.__setattr__(self, "skills", tuple(dict.fromkeys(self.skills)))


@dataclass(frozen=True, slots=True)
class Task:
    id: int
    subject: str
    description: str
    skills: tuple[str, ...]
    priority: int
    status: TaskStatus
    source: str
    source_key: str | None
    dedup: DedupScope
    parent_id: int | None
    scheduled_for: int
    created_at: int
    updated_at: int
    started_at: int | None
    completed_at: int | None
    attempt_count: int
    max_retries: int
    cost_usd: float
    api_cost_usd: float
    tokens_in: int
    tokens_out: int
    result_summary: str | None
    result_detail: str | None
    model: str | None
    executor: str | None
    claimed_by: str | None
    lease_until: int | None
    cancel_requested: bool
    waiting_on: int  # dependencies not yet completed; claimable only at 0
    approval: str | None = None  # None: not needed; else ApprovalState (pending, approved, rejected)
    workdir: str | None = None  # the agent's workspace; None: the skill's or the configured one, else scratch
    review: str | None = None  # None: never held for review; else ApprovalState of the review after a run
    denials: int = 0  # actions its agents were refused, over every run
    max_cost_usd: float | None = None  # the most its runs may spend together (USD); None: its skill's, else none
    code: CodeOptions | None = None  # its own code options (``NewTask.code``)
    worktree: Worktree | None = None  # the git worktree Vigil made for it; None: none yet
    question: str | None = None  # the agent's latest question to a person; None: it never asked
    choices: tuple[str, ...] = ()  # the answers the agent offered with it (may be empty)
    answer: str | None = None  # the person's answer to ``question``; None while it waits
    asked_run: int | None = None  # the run whose agent asked ``question``
    github: GitHubLink | None = None  # its GitHub issue and pull request; None: none

    @property
    def awaiting_approval(self) -> bool:
        """Blocked until a person approves it to run."""
        return self.status is TaskStatus.BLOCKED and self.approval == ApprovalState.PENDING

    @property
    def awaiting_review(self) -> bool:
        """Blocked after a run until a person approves the result (→ completed) or
        rejects it (→ back to the queue)."""
        return self.status is TaskStatus.BLOCKED and self.review == ApprovalState.PENDING


@dataclass(frozen=True, slots=True)
class AddResult:
    """``created`` False means the source key deduplicated it: ``task_id`` is then
    the id of the task that already holds the key (None for a used ``ever`` key
    whose task was deleted)."""

    task_id: int | None
    created: bool
    # why the priority asked for was raised (an agent's task: ``vigil.store.limits.agent_priority``)
    clamped: str | None = None


@dataclass(frozen=True, slots=True)
class LineResult:
    """What became of one task of a batch added line by line: ``created`` (its new
    id), ``existing`` (a task already holds its key: that task's id, None for a used
    ``ever`` key whose task was deleted) or ``refused`` (``reason`` says why: a flood
    limit, a missing parent or dependency)."""

    outcome: str  # "created", "existing" or "refused"
    task_id: int | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class TaskFeedback:
    """What came back from a task's pull request, applied with the sensor run that
    saw it (``Store.record_sensor_run``): ``note`` stored on the task, an audit event
    (kind ``github``, ``event`` its value: ``changes requested``, ``checks failed``,
    ``merged``, ``closed``), and with ``send_back`` a completed task back in the
    queue. Applied only to the task whose pull request ``repo``#``pull`` is."""

    task_id: int
    repo: str
    pull: int
    event: str
    note: str
    send_back: bool


@dataclass(frozen=True, slots=True)
class BatchResult:
    """``ignored``: deduplicated by their source key; ``rejected``: refused by a
    flood limit (``[limits]``), counted, never silently dropped."""

    created_ids: tuple[int, ...]
    ignored: int
    rejected: int = 0

    @property
    def created(self) -> int:
        return len(self.created_ids)


@dataclass(frozen=True, slots=True)
class Claim:
    """A task handed to one dispatcher, with the ``runs`` row opened for it."""

    task: Task
    run_id: int
    attempt: int  # 1 for the first run of the task, counting every run ever made


@dataclass(frozen=True, slots=True)
class Outcome:
    """What an executor reports for one attempt. Costs in USD; tokens are counts.

    ``retry_at`` (epoch ms) is when the account may be used again after a
    ``USAGE_LIMITED`` run (the provider's reset, or the wait the CLI was told);
    None means the CLI named none. ``permission_denials`` are the actions
    the agent was refused (by the CLI's permissions, its sandbox or Vigil's own
    tools), one line each (``Write: {"file_path": "/home/x/vigil.toml", …}``).
    """

    kind: OutcomeKind
    summary: str = ""
    detail: str = ""
    error: str | None = None
    exit_code: int | None = None
    cost_usd: float = 0.0
    api_cost_usd: float = 0.0
    tokens_in: int = 0
    tokens_out: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    model: str | None = None
    session_id: str | None = None
    transcript_path: str | None = None
    retry_at: int | None = None
    permission_denials: tuple[str, ...] = ()
    account: str | None = None  # the agent CLI's account the run used; None: no agent CLI ran
    checks: tuple[CheckResult, ...] = ()  # how each check ended, when checks ran
    changes: RunChanges | None = None  # what the run left on its task's branch; None: no worktree
    review: bool = False  # a person reviews the task's result: a success waits for them (``review = true``)
    resumed_from: int | None = None  # the run whose agent session this one continued; None: a fresh session
    # how its spend was priced (the CLI's own figure, the price table, a family's price); None: not priced
    priced_by: str | None = None
    resume_refused: bool = False  # the CLI would not resume the session asked for (not stored: run afresh)
    # what the agent CLI reported of its account's usage limits during the run, in order
    limits: tuple[LimitReport, ...] = ()


@dataclass(frozen=True, slots=True)
class Attention:
    """What waits for a person: tasks awaiting review or approval, and the runs in
    a recent window whose agent was refused at least one action."""

    awaiting_review: int
    awaiting_approval: int
    denied_runs: int


@dataclass(frozen=True, slots=True)
class Run:
    """One attempt at a task. ``finished_at``/``outcome`` are None while it runs."""

    id: int
    task_id: int
    attempt: int
    started_at: int
    finished_at: int | None
    outcome: str | None
    error: str | None
    exit_code: int | None
    cost_usd: float
    api_cost_usd: float
    tokens_in: int
    tokens_out: int
    cache_read_tokens: int
    cache_write_tokens: int
    model: str | None
    session_id: str | None
    transcript_path: str | None
    executor: str | None
    claimed_by: str | None
    pid: int | None
    pgid: int | None
    proc_start: str | None  # the process's start time as the OS reports it (pid reuse check)
    permission_denials: tuple[str, ...] = ()  # tool calls the agent CLI refused (``Outcome``)
    workspace: str | None = None  # the folder the agent worked in; None: no agent process ran
    summary: str | None = None  # what the run came to: the agent's summary if it closed its task, else Vigil's
    agent_status: str | None = None  # what the agent closed its task as in this run (pending: asked for a retry)
    account: str | None = None  # the agent CLI's account it ran on
    checks: tuple[CheckResult, ...] = ()  # ``Outcome.checks``
    changes: RunChanges | None = None  # ``Outcome.changes``
    # its result waits on checks or a person's review, not on the agent's word: the
    # agent's own ``close`` as completed does not close the task
    gated: bool = False
    resumed_from: int | None = None  # the run whose agent session this one continued; None: a fresh session
    priced_by: str | None = None  # ``Outcome.priced_by``


@dataclass(frozen=True, slots=True)
class TaskEvent:
    """One audit row: ``actor`` did ``kind`` and the value went from → to."""

    id: int
    task_id: int
    at: int
    actor: str
    kind: str
    from_value: str | None
    to_value: str | None
    detail: str | None


@dataclass(frozen=True, slots=True)
class Note:
    id: int
    task_id: int
    at: int
    author: str
    text: str


@dataclass(frozen=True, slots=True)
class CostRow:
    """Spend over finished runs for one group (a UTC day ``YYYY-MM-DD``, a skill,
    a source or a model)."""

    key: str
    runs: int
    tasks: int
    cost_usd: float
    api_cost_usd: float
    tokens_in: int
    tokens_out: int
    cache_read_tokens: int
    cache_write_tokens: int


@dataclass(frozen=True, slots=True)
class PruneResult:
    """What one ``Store.prune`` removed (with ``dry_run``: would remove).

    ``events`` counts the audit rows of the pruned tasks plus the old rows of kept
    tasks that ``events_before_ms`` removed. ``transcripts`` are the transcript paths
    the pruned runs recorded, as stored: the caller deletes the files. ``complete``
    is False when ``max_batches`` stopped the prune with more left to remove.
    ``folded`` counts the cost archive's hour rows folded into day rows, ``costs``
    the archive rows dropped as too old, ``keys`` the retired keys dropped (a dry
    run counts them as the archive is before the prune).
    """

    tasks: int = 0
    runs: int = 0
    events: int = 0
    notes: int = 0
    dependencies: int = 0
    transcripts: tuple[str, ...] = ()
    batches: int = 0
    complete: bool = True
    folded: int = 0
    costs: int = 0
    keys: int = 0


@dataclass(frozen=True, slots=True)
class SensorRun:
    """What one sensor run did, as the runner records it. Durations in ms."""

    started_at: int
    duration_ms: int
    status: str  # "ok", "error" or "timeout"
    error: str | None = None
    next_due_at: int | None = None
    consecutive_failures: int = 0
    dropped: int = 0  # tasks beyond the per-run cap, counted and logged


@dataclass(frozen=True, slots=True)
class SensorSkip:
    """Runs of a sensor that fell due and were not made, one stretch of them: ``runs``
    runs for one ``reason``, the first due at ``first_at``, the last at ``last_at``
    (epoch ms). Reasons: ``downtime`` (no process ran the sensors then, or too late
    for its ``catch_up``), ``disabled``, ``backoff`` (it kept failing), ``busy`` (its
    previous run was still going)."""

    reason: str
    first_at: int
    last_at: int
    runs: int = 1


@dataclass(frozen=True, slots=True)
class SensorState:
    """A sensor's persisted health and cursor. ``state`` is the sensor's own JSON
    object (cursors such as "last seen entry")."""

    name: str
    enabled: bool
    last_run_at: int | None
    last_duration_ms: int | None
    last_status: str | None
    last_error: str | None
    consecutive_failures: int
    created_last: int
    ignored_last: int
    dropped_last: int
    next_due_at: int | None
    state: dict[str, object] = field(default_factory=dict)
    rejected_last: int = 0  # tasks of the last run refused by a flood limit
    skips: tuple[SensorSkip, ...] = ()  # the latest stretches of runs not made, oldest first


HEARTBEAT_KEY = "dispatcher"  # loop_state key the dispatcher writes every heartbeat
STALE_BEATS = 3  # missed heartbeats before a dispatcher counts as gone
# loop_state key counting tasks a flood limit refused:
# {"total": n, "last_at": epoch_ms, "last_source": str, "last_reason": str}
REJECTED_INSERTS_KEY = "rejected_inserts"
# loop_state key of the notification services' health ([alerts] notify), by position:
# {"0": {"service": "json://…", "ok_at": epoch_ms, "failed_at": epoch_ms, "error": str | None}}
NOTIFY_KEY = "notifiers"
# loop_state key of the Telegram bot's health (vigil.chat): {"state": "up" | "down",
# "since": epoch_ms, "error": str | None}; `vigil status` shows it
CHAT_HEALTH_KEY = "chat.telegram.health"


@dataclass(frozen=True, slots=True)
class DispatcherHeartbeat:
    """What the dispatcher holding the lock says about itself, in ``loop_state``.

    ``state`` is ``running`` (a task is active), ``idle`` or ``stopped`` (clean exit).
    ``heartbeat_at`` is refreshed every heartbeat; a reader judges liveness by its age.
    ``note`` is a live word from the running agent CLI ("API retry 3/10, next in 9 s
    (529 overloaded)"); None when it has nothing to say.
    """

    owner: str  # worker id: "<host>:<pid>:<random>"
    pid: int
    host: str
    since: int
    heartbeat_at: int
    state: str
    task_id: int | None = None
    task_started_at: int | None = None
    note: str | None = None

    def alive(self, now_ms: int, heartbeat_ms: int) -> bool:
        """Whether the dispatcher counts as running at ``now_ms`` (epoch ms): it did
        not say ``stopped`` and its last beat is at most ``STALE_BEATS`` intervals
        of ``heartbeat_ms`` old."""
        return self.state != "stopped" and now_ms - self.heartbeat_at <= STALE_BEATS * heartbeat_ms

    def to_json(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    @classmethod
    def from_json(cls, value: object) -> DispatcherHeartbeat | None:
        """None when ``value`` is missing or not a heartbeat."""
        if not isinstance(value, dict):
            return None
        note = value.get("note")  # absent in heartbeats written before it existed
        try:
            fields = {name: value[name] for name in cls.__dataclass_fields__ if name != "note"}
            return cls(**fields, note=note if isinstance(note, str) else None)
        except (KeyError, TypeError):
            return None
