"""What an interrupted run left: its session and that session's usage, read from
the transcript and the agent CLI's own session file (``dispatch.salvage``); the
real CLIs' crash is in tests/agents/test_crash_resume.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dispatch.agents.claude.session import session_usage
from dispatch.agents.codex.usage import thread_usage
from dispatch.agents.pricing import TokenUsage
from dispatch.attempt import transcript_path
from dispatch.recovery import recover_orphans
from dispatch.salvage import Salvager
from dispatch.worker_ids import this_host
from vigil.clock import ManualClock, iso_utc, parse_iso_ms
from vigil.config import Settings
from vigil.models import NewTask, Outcome, OutcomeKind, Run
from vigil.store.sqlite import SqliteStore

DEAD = f"{this_host()}:{4_194_304 + 7}:dead01"  # a dispatcher of this machine whose pid is gone
SESSION = "c804596f-e6bb-4993-b4f6-370fe5bb8e11"
STARTED_MS = 1_796_000_000_000


def _at(ms: int) -> str:
    return str(iso_utc(ms)).replace("Z", ".000Z")


def _answer(message_id: str, at_ms: int, model: str = "claude-opus-4-8", tokens: int = 100) -> dict[str, Any]:
    rest = 1 if tokens else 0  # no tokens: an answer no model gave
    usage = {
        "input_tokens": tokens,
        "output_tokens": 10 * rest,
        "cache_read_input_tokens": 5 * rest,
        "cache_creation_input_tokens": rest,
    }
    return {"type": "assistant", "timestamp": _at(at_ms), "message": {"id": message_id, "model": model, "usage": usage}}


def _lines(path: Path, records: list[Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def test_iso_times_with_an_offset_are_read_as_epoch_ms() -> None:
    assert parse_iso_ms("2026-12-04T21:38:34.419Z") == 1_796_420_314_419
    assert parse_iso_ms("2026-12-04T21:38:34") is None  # no offset: which zone?
    assert parse_iso_ms("yesterday") is None
    assert parse_iso_ms(None) is None


def test_a_claude_session_counts_each_answer_once_from_the_run_start(tmp_path: Path) -> None:
    path = _lines(
        tmp_path / "s.jsonl",
        [
            _answer("msg_0", STARTED_MS - 60_000, tokens=999),  # an earlier run of the resumed session
            {"type": "user", "timestamp": _at(STARTED_MS)},
            _answer("msg_1", STARTED_MS + 1_000),
            _answer("msg_1", STARTED_MS + 1_001),  # its second content block: the same answer
            "not json {",
            _answer("msg_2", STARTED_MS + 2_000, model="claude-haiku-4-5", tokens=7),
            _answer("msg_3", STARTED_MS + 3_000, model="<synthetic>", tokens=0),  # made up by the CLI
        ],
    )
    assert session_usage(path, STARTED_MS) == {
        "claude-opus-4-8": TokenUsage(100, 10, 5, 1),
        "claude-haiku-4-5": TokenUsage(7, 10, 5, 1),
    }
    assert session_usage(path)["claude-opus-4-8"] == TokenUsage(1099, 20, 10, 2)
    # a sub-agent's answers are kept beside the session's own
    _lines(tmp_path / "s" / "subagents" / "agent-a1.jsonl", [_answer("msg_9", STARTED_MS + 4_000, tokens=50)])
    assert session_usage(path, STARTED_MS)["claude-opus-4-8"] == TokenUsage(150, 20, 10, 2)


def _count(at_ms: int, total: int) -> dict[str, Any]:
    usage = {"input_tokens": total, "cached_input_tokens": 10, "cache_write_input_tokens": 0, "output_tokens": 5}
    return {
        "timestamp": _at(at_ms),
        "type": "event_msg",
        "payload": {"type": "token_count", "info": {"total_token_usage": usage}},
    }


def test_a_codex_thread_counts_what_was_spent_since_the_run_start(tmp_path: Path) -> None:
    turn = {"timestamp": _at(STARTED_MS), "type": "turn_context", "payload": {"model": "gpt-5-codex"}}
    path = _lines(
        tmp_path / "rollout.jsonl",
        [_count(STARTED_MS - 5_000, 100), turn, _count(STARTED_MS + 1_000, 150), _count(STARTED_MS + 2_000, 300)],
    )
    # the thread's total then was 100 input (10 cached), 5 output; now 300 (10 cached), 5
    assert thread_usage(path, STARTED_MS) == (TokenUsage(200, 0, 0, 0), "gpt-5-codex")
    assert thread_usage(path) == (TokenUsage(290, 5, 10, 0), "gpt-5-codex")


async def _dead_run(db: SqliteStore) -> Run:
    await db.add_task(NewTask("t"))
    claim = await db.claim_next(worker=DEAD, lease_ms=60_000)
    assert claim is not None
    (run,) = await db.open_runs()
    return run


def _transcript(settings: Settings, run: Run, *lines: Any) -> Path:
    prompt: dict[str, Any] = {"type": "vigil.prompt", "executor": "claude", "argv": ["claude"], "text": "do it"}
    prompt |= {"account": "default", "started_ms": STARTED_MS}
    init = {"type": "system", "subtype": "init", "session_id": SESSION}
    return _lines(transcript_path(settings, run.task_id, run.attempt), [prompt, "noise", init, *lines])


async def test_recovery_records_the_session_and_its_usage(
    settings: Settings, db: SqliteStore, clock: ManualClock, tmp_path: Path
) -> None:
    run = await _dead_run(db)
    transcript = _transcript(settings, run)
    folder = tmp_path / "claude-config"
    _lines(
        folder / "projects" / "-work" / f"{SESSION}.jsonl",
        [_answer("msg_1", STARTED_MS + 5), _answer("m2", STARTED_MS + 9)],
    )
    salvage = Salvager(settings, source={"CLAUDE_CONFIG_DIR": str(folder), "PATH": "/bin"})

    (task,) = await recover_orphans(db, clock, salvage=salvage)

    (recorded,) = await db.list_runs(task.id)
    assert (recorded.outcome, recorded.session_id, recorded.model) == ("interrupted", SESSION, "claude-opus-4-8")
    assert (recorded.tokens_in, recorded.tokens_out, recorded.cache_read_tokens, recorded.cache_write_tokens) == (
        200,
        20,
        10,
        2,
    )
    assert recorded.api_cost_usd == recorded.cost_usd > 0
    assert (recorded.transcript_path, recorded.account) == (str(transcript), "default")
    assert (task.tokens_in, task.cost_usd) == (200, recorded.cost_usd)


async def test_without_the_session_file_the_run_keeps_no_session_to_resume(
    settings: Settings, db: SqliteStore, tmp_path: Path
) -> None:
    run = await _dead_run(db)
    transcript = _transcript(settings, run)
    salvage = Salvager(settings, source={"CLAUDE_CONFIG_DIR": str(tmp_path / "none"), "PATH": "/bin"})
    interrupted = Outcome(OutcomeKind.INTERRUPTED, error="dispatcher died")

    found = await salvage(run, interrupted)

    assert (found.session_id, found.tokens_in, found.transcript_path) == (None, 0, str(transcript))


async def test_a_run_that_left_nothing_readable_is_recorded_as_it_was(settings: Settings, db: SqliteStore) -> None:
    run = await _dead_run(db)
    salvage = Salvager(settings, source={"PATH": "/bin"})
    interrupted = Outcome(OutcomeKind.INTERRUPTED, error="dispatcher died")
    assert await salvage(run, interrupted) == interrupted  # no transcript at all
    _lines(transcript_path(settings, run.task_id, run.attempt), ["\x00\x01 garbage", "{]"])
    assert (await salvage(run, interrupted)).session_id is None
