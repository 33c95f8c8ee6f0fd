"""The ``command`` executor: run a skill's program with the task as JSON on stdin.

The argv comes from the skill's front matter (``command: [...]``), never from task
text, and no shell is involved: a subject such as ``$(rm -rf ~)`` reaches the
program as data. The program runs in the task's workspace (never the home: a
scratch folder of its own unless one is configured) with the agent environment.

Exit code 0 means success and anything else failure, unless the last stdout line
that is a JSON object says more::

    {"status": "completed" | "failed", "summary": "...", "detail": "...", "cost_usd": 0.0}

A non-zero exit is a failure whatever that line says, except exit code 75
(``EX_TEMPFAIL`` in sysexits.h, "try again later"): a transient outcome, retried
with back-off while attempts remain (docs/running.md, *Retries*).
"""

from __future__ import annotations

import json
from typing import Any

from dispatch.executors import DEFAULT_GRACE_S, RunContext
from dispatch.executors.answer import DETAIL_MAX_CHARS, detail_of, summary_of
from dispatch.executors.child import run_child
from dispatch.executors.transcript import Transcript
from vigil.models import Outcome, OutcomeKind, Task

KEEP_STDOUT_CHARS = 4 * DETAIL_MAX_CHARS  # in memory; the transcript keeps everything
EX_TEMPFAIL = 75  # sysexits.h: a temporary failure, worth a retry


def task_json(task: Task, ctx: RunContext) -> dict[str, Any]:
    """What a command receives on stdin (stable field names)."""
    return {
        "id": task.id,
        "subject": task.subject,
        "description": task.description,
        "priority": task.priority,
        "skills": list(task.skills),
        "source": task.source,
        "source_key": task.source_key,
        "parent_id": task.parent_id,
        "attempt": ctx.attempt,
        "run_id": ctx.run_id,
        "home": str(ctx.home),
    }


class _Stdout:
    """Keeps the start of stdout and its last JSON-object line."""

    def __init__(self, transcript: Transcript) -> None:
        self.transcript = transcript
        self.text: list[str] = []
        self.kept = 0
        self.last_json: dict[str, Any] | None = None
        self.last_json_at: int | None = None  # its index in ``text``, if kept

    def line(self, raw: bytes) -> None:
        self.transcript.line(raw)
        text = raw.decode("utf-8", errors="replace")
        index = None
        if self.kept < KEEP_STDOUT_CHARS:
            index = len(self.text)
            self.text.append(text)
            self.kept += len(text) + 1
        stripped = text.strip()
        if stripped.startswith("{"):
            try:
                value = json.loads(stripped)
            except ValueError:
                return
            if isinstance(value, dict):
                self.last_json = value
                self.last_json_at = index

    def output(self) -> str:
        """What the command printed, without its JSON report line."""
        lines = [line for index, line in enumerate(self.text) if index != self.last_json_at]
        return "\n".join(lines).strip()


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _cost(value: object) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return 0.0


class CommandExecutor:
    name = "command"

    def __init__(self, *, grace_s: float = DEFAULT_GRACE_S) -> None:
        self.grace_s = grace_s

    async def run(self, task: Task, ctx: RunContext) -> Outcome:
        transcript_path = str(ctx.transcript_path)
        if not ctx.command:
            return Outcome(
                kind=OutcomeKind.FAILED,
                summary="no command to run: none of the task's skills defines one",
                error="the command executor needs a skill with `command: [...]` in its front matter",
                transcript_path=None,
            )
        payload = json.dumps(task_json(task, ctx), ensure_ascii=False)
        with Transcript(ctx.transcript_path, ctx.redactor) as transcript:
            transcript.record("command", argv=list(ctx.command), stdin=payload)
            stdout = _Stdout(transcript)
            result = await run_child(
                ctx.command,
                env=ctx.env,
                cwd=ctx.cwd,
                stdin=payload.encode("utf-8") + b"\n",
                timeout_s=ctx.timeout_s,
                grace_s=self.grace_s,
                on_start=ctx.on_process_start,
                on_line=stdout.line,
            )
            if result.stderr:
                transcript.record("stderr", text=result.stderr)
            transcript.record("end", exit_code=result.exit_code, timed_out=result.timed_out)

        output = stdout.output()
        if result.spawn_error is not None:
            return Outcome(
                kind=OutcomeKind.FAILED,
                summary=summary_of(result.spawn_error),
                error=result.spawn_error,
                transcript_path=transcript_path,
            )
        if result.timed_out:
            message = f"timed out after {ctx.timeout_s:g}s; the command's process group was ended"
            return Outcome(
                kind=OutcomeKind.TIMEOUT,
                summary=message,
                detail=detail_of(output),
                error=message,
                exit_code=result.exit_code,
                transcript_path=transcript_path,
            )

        report = stdout.last_json or {}
        status = report.get("status", "completed")
        kind = OutcomeKind.SUCCESS
        error = None
        if result.exit_code != 0:
            kind = OutcomeKind.TRANSIENT if result.exit_code == EX_TEMPFAIL else OutcomeKind.FAILED
            tail = result.stderr.strip().splitlines()[-1:] or [""]
            tempfail = " (EX_TEMPFAIL: temporary failure)" if result.exit_code == EX_TEMPFAIL else ""
            error = f"exited with code {result.exit_code}{tempfail}" + (f": {tail[0]}" if tail[0] else "")
        elif status == "failed":
            kind = OutcomeKind.FAILED
            error = _str(report.get("summary")) or "the command reported failure"
        elif status != "completed":
            kind = OutcomeKind.FAILED
            error = f"the command reported an unknown status {status!r} (expected completed or failed)"

        summary = _str(report.get("summary")) or summary_of(output) or error or "done"
        detail = _str(report.get("detail")) or output
        return Outcome(
            kind=kind,
            summary=summary_of(summary),
            detail=detail_of(detail),
            error=error,
            exit_code=result.exit_code,
            cost_usd=_cost(report.get("cost_usd")),
            transcript_path=transcript_path,
        )
