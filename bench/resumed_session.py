"""The attempt after a person's answer, resumed versus fresh: what the agent CLI
sends the model.

For each agent CLI installed (the real Claude Code and Codex, as the tests find
them), against the tests' scriptable local model server: a task with a long
description, whose agent reads a long file in its workspace and then asks a
question (attempt 1, the same in both cases). A person answers. Attempt 2 then
either resumes the session (``--resume`` / ``exec resume``: the answer is the new
message) and closes the task, or, with the CLI's record of the session deleted,
falls back to a fresh run (the whole prompt with the question and the answer),
where the agent has to read the file again before it can close the task: what a
fresh agent does, scripted.

The figure is the input of attempt 2: the requests the CLI sent, and their size in
tokens, estimated as the characters of each request's JSON body (system prompt,
tool definitions and conversation) divided by four. The server is scripted, so the
CLIs' own token counts are the script's; the request bodies are what a real API
would bill (before caching). ``--quick`` runs the same (it takes seconds).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness import command_line, heading, machine, record, workload_args

CHARS_PER_TOKEN = 4  # the usual rough rate for English text and JSON
SPEC = "\n".join(
    f"{n}. Check that step {n} of the release checklist holds: the build is tagged, the changelog names "
    f"every change since the last release, the migration for step {n} ran on a copy first, and the "
    "rollback plan names who to call."
    for n in range(1, 61)
)
NOTES = "\n".join(f"- {n:03d}: service {n} deployed on the old host; health check at /healthz; owner team-{n % 7}"
                  for n in range(1, 201))  # fmt: skip
QUESTION = "Deploy to staging or to prod?"


@dataclass(frozen=True)
class Attempt:
    """What the CLI sent for one attempt: its requests and their estimated tokens."""

    requests: int
    tokens: int


def estimate_tokens(body: Any) -> int:
    return len(json.dumps(body, ensure_ascii=False)) // CHARS_PER_TOKEN


@dataclass
class Cli:
    """One agent CLI: how to serve it, make its home, script its model, forget sessions."""

    name: str
    serve: Callable[[], Any]  # a context manager yielding the API
    home: Callable[[Path, Any], Any]
    read: Callable[[Path], Any]
    vigil: Callable[..., Any]
    requests: Callable[[Any], list[Any]]
    sessions: Callable[[Any], Path]  # the CLI's own record of its sessions


def clis() -> list[Cli]:
    from tests.agents import anthropic_api, openai_api
    from tests.agents.clis import missing_reason
    from tests.agents.codex_home import CodexHome
    from tests.agents.homes import ClaudeHome
    from tests.agents.model_server import ToolCall

    found = []
    if missing_reason("claude") is None:
        found.append(
            Cli(
                "claude",
                anthropic_api.anthropic_server,
                lambda tmp, api: ClaudeHome.make(tmp, api.server.url),
                lambda path: ToolCall("Read", {"file_path": str(path)}),
                anthropic_api.vigil_tool,
                lambda api: api.conversation(),
                lambda home: home.config_dir / ".claude" / "projects",
            )
        )
    if missing_reason("codex") is None:
        found.append(
            Cli(
                "codex",
                openai_api.openai_server,
                lambda tmp, api: CodexHome.create(tmp, api.server.url),
                lambda path: openai_api.shell(f"cat {path}"),
                openai_api.vigil_tool,
                lambda api: api.requests(),
                lambda home: home.config_dir / "sessions",
            )
        )
    return found


def second_attempt(cli: Cli, folder: Path, *, resumed: bool) -> Attempt:
    """Attempt 2 of the scenario (module docstring), resumed or fresh."""
    from tests.agents.model_server import Text

    with cli.serve() as api:
        home = cli.home(folder, api)
        workdir = folder / "repo"
        workdir.mkdir()
        (workdir / "NOTES.md").write_text(NOTES)
        task_id = home.add_task("Deploy the release", "--description", SPEC, "--workdir", str(workdir))
        api.script.add(
            cli.read(workdir / "NOTES.md"),
            cli.vigil("ask", question=QUESTION, choices=["staging", "prod"]),
            Text("I asked which environment to deploy to."),
        )
        _ok(home.vigil("dispatch", "once"))
        _ok(home.vigil("task", "answer", str(task_id), "--choice", "1"))
        if not resumed:
            shutil.rmtree(cli.sessions(home))  # the session cannot be resumed: a fresh run
        again = [] if resumed else [cli.read(workdir / "NOTES.md")]
        api.script.add(*again, cli.vigil("close", status="completed", summary="deployed to staging"), Text("Done."))
        before = len(cli.requests(api))
        _ok(home.vigil("dispatch", "once"))
        runs = home.runs(task_id)
        if (runs[-1]["resumed_from"] is not None) != resumed or home.task(task_id)["status"] != "completed":
            raise RuntimeError(f"{cli.name}: attempt 2 did not go as scripted: {dict(runs[-1])}")
        sent = cli.requests(api)[before:]
        return Attempt(len(sent), sum(estimate_tokens(body) for body in sent))


def _ok(proc: subprocess.CompletedProcess[str]) -> None:
    if proc.returncode != 0:
        raise RuntimeError(f"vigil failed: {proc.stderr.strip()}")


@contextmanager
def _folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="vigil-bench-") as name:
        yield Path(name)


def main(argv: list[str] | None = None) -> int:
    args = workload_args(__doc__.splitlines()[0], argv)
    found = clis()
    heading("resumed versus fresh session: input of the attempt after the answer")
    if not found:
        print("skipped: neither Claude Code nor Codex is installed (make agent-clis)")
        return 0
    lines = [
        "| CLI | attempt 2 | requests | input tokens (estimated) | fresh ÷ resumed |",
        "|---|---|---|---|---|",
    ]
    for cli in found:
        with _folder() as resumed_dir, _folder() as fresh_dir:
            resumed = second_attempt(cli, resumed_dir, resumed=True)
            fresh = second_attempt(cli, fresh_dir, resumed=False)
        ratio = fresh.tokens / resumed.tokens if resumed.tokens else float("nan")
        lines.append(f"| {cli.name} | resumed | {resumed.requests} | {resumed.tokens:,} | — |")
        lines.append(f"| {cli.name} | fresh (Q&A in the prompt) | {fresh.requests} | {fresh.tokens:,} | {ratio:.2f}× |")
    text = "\n".join(lines)
    print(text)
    if args.record:
        where = machine()
        done = record("resumed_session", f"Command: `{command_line()}`. Machine: {where}.\n\n{text}")
        print("recorded in docs/performance.md" if done else "docs/performance.md has no bench:resumed_session markers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
