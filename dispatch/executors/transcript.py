"""The full transcript of one run, on disk: ``logs/runs/<task>-<attempt>.jsonl``.

The agent's stdout is copied line by line, byte for byte (noise lines included), so
the file is complete even when the stored answer is capped. Vigil's own records
(the prompt sent, stderr, how the run ended) are JSON lines whose ``type`` starts
with ``vigil.``; the prompt's also names the account and the wall-clock moment
the CLI started (``started_ms``), which crash recovery needs to read what a run
left in the CLI's own session file (``dispatch.salvage``). The file is created
0600 in a 0700 folder: prompts and answers may hold private data. Secrets
(``vigil.redaction``) are masked in everything written, the agent's own lines
included.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from dispatch.executors import RunContext
from dispatch.executors.child import ChildResult, LineHandler, run_child
from vigil.redaction import Redactor


class Transcript:
    """An open transcript file; use as a context manager. Writes are unbuffered
    appends, so what the agent printed is on disk even if the dispatcher dies."""

    def __init__(self, path: Path, redactor: Redactor | None = None, *, keep: bool = False) -> None:
        self.path = path
        self.redactor = redactor or Redactor()
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # the folder may have been made by someone else with the default mode
        with contextlib.suppress(OSError):
            path.parent.chmod(0o700)
        # ``keep``: this attempt's earlier try (a session that would not resume) stays
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | (0 if keep else os.O_TRUNC) | os.O_APPEND, 0o600)
        # a file left by an earlier, interrupted attempt keeps its old mode
        os.fchmod(fd, 0o600)
        self._file = os.fdopen(fd, "ab", buffering=0)

    def line(self, raw: bytes) -> None:
        """Append one line as received, secrets masked (a newline is added)."""
        self._file.write(self.redactor.data(raw) + b"\n")

    def record(self, kind: str, **fields: object) -> None:
        """Append one of Vigil's own records: ``{"type": "vigil.<kind>", ...}``."""
        body = {"type": f"vigil.{kind}", **fields}
        text = self.redactor.text(json.dumps(body, ensure_ascii=False))
        self._file.write(text.encode("utf-8", errors="surrogateescape") + b"\n")

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> Transcript:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if isinstance(exc, asyncio.CancelledError):
            # the run was cancelled or the dispatcher is stopping: say so at the end
            self.record("end", canceled=True)
        self.close()


async def run_agent_cli(
    executor: str, argv: Sequence[str], ctx: RunContext, grace_s: float, feed: LineHandler
) -> ChildResult:
    """Run an NDJSON agent CLI with the prompt (or a resumed session's new message)
    on stdin, copying every stdout line to
    the run's transcript and to ``feed`` (the executor's stream parser) as it arrives.
    The transcript also records the prompt, stderr and how the run ended."""
    resume = ctx.resume
    text = ctx.prompt if resume is None else resume.message
    with Transcript(ctx.transcript_path, ctx.redactor, keep=ctx.keep_transcript) as transcript:
        resumed = {} if resume is None else {"resumes": resume.session_id, "from_run": resume.from_run}
        started_ms = int(time.time() * 1000)  # the wall clock the CLI stamps its session file with
        where = {"account": ctx.account, "started_ms": started_ms}
        transcript.record("prompt", executor=executor, argv=list(argv), text=text, **where, **resumed)

        def on_line(raw: bytes) -> None:
            transcript.line(raw)
            feed(raw)

        result = await run_child(
            argv,
            env=ctx.env,
            cwd=ctx.cwd,
            stdin=text.encode("utf-8"),
            timeout_s=ctx.timeout_s,
            grace_s=grace_s,
            on_start=ctx.on_process_start,
            on_line=on_line,
            stall_s=ctx.stall_timeout_s,
        )
        if result.stderr:
            transcript.record("stderr", text=result.stderr)
        transcript.record("end", exit_code=result.exit_code, timed_out=result.timed_out, stalled=result.stalled)
    return result
