"""``vigil status``: what the loop is doing, how the queue is, how the sensors are —
read from the database alone, so it works from any terminal.

The loop's first line is ``vigil.liveness``'s one truth (running, standby, stopped
cleanly, died, paused, gated, backing off), the same the TUI's header and ``vigil
doctor`` say. A dispatcher counts as alive when its heartbeat (``loop_state``,
written every ``[dispatch] heartbeat`` while idle or running) is younger than
``STALE_BEATS`` intervals and it did not say ``stopped``
(``DispatcherHeartbeat.alive``). On the dispatcher's own machine the lock it holds
says more, and wins (``LockProbe``): the kernel frees it the moment its holder
dies, so a killed dispatcher is dead at once, not after its heartbeat goes stale;
and it stays held while the holder lives, so a dispatcher that cannot write its
heartbeat (a full disk) is not called dead.
"""

from __future__ import annotations

from dataclasses import dataclass

from vigil.accounts import account_line, accounts_json
from vigil.budget import WINDOW_MS, BudgetUse, budget_json, budget_line, budget_use
from vigil.clock import iso_utc
from vigil.config import Settings
from vigil.durations import format_duration
from vigil.gate import GATE_KEY, LoopGate, gate_json
from vigil.liveness import loop_health
from vigil.models import (
    CHAT_HEALTH_KEY,
    HEARTBEAT_KEY,
    NOTIFY_KEY,
    REJECTED_INSERTS_KEY,
    DispatcherHeartbeat,
    SensorState,
    TaskStatus,
)
from vigil.printable import SUBJECT_SHOWN_CHARS, TEXT_SHOWN_CHARS, capped, printable
from vigil.render import failing_notifiers
from vigil.store import Store

QUESTIONS_SHOWN = 10  # waiting tasks whose questions `vigil status` lists, newest first


@dataclass(frozen=True)
class LockProbe:
    """What the dispatcher lanes' locks say, probed on this machine: ``held`` (a
    process holds one now; None: cannot be told), and ``host``, this machine's name
    in heartbeats (a lock tells nothing of a dispatcher on another machine)."""

    held: bool | None
    host: str


def _dispatcher_json(
    beat: DispatcherHeartbeat | None, settings: Settings, now_ms: int, lock: LockProbe | None
) -> dict[str, object]:
    held = None if lock is None or (beat is not None and beat.host != lock.host) else lock.held
    if beat is None:
        if held:  # started, no heartbeat written yet
            return {"alive": True, "seen": True, "lock_held": True, "heartbeat_fresh": False}
        return {"alive": False, "seen": False}
    age_ms = max(0, now_ms - beat.heartbeat_at)
    fresh = beat.alive(now_ms, settings.dispatch.heartbeat_ms)
    alive = fresh if held is None else held
    return {
        "alive": alive,
        "seen": True,
        "lock_held": held,
        "heartbeat_fresh": fresh,
        "state": beat.state,
        "owner": beat.owner,
        "pid": beat.pid,
        "host": beat.host,
        "since": iso_utc(beat.since),
        "heartbeat_at": iso_utc(beat.heartbeat_at),
        "heartbeat_age_s": age_ms // 1000,
    }


def _sensor_json(state: SensorState) -> dict[str, object]:
    return {
        "name": state.name,
        "enabled": state.enabled,
        "healthy": state.last_status in (None, "ok"),
        "last_run_at": iso_utc(state.last_run_at),
        "last_status": state.last_status,
        "last_error": state.last_error,
        "consecutive_failures": state.consecutive_failures,
        "created_last": state.created_last,
        "next_due_at": iso_utc(state.next_due_at),
    }


