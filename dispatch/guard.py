"""The dispatcher's guard: may the loop claim, and which gate an outcome trips.

Before each claim the loop asks ``may_claim(now)``:

* paused by a person, or gated → no claim (``until``: when to ask again);
* a gate whose ``until`` has passed (a usage limit's reset) is lifted here, by itself;
* over the rolling-24 h budget → claim only tasks with priority ≤ ``urgent_priority``
  (``until``: when to look at the budget again, so an idle loop does not spin);
* budget warnings that are due fire here, each once per window.

After each attempt the loop calls ``after_outcome(task, outcome)`` with the task as
recorded:

* ``usage_limited`` → the account the run used is limited until the reset the run
  named (``retry_at``), or, when it named none, for a backoff that starts at
  ``[dispatch] retry_backoff`` and doubles with each limit of that account in a row,
  up to ``usage_limit_fallback``. The loop is gated only when every account of the
  task's executor and of its fallbacks is limited, until the earliest reset. A
  limit that no reset ends (a spend limit with none named, usage turned off:
  ``vigil.limit_kinds.person_fix``) holds the account for a person instead
  (``dispatch.account_limits``); with no account left the loop waits for them;
* any outcome whose CLI reported its account's limit windows → kept per account
  for ``vigil status``; an account whose ``reserve`` is reached waits for its
  window's reset (``dispatch.account_limits``);
* ``transient`` and ``stalled`` (overload, 5xx, the network, a crash, a silent
  agent) → the loop backs off: gated for ``retry_backoff × 2^(n-1)``, capped at
  ``retry_backoff_max``, jittered, after the n-th such failure in a row; it
  resumes by itself, and an attempt that reaches the model ends the run of them;
* ``auth`` → gated until a person resumes (``vigil resume``);
* ``refused`` (the agent CLI would not start: missing, a flag it rejects, refused
  as root …) → gated until a person resumes, the reason saying what to change;
* ``[limits] max_consecutive_failures`` failed attempts of the work itself in a
  row (failed, budget, turns, context, timeout) → gated until a person resumes; a
  success or the gate itself resets the count (canceled, usage-limited and
  transient attempts leave it alone: they say nothing about the work);
* a task that ended ``failed`` → a ``task_failed`` alert (an ``over_budget`` run
  fails its task: the alert says so);
* a task whose agent asked a person → a ``task_waiting`` alert, with the question
  and how to answer it;
* an attempt in which the agent was refused actions → a ``task_denied`` alert (it
  never gates: a denial is the wall working, not the loop failing).

No automatic gate lasts less than ``[dispatch] min_gate``: a reset already past
must not make a hot loop. One incident alerts once: a gate that lifted itself and
is tripped again, for the same reason, by the first attempt after it stays quiet;
"resumed by itself" is sent once an attempt gets through.

Before running a claimed task the loop asks ``needs_approval(task, skills)``: a
task whose skill says ``requires_approval: true`` and that no person approved yet
goes back unrun (``Store.put_back``, blocked) until ``vigil task approve``. Then it
asks ``deferred(task, skills)``: a task whose sensor is over its ``[budget]
per_sensor`` cap, or whose every account is limited while its skill forbids
fallback, goes back unrun, due later (``Store.put_back``).

Every automatic gate change, auth failure and budget warning is sent to the alert
hook. An automatic gate never replaces a stronger stop (``vigil.gate.trip``).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from dispatch.account_limits import hold_account, record_limits
from dispatch.accounts import pick
from dispatch.alerts import AlertHook, make_event, waiting_event
from dispatch.skills import Skill
from vigil.accounts import DEFAULT_ACCOUNT, HELD_UNTIL, account_key, account_worked, limit_account, read_limits
from vigil.budget import WINDOW_MS, budget_use, claim_once, claim_warnings
from vigil.clock import Clock, iso_utc
from vigil.config import AGENT_EXECUTORS, Settings
from vigil.fate import Policy
from vigil.gate import BACKOFF, GATE_KEY, GateState, LoopGate, confirm_running, lift_expired, read_gate, trip
from vigil.limit_kinds import last_rejected, person_fix
from vigil.models import ApprovalState, Outcome, OutcomeKind, Task, TaskStatus
from vigil.store import CostGroup, Store

log = logging.getLogger("vigil.guard")

GUARD_KEY = "guard"  # loop_state: {"consecutive_failures": int, "transient_failures": int}
BUDGET_RECHECK_MS = 60_000  # over budget, how soon spend leaving the window is noticed
# A sensor over its cap: how long its tasks wait before they are looked at again.
# Long, because each look claims and releases the task (two audit events).
SENSOR_RECHECK_MS = 3_600_000
ACTOR = "guard"
# Attempts that count as failures of the work itself. Not here: success (resets),
# canceled (a person's choice), usage_limited, auth and refused (they gate on their own),
# transient and stalled (the provider's or the machine's trouble: they back off),
# over_budget (the guardrail working), interrupted (the dispatcher stopped).
FAILURES = frozenset(
    {
        OutcomeKind.FAILED,
        OutcomeKind.BUDGET,
        OutcomeKind.TURNS,
        OutcomeKind.CONTEXT,
        OutcomeKind.TIMEOUT,
        OutcomeKind.SANDBOX_FAILED,  # a sandbox broken for good must stop the loop, not fail every task
    }
)
# Attempts that put the loop into a backoff that ends by itself.
TRANSIENTS = frozenset({OutcomeKind.TRANSIENT, OutcomeKind.STALLED})
# Attempts that reached the model: they end a run of transient failures.
REACHED = FAILURES | {OutcomeKind.SUCCESS, OutcomeKind.OVER_BUDGET}
USAGE, AUTH, REFUSED, FAILED_IN_A_ROW = "usage", "auth", "refused", "failures"  # gate kinds


@dataclass(frozen=True, slots=True)
class Deferral:
    """A claimed task goes back unrun, due at ``until`` (epoch ms); ``why`` for the log."""

    until: int
    why: str


@dataclass(frozen=True, slots=True)
class ClaimDecision:
    """Whether the loop may claim now.

    ``max_priority`` None: any task; p: only tasks with priority ≤ p (over budget).
    ``until``: when a refusal ends by itself (a gate's reset; None: on a person's
    word, or claiming now); over budget, when to ask again. ``reason`` is one line for logs and
    status.
    """

    may_claim: bool
    max_priority: int | None = None
    reason: str = ""
    until: int | None = None


class Guardrails(Protocol):
    """What the loop asks before and after each attempt: ``Guard``, or in tests a
    permissive one that always lets it claim and run."""

    async def may_claim(self, now_ms: int) -> ClaimDecision: ...
    async def after_outcome(self, task: Task, outcome: Outcome) -> None: ...
    async def deferred(self, task: Task, skills: Sequence[Skill]) -> Deferral | None: ...
    def needs_approval(self, task: Task, skills: Sequence[Skill]) -> bool: ...


class Guard:
    """Guardrails around one dispatcher. All state lives in the store (``loop_state``),
    so a restarted dispatcher, the CLI and the TUI all see the same gate."""

    def __init__(
        self, store: Store, settings: Settings, clock: Clock, alerts: AlertHook, rng: random.Random | None = None
    ) -> None:
        self._store = store
        self._settings = settings
        self._clock = clock
        self._alerts = alerts
        # the retry policy's backoff, for the loop's own waits after outages and limits
        self._backoff = Policy(settings.dispatch, rng or random.Random())
        # Failed and transient attempts in a row, as stored under GUARD_KEY (None: not
        # read yet). Only this dispatcher writes it, so the copy saves a commit per success.
        self._counts: dict[str, int] | None = None
        self._lifted: LoopGate | None = None  # a gate that lifted itself, until an attempt gets through
        self._values: dict[str, object] = {}  # the loop state as may_claim last read it

    async def may_claim(self, now_ms: int) -> ClaimDecision:
        """Read the gate (lifting an expired one) and the budget; fire due warnings.
        One read of the loop state, plus one of the spend when a cap is set."""
        values = await self._store.loop_values()
        self._values = values
        gate = LoopGate.from_json(values.get(GATE_KEY))
        if gate.state is GateState.GATED and gate.is_open(now_ms):
            lifted = await lift_expired(self._store, by=ACTOR, now_ms=now_ms, stored=values.get(GATE_KEY))
            if lifted is not None:
                # said once an attempt gets through: the first one may meet the same wall
                self._lifted = lifted
                log.info("the gate lifted by itself: %s is over", lifted.reason)
            gate = await read_gate(self._store)
        if not gate.is_open(now_ms):
            return ClaimDecision(False, reason=f"{gate.state}: {gate.reason}", until=gate.until)
        budget = self._settings.budget
        if budget.daily_usd is None:
            return ClaimDecision(True)
        use = await budget_use(self._store, budget, now_ms)
        for threshold in await claim_warnings(self._store, use, budget, values):
            message = f"spent ${use.spent_usd:.2f} of ${use.cap_usd:.2f} in 24 h ({threshold:.0%} warning)"
            event = make_event(
                "budget_warning", message, now_ms, threshold=threshold, spent_usd=use.spent_usd, cap_usd=use.cap_usd
            )
            self._alerts.notify(event)
        if use.over:
            reason = f"over budget (${use.spent_usd:.2f} of ${use.cap_usd:.2f} in 24 h): urgent tasks only"
            until = now_ms + BUDGET_RECHECK_MS
            return ClaimDecision(True, max_priority=budget.urgent_priority, reason=reason, until=until)
        return ClaimDecision(True)

    async def after_outcome(self, task: Task, outcome: Outcome) -> None:
        """Trip the automatic gates ``outcome`` calls for; ``task`` is as recorded."""
        now_ms = self._clock.now_ms()
        gated = False
        if outcome.limits and outcome.account is not None:
            executor = task.executor or self._settings.dispatch.executor
            call = await record_limits(self._store, self._settings, executor, outcome, now_ms)
            gated = call is not None and await self._trip(call.reason, call.until, now_ms, call.kind)
        if outcome.kind is OutcomeKind.USAGE_LIMITED:
            gated = await self._account_limited(task, outcome, now_ms)
        elif outcome.kind is OutcomeKind.AUTH:
            message = f"task #{task.id}: the agent CLI could not authenticate: {outcome.error or 'no detail'}"
            self._alerts.notify(make_event("auth_failed", message, now_ms, task_id=task.id, error=outcome.error))
            reason = f"auth failure ({outcome.error or 'no detail'}); fix credentials, then resume"
            gated = await self._trip(reason, None, now_ms, AUTH)
        elif outcome.kind is OutcomeKind.REFUSED:
            reason = (
                f"the agent CLI refused to start ({outcome.error or 'no detail'}); "
                "change its settings in vigil.toml, then resume"
            )
            gated = await self._trip(reason, None, now_ms, REFUSED)
        elif outcome.kind is OutcomeKind.SUCCESS and outcome.account is not None and task.executor:
            key = account_key(task.executor, outcome.account)
            await account_worked(self._store, key, read_limits(self._values))
        gated = await self._count_failures(outcome, now_ms) or gated
        if not gated and outcome.kind in REACHED:
            await self._confirm_resumed(now_ms)
        if outcome.permission_denials:
            denials = outcome.permission_denials
            review = " it awaits review (vigil task approve or reject)" if task.awaiting_review else ""
            message = f"task #{task.id}: {len(denials)} action(s) denied to the agent;{review} first: {denials[0]}"
            details = {"task_id": task.id, "subject": task.subject, "denials": list(denials)}
            details.update(status=str(task.status), awaiting_review=task.awaiting_review)
            self._alerts.notify(make_event("task_denied", message, now_ms, **details))
        if task.status is TaskStatus.WAITING:
            self._alerts.notify(waiting_event(task, now_ms))
        if task.status is TaskStatus.FAILED:
            message = f"task #{task.id} failed for good ({outcome.kind}): {task.subject}"
            details = {"task_id": task.id, "subject": task.subject, "attempts": task.attempt_count}
            details.update(outcome=str(outcome.kind), error=outcome.error)
            self._alerts.notify(make_event("task_failed", message, now_ms, **details))

    async def deferred(self, task: Task, skills: Sequence[Skill]) -> Deferral | None:
        """When a claimed ``task`` with its ``skills`` may run, if not now: every
        account it may run on is limited (its skill forbids fallback, or it was
        claimed before the loop was gated), or the sensor that started its chain is over its ``[budget]
        per_sensor`` cap (urgent tasks are exempt, as for the daily cap). None: run
        it now. The first deferral per sensor and window sends a
        ``budget_warning``."""
        limited = await self._accounts_limited(skills)
        if limited is not None:
            return limited
        later = await self._sensor_over_budget(task)
        return None if later is None else Deferral(later, "its sensor is over its daily budget")

    async def _accounts_limited(self, skills: Sequence[Skill]) -> Deferral | None:
        executor = next((s.executor for s in skills if s.executor), None) or self._settings.dispatch.executor
        if executor not in AGENT_EXECUTORS:
            return None
        limits = read_limits(await self._store.loop_values())
        now_ms = self._clock.now_ms()
        where = pick(self._settings, executor, limits, now_ms, may_fall_back=all(s.fallback for s in skills))
        if where.account is not None or where.free_at is None or where.free_at <= now_ms:
            return None
        if where.free_at >= HELD_UNTIL:  # every account needs a person: look again after a while
            return Deferral(now_ms + SENSOR_RECHECK_MS, "every account it may run on needs a person")
        return Deferral(where.free_at, f"every account it may run on is limited until {iso_utc(where.free_at)}")

    async def _sensor_over_budget(self, task: Task) -> int | None:
        caps = self._settings.budget.per_sensor
        if not caps or task.priority <= self._settings.budget.urgent_priority:
            return None
        origin = await self._store.origin_of(task.id)
        name = origin.removeprefix("sensor:")
        if name == origin or name not in caps:
            return None
        now_ms = self._clock.now_ms()
        rows = await self._store.cost_rollup(since_ms=now_ms - WINDOW_MS, by=CostGroup.SENSOR)
        spent = next((row.cost_usd for row in rows if row.key == name), 0.0)
        if spent < caps[name]:
            return None
        if await claim_once(self._store, origin, now_ms):
            message = f"sensor {name} spent ${spent:.2f} of its ${caps[name]:.2f} in 24 h: its tasks wait"
            fields = {"sensor": name, "threshold": 1.0, "spent_usd": spent, "cap_usd": caps[name]}
            self._alerts.notify(make_event("budget_warning", message, now_ms, **fields))
        return now_ms + SENSOR_RECHECK_MS

    def needs_approval(self, task: Task, skills: Sequence[Skill]) -> bool:
        """Whether ``task`` must wait for a person: one of its ``skills`` requires
        approval and no person approved it."""
        return task.approval != ApprovalState.APPROVED and any(skill.requires_approval for skill in skills)

    async def _account_limited(self, task: Task, outcome: Outcome, now_ms: int) -> bool:
        """Limit the account the run used; gate the loop when no account is left.
        Returns whether the loop was gated."""
        executor = task.executor or self._settings.dispatch.executor
        key = account_key(executor, outcome.account or DEFAULT_ACCOUNT)
        dispatch = self._settings.dispatch
        earlier = read_limits(await self._store.loop_values()).get(key)
        in_a_row = (earlier.in_a_row if earlier is not None else 0) + 1
        fix = person_fix(outcome.limits, outcome.error)
        if fix is not None:  # never waited out: the account waits for a person
            call = await hold_account(
                self._store, self._settings, self._alerts, key, fix=fix, outcome=outcome, now_ms=now_ms
            )
            return call is not None and await self._trip(call.reason, call.until, now_ms, call.kind)
        if outcome.retry_at is not None:
            until = outcome.retry_at
        else:  # no reset named: try again after a backoff that grows while it lasts
            until = now_ms + min(self._backoff.backoff_ms(in_a_row), dispatch.usage_limit_fallback_ms)
        until = max(until, now_ms + dispatch.min_gate_ms)  # a reset already past must not make a hot loop
        detail = outcome.error or "no detail"
        rejected = last_rejected(outcome.limits)
        kind = rejected.kind if rejected is not None else ""
        limits = await limit_account(
            self._store, key, until=until, reason=detail, now_ms=now_ms, in_a_row=in_a_row, kind=kind
        )
        where = pick(self._settings, executor, limits, now_ms)
        if where.account is not None:
            log.info(
                "account %s is limited until %s; tasks run on %s:%s", key, iso_utc(until), where.executor, where.account
            )
            return False
        reason = f"usage limit: every account is limited ({key}: {detail})"
        # an executor that has no accounts (a command that exits as limited) waits as one
        return await self._trip(reason, where.free_at or until, now_ms, USAGE)

    async def _count_failures(self, outcome: Outcome, now_ms: int) -> bool:
        """Count failures of the work and transient failures in a row; gate the loop
        for a person, or back off. Returns whether the loop was gated."""
        if outcome.kind not in REACHED and outcome.kind not in TRANSIENTS:
            return False
        counts = await self._read_counts()
        failures, transients = counts["consecutive_failures"], counts["transient_failures"]
        if outcome.kind in TRANSIENTS:
            transients += 1
        else:  # the model was reached: the provider is up again
            transients = 0
            if outcome.kind is OutcomeKind.SUCCESS:
                failures = 0
            elif outcome.kind in FAILURES:
                failures += 1
        limit = self._settings.limits.max_consecutive_failures
        tripped = bool(limit) and failures >= limit
        # Counting starts afresh once the gate is tripped, so after `vigil resume`
        # it takes another run of failures to gate the loop again.
        stored = {"consecutive_failures": 0 if tripped else failures, "transient_failures": transients}
        if stored != counts:
            await self._store.set_loop_values({GUARD_KEY: stored})
            self._counts = stored
        if tripped:
            reason = f"{failures} failed runs in a row; look at the last ones, then resume"
            return await self._trip(reason, None, now_ms, FAILED_IN_A_ROW)
        if outcome.kind in TRANSIENTS:
            dispatch = self._settings.dispatch
            wait = max(self._backoff.backoff_ms(transients), dispatch.min_gate_ms)
            log.info("backing off after a transient failure: %s", outcome.error or outcome.kind)
            reason = f"backing off after {transients} transient failure{'' if transients == 1 else 's'}"
            return await self._trip(reason, now_ms + wait, now_ms, BACKOFF)
        return False

    async def _read_counts(self) -> dict[str, int]:
        if self._counts is None:
            raw = (await self._store.loop_values()).get(GUARD_KEY)
            raw = raw if isinstance(raw, dict) else {}
            self._counts = {
                name: value if isinstance(value := raw.get(name, 0), int) else 0
                for name in ("consecutive_failures", "transient_failures")
            }
        return self._counts

    async def _trip(self, reason: str, until: int | None, now_ms: int, kind: str) -> bool:
        """Gate the loop; alert unless the gate it replaces is of the same kind (a
        gate already up, or one that lifted itself and met the same wall again: the
        same incident). Returns whether the gate was set."""
        before = await read_gate(self._store)
        gate = await trip(self._store, reason=reason, until=until, by=ACTOR, now_ms=now_ms, kind=kind)
        if gate is None:
            log.info("the loop is already stopped for longer; not gating it for: %s", reason)
            return False
        self._lifted = None
        if before.kind == kind and before.state is not GateState.PAUSED:
            log.info("loop gated again, still: %s", reason)
            return True
        self._gate_changed(f"loop gated: {reason}", "gated", now_ms, gate)
        return True

    async def _confirm_resumed(self, now_ms: int) -> None:
        """An attempt got through after a gate lifted itself: say the loop resumed."""
        if self._lifted is None:
            return
        lifted, self._lifted = self._lifted, None
        if await confirm_running(self._store, by=ACTOR, now_ms=now_ms) is not None:
            self._gate_changed(f"loop resumed by itself: {lifted.reason} is over", "running", now_ms)

    def _gate_changed(self, message: str, state: str, now_ms: int, gate: LoopGate | None = None) -> None:
        fields: dict[str, object] = {"state": state}
        if gate is not None:
            fields.update(reason=gate.reason, until=gate.until)
        self._alerts.notify(make_event("gate_changed", message, now_ms, **fields))
