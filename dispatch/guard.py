"""The dispatcher's gatekeeper: may the loop claim, and what an outcome trips.

Before each claim the loop asks ``may_claim(now)``:

* paused by a person, or gated → no claim (``until``: when to ask again);
* a gate whose ``until`` has passed (a usage limit's reset) is lifted here, by itself;
* over the rolling-24 h budget → claim only tasks with priority ≤ ``urgent_priority``
  (``until``: when to look at the budget again, so an idle loop does not spin);
* budget warnings that are due fire here, each once per window.

After each attempt the loop calls ``after_outcome(task, outcome)`` with the task as
recorded:

* ``usage_limited`` → gated until the provider's reset (``retry_at``), or for
  ``[dispatch] usage_limit_fallback``; it then resumes by itself;
* ``auth`` → gated until a person resumes (``vigil resume``);
* ``refused`` (the agent CLI would not start: missing, a flag it rejects, refused
  as root …) → gated until a person resumes, the reason saying what to change;
* ``[limits] max_consecutive_failures`` failed attempts in a row → gated until a
  person resumes; a success or the gate itself resets the count (canceled and
  usage-limited attempts leave it alone: they say nothing about the work);
* a task that ended ``failed`` → a ``task_failed`` alert;
* an attempt in which the agent was refused actions → a ``task_denied`` alert (it
  never gates: a denial is the wall working, not the loop failing).

Before running a claimed task the loop asks ``needs_approval(task)``: a task whose
skill says ``requires_approval: true`` and that no person approved yet goes back
unrun (``Store.hold_for_approval``) until ``vigil task approve``. Then it asks
``deferred_until(task)``: a task whose sensor is over its ``[budget] per_sensor``
cap goes back unrun, due later (``Store.release_unrun``).

Every automatic gate change, auth failure and budget warning is sent to the alert
hook. An automatic gate never replaces a stronger stop (``vigil.gate.trip``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from dispatch.alerts import AlertHook, make_event
from dispatch.skills import load_skills
from vigil.budget import WINDOW_MS, budget_use, claim_once, claim_warnings
from vigil.clock import Clock
from vigil.config import Settings
from vigil.errors import SkillError
from vigil.gate import GATE_KEY, GateState, LoopGate, lift_expired, read_gate, trip
from vigil.models import ApprovalState, Outcome, OutcomeKind, Task, TaskStatus
from vigil.store import CostGroup, Store

log = logging.getLogger("vigil.guard")

GUARD_KEY = "guard"  # loop_state: {"consecutive_failures": int}
BUDGET_RECHECK_MS = 60_000  # over budget, how soon spend leaving the window is noticed
# A sensor over its cap: how long its tasks wait before they are looked at again.
# Long, because each look claims and releases the task (two audit events).
SENSOR_RECHECK_MS = 3_600_000
ACTOR = "guard"
# Attempts that count as failures of the work itself. Not here: success (resets),
# canceled (a person's choice), usage_limited, auth and refused (they gate on their own),
# interrupted (the dispatcher stopped).
FAILURES = frozenset(
    {
        OutcomeKind.FAILED,
        OutcomeKind.TRANSIENT,
        OutcomeKind.BUDGET,
        OutcomeKind.TURNS,
        OutcomeKind.CONTEXT,
        OutcomeKind.TIMEOUT,
    }
)


@dataclass(frozen=True, slots=True)
class GateDecision:
    """Whether the loop may claim now.

    ``max_priority`` None: any task; p: only tasks with priority ≤ p (over budget).
    ``until``: when a closed gate opens by itself (None: on a person's word, or
    open now); over budget, when to ask again. ``reason`` is one line for logs and
    status.
    """

    may_claim: bool
    max_priority: int | None = None
    reason: str = ""
    until: int | None = None


class Guard:
    """Guardrails around one dispatcher. All state lives in the store (``loop_state``),
    so a restarted dispatcher, the CLI and the TUI all see the same gate."""

    def __init__(self, store: Store, settings: Settings, clock: Clock, alerts: AlertHook) -> None:
        self._store = store
        self._settings = settings
        self._clock = clock
        self._alerts = alerts
        # Failed attempts in a row, as stored under GUARD_KEY (None: not read yet).
        # Only this dispatcher writes it, so the copy saves a commit per success.
        self._failures: int | None = None

    async def may_claim(self, now_ms: int) -> GateDecision:
        """Read the gate (lifting an expired one) and the budget; fire due warnings.
        One read of the loop state, plus one of the spend when a cap is set."""
        values = await self._store.loop_values()
        gate = LoopGate.from_json(values.get(GATE_KEY))
        if gate.state is GateState.GATED and gate.is_open(now_ms):
            lifted = await lift_expired(self._store, by=ACTOR, now_ms=now_ms, raw=values.get(GATE_KEY), read=False)
            if lifted is not None:
                self._gate_changed(f"loop resumed by itself: {lifted.reason} is over", "running", now_ms)
            gate = await read_gate(self._store)
        if not gate.is_open(now_ms):
            return GateDecision(False, reason=f"{gate.state}: {gate.reason}", until=gate.until)
        budget = self._settings.budget
        if budget.daily_usd is None:
            return GateDecision(True)
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
            return GateDecision(True, max_priority=budget.urgent_priority, reason=reason, until=until)
        return GateDecision(True)

    async def after_outcome(self, task: Task, outcome: Outcome) -> None:
        """Trip the automatic gates ``outcome`` calls for; ``task`` is as recorded."""
        now_ms = self._clock.now_ms()
        if outcome.kind is OutcomeKind.USAGE_LIMITED:
            fallback = now_ms + self._settings.dispatch.usage_limit_fallback_ms
            until = max(outcome.retry_at, now_ms) if outcome.retry_at is not None else fallback
            await self._trip(f"usage limit ({outcome.error or 'no detail'})", until, now_ms)
        elif outcome.kind is OutcomeKind.AUTH:
            message = f"task #{task.id}: the agent CLI could not authenticate: {outcome.error or 'no detail'}"
            self._alerts.notify(make_event("auth_failed", message, now_ms, task_id=task.id, error=outcome.error))
            await self._trip(
                f"auth failure ({outcome.error or 'no detail'}); fix credentials, then resume", None, now_ms
            )
        elif outcome.kind is OutcomeKind.REFUSED:
            await self._trip(
                f"the agent CLI refused to start ({outcome.error or 'no detail'}); "
                "change its settings in vigil.toml, then resume",
                None,
                now_ms,
            )
        await self._count_failures(outcome, now_ms)
        if outcome.permission_denials:
            denials = outcome.permission_denials
            review = " it awaits review (vigil task approve or reject)" if task.awaiting_review else ""
            message = f"task #{task.id}: {len(denials)} action(s) denied to the agent;{review} first: {denials[0]}"
            details = {"task_id": task.id, "subject": task.subject, "denials": list(denials)}
            details.update(status=str(task.status), awaiting_review=task.awaiting_review)
            self._alerts.notify(make_event("task_denied", message, now_ms, **details))
        if task.status is TaskStatus.FAILED:
            message = f"task #{task.id} failed for good: {task.subject}"
            details = {"task_id": task.id, "subject": task.subject, "attempts": task.attempt_count}
            details.update(outcome=str(outcome.kind), error=outcome.error)
            self._alerts.notify(make_event("task_failed", message, now_ms, **details))

    async def deferred_until(self, task: Task) -> int | None:
        """When a claimed ``task`` may run, if not now: the sensor that started its
        chain is over its ``[budget] per_sensor`` cap (urgent tasks are exempt, as
        for the daily cap). None: run it now. The first deferral per sensor and
        window sends a ``budget_warning``."""
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

    def needs_approval(self, task: Task) -> bool:
        """Whether ``task`` must wait for a person: a skill of it requires approval and
        no person approved it. An unreadable skill is left to the prompt builder,
        which reports it as the task's failure."""
        if task.approval == ApprovalState.APPROVED or not task.skills:
            return False
        try:
            skills = load_skills(self._settings.skills_dir, task.skills)
        except SkillError:
            return False
        return any(skill.requires_approval for skill in skills)

    async def _count_failures(self, outcome: Outcome, now_ms: int) -> None:
        if outcome.kind is not OutcomeKind.SUCCESS and outcome.kind not in FAILURES:
            return
        if self._failures is None:
            raw = (await self._store.loop_values()).get(GUARD_KEY)
            stored = raw.get("consecutive_failures", 0) if isinstance(raw, dict) else 0
            self._failures = stored if isinstance(stored, int) else 0
        count = 0 if outcome.kind is OutcomeKind.SUCCESS else self._failures + 1
        limit = self._settings.limits.max_consecutive_failures
        tripped = bool(limit) and count >= limit
        # Counting starts afresh once the gate is tripped, so after `vigil resume`
        # it takes another run of failures to gate the loop again.
        stored_count = 0 if tripped else count
        if stored_count != self._failures:
            await self._store.set_loop_values({GUARD_KEY: {"consecutive_failures": stored_count}})
            self._failures = stored_count
        if tripped:
            await self._trip(f"{count} failed runs in a row; look at the last ones, then resume", None, now_ms)

    async def _trip(self, reason: str, until: int | None, now_ms: int) -> None:
        gate = await trip(self._store, reason=reason, until=until, by=ACTOR, now_ms=now_ms)
        if gate is None:
            log.info("the loop is already stopped for longer; not gating it for: %s", reason)
            return
        self._gate_changed(f"loop gated: {reason}", "gated", now_ms, gate)

    def _gate_changed(self, message: str, state: str, now_ms: int, gate: LoopGate | None = None) -> None:
        fields: dict[str, object] = {"state": state}
        if gate is not None:
            fields.update(reason=gate.reason, until=gate.until)
        self._alerts.notify(make_event("gate_changed", message, now_ms, **fields))