async def gather_status(
    store: Store, settings: Settings, now_ms: int, lock: LockProbe | None = None
) -> dict[str, object]:
    """The status as a JSON-ready dict with stable field names (``vigil status --json``).
    ``lock``: what the lanes' locks say (None: judge by the heartbeat alone)."""
    beat = DispatcherHeartbeat.from_json((await store.loop_values()).get(HEARTBEAT_KEY))
    dispatcher = _dispatcher_json(beat, settings, now_ms, lock)
    current = None
    if dispatcher["alive"] and beat is not None:
        # The task the owner holds, not the heartbeat's task_id: the heartbeat is
        # written at most once a second when tasks run back to back.
        held = [t for t in await store.active_tasks() if t.claimed_by == beat.owner]
        if held:
            task = held[0]
            started = task.started_at or beat.heartbeat_at
            current = {
                "id": task.id,
                "subject": task.subject,
                "started_at": iso_utc(started),
                "elapsed_s": max(0, now_ms - started) // 1000,
                # the agent CLI's own live word ("API retry 3/10, next in 9 s"), if any
                "note": beat.note if beat.task_id == task.id else None,
            }
    dispatcher["task"] = current
    counts = await store.count_by_status()
    next_due = await store.next_due_at()
    queue: dict[str, object] = {str(status): counts[status] for status in TaskStatus}
    queue["next_due_at"] = iso_utc(next_due)
    queue["next_due_in_s"] = None if next_due is None else max(0, next_due - now_ms) // 1000
    loop_values = await store.loop_values()
    use = await budget_use(store, settings.budget, now_ms)
    lock_held, host = (None, "") if lock is None else (lock.held, lock.host)
    health = loop_health(loop_values, now_ms, settings.dispatch.heartbeat_ms, lock_held=lock_held, host=host)
    attention = await store.attention(now_ms - WINDOW_MS)
    asking = await store.list_tasks(statuses=[TaskStatus.WAITING], limit=QUESTIONS_SHOWN)
    return {
        "now": iso_utc(now_ms),
        # the one word the TUI's header and `vigil doctor` say too (vigil.liveness)
        "loop": {
            "state": str(health.condition),
            "summary": health.summary(),
            "standby": [{"pid": p.pid, "host": p.host, "since": iso_utc(p.since)} for p in health.standby],
        },
        "dispatcher": dispatcher,
        "gate": gate_json(LoopGate.from_json(loop_values.get(GATE_KEY)), now_ms),
        "accounts": accounts_json(settings, loop_values, now_ms),
        "budget": budget_json(use),
        "rejected_inserts": loop_values.get(REJECTED_INSERTS_KEY, {"total": 0}),
        # each [alerts] notify URL whose last send failed, one line each
        "notifiers_failing": failing_notifiers(loop_values.get(NOTIFY_KEY)),
        "chat": _chat_json(settings, loop_values.get(CHAT_HEALTH_KEY)),
        "queue": queue,
        "attention": {
            "awaiting_review": attention.awaiting_review,
            "awaiting_approval": attention.awaiting_approval,
            "denied_runs_24h": attention.denied_runs,
        },
        # the newest waiting tasks, each with its agent's question
        "questions": [
            {"id": t.id, "subject": t.subject, "question": t.question, "choices": list(t.choices)} for t in asking
        ],
        # a sensor removed from vigil.toml keeps its row in the store: not shown
        "sensors": [_sensor_json(s) for s in await store.sensor_states() if s.name in settings.sensor_names],
        # the URL's password is masked: this output is pasted into chats and issues
        "store": {"backend": "sqlite" if settings.store.url is None else "postgresql", "at": settings.store.location},
    }


def _chat_json(settings: Settings, health: object) -> dict[str, object] | None:
    """The Telegram bot as its last record says (vigil.chat): ``up``, ``down`` (with
    why), ``stopped`` or ``unknown`` (it never ran), and since when; None without
    [chat.telegram]."""
    if settings.telegram is None:
        return None
    if not isinstance(health, dict):
        return {"state": "unknown", "since": None, "error": None}
    since = health.get("since")
    return {
        "state": str(health.get("state")),
        "since": iso_utc(since if isinstance(since, int) else None),
        "error": health.get("error"),
    }


def _count(number: object) -> str:
    """``9,701``: counts are written with thousands separators everywhere."""
    return f"{number:,}" if isinstance(number, int) else str(number)


def _ago(seconds: object) -> str:
    return format_duration(int(str(seconds)) * 1000)


def _task_lines(d: dict[str, object]) -> list[str]:
    """What the live dispatcher runs, under the loop's line."""
    task = d.get("task")
    if not isinstance(task, dict):
        return []
    subject = capped(str(task["subject"]), SUBJECT_SHOWN_CHARS) if task["subject"] is not None else "?"
    lines = [f"  running task #{task['id']} for {_ago(task['elapsed_s'])}: {subject}"]
    if task.get("note"):
        lines.append(f"  agent: {capped(str(task['note']), TEXT_SHOWN_CHARS)}")
    return lines


