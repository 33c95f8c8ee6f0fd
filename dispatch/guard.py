"""The dispatcher's guard: may the loop claim, and which gate an outcome trips.

Before each claim the loop asks ``may_claim(now)``:

* paused by a person, or gated → no claim (``until``: when to ask again);
* a gate whose ``until`` has passed (a usage limit's reset) is lifted here, by itself;
* over the rolling-24 h budget → claim only tasks a person made urgent, priority ≤
  ``urgent_priority`` (``vigil.budget.exempt``)
  (``until``: when to look at the budget again, so an idle loop does not spin);
* budget warnings that are due fire here, each once per window.

After each attempt the loop calls ``after_outcome(task, outcome)`` with the task as
recorded:

* ``usage_limited`` → the account the run used is limited until the reset the run
  named (``retry_at``), or, when it named none, for a backoff that starts at
  ``[dispatch] retry_backoff`` and doubles with each limit of that account in a row,
  up to ``usage_limit_fallback``. The loop is gated only when every account of the
  task's executor and of its fallbacks is limited, until the earliest reset. A
  limit of one model's week (``seven_day_opus``, ``seven_day_sonnet``) never gates
  the loop: it stops its account only for tasks on that model family (and tasks
  that name no model, whose model cannot be known), which wait for its reset
  (``deferred``) while the others run (``dispatch.accounts``). A
  limit that no reset ends (a spend limit with none named, usage turned off:
  ``vigil.limit_kinds.person_fix``) holds the account for a person instead
  (``dispatch.account_limits``); with no account left the loop waits for them;
* any outcome whose CLI reported its account's limit windows → kept per account
  for ``vigil status``; an account whose ``reserve`` is reached waits for its
  window's reset (``dispatch.account_limits``);
* ``transient`` and ``stalled`` (overload, 5xx, the network, a crash, a silent
  agent) → the loop backs off by how long the outage has lasted, not by how many
  attempts failed: the longest step of ``[dispatch] outage_backoff`` (30 s, 1 m,
  2 m, 5 m, 10 m) not longer than the outage so far (``dispatch.holds``); it
  resumes by itself with one task (a probe), and an attempt that reaches the
  model ends the outage;
* ``auth`` → gated until a person resumes (``vigil resume``);
* ``refused`` (the agent CLI would not start: missing, a flag it rejects, refused
  as root …) → gated until a person resumes, the reason saying what to change;
* ``auth``, ``refused`` or ``sandbox_failed`` of a run on a *fallback* executor
  (``[dispatch] fallback``) → that account is skipped for ``FALLBACK_RECHECK_MS``
  (one ``fallback_skipped`` alert, not one per task) and, with no account left
  anywhere, the loop waits for the first reset: a broken fallback never turns a
  limit that ends by itself into a person's job;
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
must not make a hot loop. Alerts (``dispatch.holds``): a gate a person must lift
alerts at once, saying what to do; one that ends by itself only when its incident
held the loop past ``[alerts] held_loop``, and then once more when it is over.

Before running a claimed task the loop asks ``needs_approval(task, skills)``: a
task whose skill says ``requires_approval: true`` and that no person approved yet
goes back unrun (``Store.put_back``, blocked) until ``vigil task approve``. Then it
asks ``deferred(task, skills)``: a task whose sensor is over its ``[budget]
per_sensor`` cap, or whose every account is limited (for its model) while its
skill forbids fallback or no fallback is free, goes back unrun, due later
(``Store.put_back``).

Gates a person must lift, long holds, skipped fallbacks, auth failures and budget
warnings are sent to the alert hook. An automatic gate never replaces a stronger
stop (``vigil.gate.trip``).
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
from dispatch.holds import ACTOR, Holds, outage_wait_ms
from dispatch.skills import Skill
from vigil.accounts import DEFAULT_ACCOUNT, HELD_UNTIL, account_key, account_worked, limit_account, read_limits
from vigil.budget import WINDOW_MS, budget_use, claim_once, claim_warnings, exempt
from vigil.clock import Clock, iso_utc
from vigil.config import AGENT_EXECUTORS, Settings
from vigil.fate import Policy
from vigil.gate import AUTH, BACKOFF, FAILED_IN_A_ROW, GATE_KEY, REFUSED, USAGE, GateState, LoopGate, lift_expired
from vigil.limit_kinds import last_rejected, model_family, person_fix
from vigil.models import ApprovalState, Outcome, OutcomeKind, Task, TaskStatus
from vigil.store import CostGroup, Store

log = logging.getLogger("vigil.guard")

# loop_state: {"consecutive_failures": int, "transient_failures": int, "outage_since": epoch ms or 0}
GUARD_KEY = "guard"
COUNTS = ("consecutive_failures", "transient_failures", "outage_since")
BUDGET_RECHECK_MS = 60_000  # over budget, how soon spend leaving the window is noticed
# A sensor over its cap: how long its tasks wait before they are looked at again.
# Long, because each look claims and releases the task (two audit events).
SENSOR_RECHECK_MS = 3_600_000
# A fallback that could not start: how long it is skipped before a run tries it again
# (quietly: its alert was sent once).
FALLBACK_RECHECK_MS = 3_600_000
SKIPPED = "skipped, cannot start: "  # the reason of a fallback's account while it is skipped
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
# A run on a fallback executor that ended so: the fallback cannot work here; skipped.
UNUSABLE = frozenset({OutcomeKind.AUTH, OutcomeKind.REFUSED, OutcomeKind.SANDBOX_FAILED})


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
    by_person: bool = False  # only tasks a person made that urgent (over budget: ``vigil.budget.exempt``)


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
        self._holds = Holds(store, settings, alerts)  # gating, and telling a person only what needs one
        self._values: dict[str, object] = {}  # the loop state as may_claim last read it

    async def may_claim(self, now_ms: int) -> ClaimDecision:
        """Read the gate (lifting an expired one) and the budget; fire due warnings.
        One read of the loop state, plus one of the spend when a cap is set."""
        values = await self._store.loop_values()
        self._values = values
        stored = values.get(GATE_KEY)
        gate = LoopGate.from_json(stored)
        if gate.state is GateState.GATED and gate.is_open(now_ms):
            lifted = await lift_expired(self._store, by=ACTOR, now_ms=now_ms, stored=stored)
            if lifted is not None:
                # said once an attempt gets through: the first one may meet the same wall
                self._holds.lifted = lifted
                log.info("the gate lifted by itself: %s is over", lifted.reason)
            stored = (await self._store.loop_values()).get(GATE_KEY)
            gate = LoopGate.from_json(stored)
        if not gate.is_open(now_ms):
            until = await self._holds.held(gate, stored, now_ms)
            return ClaimDecision(False, reason=f"{gate.state}: {gate.reason}", until=until)
        probe_until = self._holds.probing(gate, now_ms)
        if probe_until is not None:
            return ClaimDecision(False, reason="another lane probes the provider after an outage", until=probe_until)
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
            reason = (
                f"over budget (${use.spent_usd:.2f} of ${use.cap_usd:.2f} in 24 h): only tasks a person made urgent"
            )
            until = now_ms + BUDGET_RECHECK_MS
            return ClaimDecision(True, max_priority=budget.urgent_priority, reason=reason, until=until, by_person=True)
        return ClaimDecision(True)

    async def after_outcome(self, task: Task, outcome: Outcome) -> None:
        """Trip the automatic gates ``outcome`` calls for; ``task`` is as recorded."""
        now_ms = self._clock.now_ms()
        gated = False
        executor = task.executor or self._settings.dispatch.executor
        account = f"{executor}:{outcome.account or DEFAULT_ACCOUNT}"
        if outcome.limits and outcome.account is not None:
            call = await record_limits(self._store, self._settings, executor, outcome, now_ms)
            gated = call is not None and await self._holds.trip(call.reason, call.until, now_ms, call.kind, call.fix)
        if outcome.kind in UNUSABLE and self._is_fallback(executor):
            gated = await self._skip_fallback(task, outcome, now_ms)
        elif outcome.kind is OutcomeKind.USAGE_LIMITED:
            gated = await self._account_limited(task, outcome, now_ms)
        elif outcome.kind is OutcomeKind.AUTH:
            message = f"task #{task.id}: the agent CLI could not authenticate: {outcome.error or 'no detail'}"
            fix = f"log {account} in again (`vigil doctor` checks every account), then run: vigil resume"
            event = make_event("auth_failed", message, now_ms, task_id=task.id, error=outcome.error, fix=fix)
            self._alerts.notify(event)
            reason = f"auth failure on {account} ({outcome.error or 'no detail'}); fix its login, then resume"
            gated = await self._holds.trip(reason, None, now_ms, AUTH, fix)
        elif outcome.kind is OutcomeKind.REFUSED:
            reason = (
                f"the agent CLI refused to start ({outcome.error or 'no detail'}); "
                "change its settings in vigil.toml, then resume"
            )
            fix = f"change [executors.{executor}] in vigil.toml (see `vigil doctor`), then run: vigil resume"
            gated = await self._holds.trip(reason, None, now_ms, REFUSED, fix)
        elif outcome.kind is OutcomeKind.SUCCESS and outcome.account is not None and task.executor:
            key = account_key(task.executor, outcome.account)
            await account_worked(self._store, key, read_limits(self._values))
        if not (outcome.kind in UNUSABLE and self._is_fallback(executor)):  # the fallback's fault, not the work's
            gated = await self._count_failures(outcome, now_ms) or gated
        if not gated and outcome.kind in REACHED:
            await self._holds.confirm_resumed(now_ms)
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
        limited = await self._accounts_limited(task, skills)
        if limited is not None:
            return limited
        later = await self._sensor_over_budget(task)
        return None if later is None else Deferral(later, "its sensor is over its daily budget")

    async def _accounts_limited(self, task: Task, skills: Sequence[Skill]) -> Deferral | None:
        executor = next((s.executor for s in skills if s.executor), None) or self._settings.dispatch.executor
        if executor not in AGENT_EXECUTORS:
            return None
        limits = read_limits(await self._store.loop_values())
        now_ms = self._clock.now_ms()
        cli = self._settings.agent_cli(executor)
        # as choose_executor picks it: the task's, its skill's, the executor's configured one
        model = task.model or next((s.model for s in skills if s.model), None) or (cli.model if cli else None)
        fall_back = all(s.fallback for s in skills)
        where = pick(self._settings, executor, limits, now_ms, may_fall_back=fall_back, model=model)
        if where.account is not None or where.free_at is None or where.free_at <= now_ms:
            return None
        if where.free_at >= HELD_UNTIL:  # every account needs a person: look again after a while
            return Deferral(now_ms + SENSOR_RECHECK_MS, "every account it may run on needs a person")
        return Deferral(where.free_at, f"every account it may run on is limited until {iso_utc(where.free_at)}")

    async def _sensor_over_budget(self, task: Task) -> int | None:
        caps = self._settings.budget.per_sensor
        if not caps or await exempt(self._store, task, self._settings.budget):
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
            return call is not None and await self._holds.trip(call.reason, call.until, now_ms, call.kind, call.fix)
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
        # a fallback limited too: the first account free again may be the configured executor's
        where = pick(self._settings, dispatch.executor if self._is_fallback(executor) else executor, limits, now_ms)
        if where.account is not None:
            log.info(
                "account %s is limited until %s; tasks run on %s:%s", key, iso_utc(until), where.executor, where.account
            )
            return False
        family = model_family(kind)
        if family is not None:  # one model's week: tasks on the others run; its own wait (``deferred``)
            log.info("account %s is limited for %s tasks until %s; other tasks run", key, family, iso_utc(until))
            return False
        reason = f"usage limit: every account is limited ({key}: {detail})"
        # an executor that has no accounts (a command that exits as limited) waits as one
        return await self._holds.trip(reason, where.free_at or until, now_ms, USAGE)

    def _is_fallback(self, executor: str) -> bool:
        """Whether ``executor`` ran as a fallback: one of ``[dispatch] fallback``, not
        the configured executor (whose failing to start every task meets: a person's)."""
        dispatch = self._settings.dispatch
        return executor != dispatch.executor and executor in dispatch.fallback

    async def _skip_fallback(self, task: Task, outcome: Outcome, now_ms: int) -> bool:
        """A run on a fallback executor could not start (not logged in, refused, its
        sandbox broken): skip that account for ``FALLBACK_RECHECK_MS``, alert once
        (the same failure again, at a recheck, stays quiet), and with no account
        left anywhere wait for the first reset. Returns whether the loop was gated."""
        executor = task.executor or self._settings.dispatch.executor
        key = account_key(executor, outcome.account or DEFAULT_ACCOUNT)
        detail = f"{outcome.kind}: {outcome.error or 'no detail'}"
        reason = SKIPPED + detail
        earlier = read_limits(await self._store.loop_values()).get(key)
        until, floor = now_ms + FALLBACK_RECHECK_MS, now_ms + self._settings.dispatch.min_gate_ms
        in_a_row = (earlier.in_a_row if earlier is not None else 0) + 1
        limits = await limit_account(self._store, key, until=until, reason=reason, now_ms=now_ms, in_a_row=in_a_row)
        if earlier is None or earlier.reason != reason:
            message = f"fallback {key} cannot start ({detail}): skipped until {iso_utc(until)}"
            fix = (
                f"fix {executor} (`vigil doctor` checks every fallback and account), "
                "or take it out of [dispatch] fallback; meanwhile tasks wait for a free account"
            )
            fields = {"executor": executor, "account": key, "task_id": task.id, "error": outcome.error}
            self._alerts.notify(make_event("fallback_skipped", message, now_ms, **fields, until=until, fix=fix))
        else:
            log.info("fallback %s still cannot start; skipped until %s", key, iso_utc(until))
        where = pick(self._settings, self._settings.dispatch.executor, limits, now_ms)
        if where.account is not None or where.free_at is None:
            return False
        why = f"usage limit: every account is limited or cannot start ({key}: {detail})"
        return await self._holds.trip(why, max(where.free_at, floor), now_ms, USAGE)

    async def _count_failures(self, outcome: Outcome, now_ms: int) -> bool:
        """Count failures of the work and transient failures in a row; gate the loop
        for a person, or back off. Returns whether the loop was gated."""
        if outcome.kind not in REACHED and outcome.kind not in TRANSIENTS:
            return False
        counts = await self._read_counts()
        failures, transients, since = (counts[name] for name in COUNTS)
        if outcome.kind in TRANSIENTS:
            transients += 1
            since = since or now_ms  # the outage began with its first transient failure
        else:  # the model was reached: the provider is up again
            transients, since = 0, 0
            if outcome.kind is OutcomeKind.SUCCESS:
                failures = 0
            elif outcome.kind in FAILURES:
                failures += 1
        limit = self._settings.limits.max_consecutive_failures
        tripped = bool(limit) and failures >= limit
        # Counting starts afresh once the gate is tripped, so after `vigil resume`
        # it takes another run of failures to gate the loop again.
        stored = dict(zip(COUNTS, (0 if tripped else failures, transients, since), strict=True))
        if stored != counts:
            await self._store.set_loop_values({GUARD_KEY: stored})
            self._counts = stored
        if tripped:
            reason = f"{failures} failed runs in a row; look at the last ones, then resume"
            fix = (
                "look at the failed runs (vigil task list --status failed; vigil task show ID), "
                "fix what they need (a skill, the config, the repository), then run: vigil resume"
            )
            return await self._holds.trip(reason, None, now_ms, FAILED_IN_A_ROW, fix)
        if outcome.kind in TRANSIENTS:
            dispatch = self._settings.dispatch
            wait = max(outage_wait_ms(dispatch.outage_backoff_ms, now_ms - since), dispatch.min_gate_ms)
            log.info("backing off after a transient failure: %s", outcome.error or outcome.kind)
            reason = f"backing off after {transients} transient failure{'' if transients == 1 else 's'}"
            return await self._holds.trip(reason, now_ms + wait, now_ms, BACKOFF)
        return False

    async def _read_counts(self) -> dict[str, int]:
        if self._counts is None:
            raw = (await self._store.loop_values()).get(GUARD_KEY)
            raw = raw if isinstance(raw, dict) else {}
            self._counts = {name: value if isinstance(value := raw.get(name, 0), int) else 0 for name in COUNTS}
        return self._counts