def render_status(status: dict[str, object]) -> str:
    """Plain text for people (one fact per line)."""
    dispatcher = status["dispatcher"]
    queue = status["queue"]
    sensors = status["sensors"]
    assert isinstance(dispatcher, dict)
    assert isinstance(queue, dict)
    assert isinstance(sensors, list)
    loop = status["loop"]
    assert isinstance(loop, dict)
    lines = [f"loop: {loop['summary']}", *_task_lines(dispatcher)]
    accounts = status.get("accounts")
    if isinstance(accounts, list) and accounts:
        lines.append("accounts:")
        lines += [f"  {account_line(account)}" for account in accounts if isinstance(account, dict)]
    budget = status.get("budget")
    if isinstance(budget, dict) and budget["cap_usd"] is not None:
        lines.append(budget_line(BudgetUse(float(str(budget["spent_usd"])), float(str(budget["cap_usd"])), 0)))
    rejected = status.get("rejected_inserts")
    if isinstance(rejected, dict) and rejected.get("total"):
        last = f"{rejected.get('last_source')}: {rejected.get('last_reason')}"
        lines.append(f"flood limits: {_count(rejected['total'])} task(s) refused so far (last: {last})")
    counts = ", ".join(f"{_count(queue[str(s)])} {s}" for s in TaskStatus)
    lines.append(f"queue: {counts}")
    if queue["next_due_in_s"] is None:
        lines.append("  nothing pending is due")
    elif queue["next_due_in_s"] == 0:
        lines.append("  next pending task: due now")
    else:
        lines.append(f"  next pending task: due in {_ago(queue['next_due_in_s'])} ({queue['next_due_at']})")
    lines.extend(_attention_lines(status.get("attention")))
    lines.extend(_question_lines(status.get("questions")))
    chat = status.get("chat")
    if isinstance(chat, dict):
        why = f": {chat['error']}" if chat["state"] == "down" else ""
        since = f" since {chat['since']}" if chat["since"] else ""
        lines.append(f"chat: telegram {chat['state']}{since}{why}")
    failing = status.get("notifiers_failing")
    if isinstance(failing, list):
        lines.extend(f"alerts: {line}" for line in failing)
    lines.extend(_sensor_lines(sensors))
    where = status.get("store")
    if isinstance(where, dict):
        lines.append(f"store: {where['backend']} at {where['at']}")
    return printable("\n".join(lines))  # subjects, notes, errors: text from outside


def _attention_lines(attention: object) -> list[str]:
    """What waits for a person; nothing when nothing does."""
    if not isinstance(attention, dict):
        return []
    lines = []
    waiting = [
        f"{_count(attention[key])} awaiting {what} (vigil task approve/reject ID)"
        for key, what in (("awaiting_review", "review"), ("awaiting_approval", "approval"))
        if attention.get(key)
    ]
    if waiting:
        lines.append("needs a person: " + "; ".join(waiting))
    if attention.get("denied_runs_24h"):
        lines.append(
            f"denied actions: {attention['denied_runs_24h']} run(s) in the last 24 h had actions refused to the agent "
            "(vigil task list shows which tasks; vigil task show ID, what)"
        )
    return lines


def _question_lines(questions: object) -> list[str]:
    """The waiting tasks' questions, each with how to answer it."""
    if not isinstance(questions, list) or not questions:
        return []
    lines = ['waiting for an answer (vigil task answer ID "…"):']
    for q in questions:
        choices = f" [{' | '.join(str(c) for c in q['choices'])}]" if q.get("choices") else ""
        subject, question = capped(str(q["subject"]), SUBJECT_SHOWN_CHARS), capped(str(q["question"]), TEXT_SHOWN_CHARS)
        lines.append(f"  #{q['id']} {subject}: {question}{capped(choices, TEXT_SHOWN_CHARS)}")
    return lines


def _sensor_lines(sensors: list[dict[str, object]]) -> list[str]:
    lines: list[str] = []
    if not sensors:
        lines.append("sensors: none have run")
    else:
        lines.append("sensors:")
        width = max(len(str(s["name"])) for s in sensors)
        for s in sensors:
            state = "disabled" if not s["enabled"] else (s["last_status"] or "not run yet")
            line = f"  {str(s['name']).ljust(width)}  {state}"
            if s["last_run_at"]:
                line += f", last run {s['last_run_at']}"
            if s["consecutive_failures"]:
                line += f", {s['consecutive_failures']} failure(s) in a row"
            if s["last_error"] and not s["healthy"]:
                line += f": {str(s['last_error']).splitlines()[0][:120]}"
            lines.append(line)
    return lines
