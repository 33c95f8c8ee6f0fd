"""``vigil mcp --run N``: Vigil's MCP server (stdio) for the agent of one run.

The dispatcher hands each agent CLI the command that starts this server, with the
run's id in its argv (not in an environment variable the agent's shell could
change). The CLI starts it outside its sandbox, so it can write the store, and
offers its tools to the model: ``show``, ``note``, ``close``, ``ask`` and ``add_followup``,
each the operation of the same name in ``vigil.agent_channel``, bound to that run.
An operation that fails returns the error to the model as the tool's result (a
refusal's text starts with ``refused:``); nothing is stored for it. Text past its
cap (``vigil.caps``) is cut with a marker, not refused: the run goes on.

Built on the official ``mcp`` SDK (``MCPServer``), imported only here: the rest of
Vigil never pays for it.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable
from typing import TYPE_CHECKING, cast

from vigil.agent_channel import AgentChannel
from vigil.caps import ANSWER_CHARS, DESCRIPTION_CHARS, NOTE_CHARS, SUBJECT_CHARS, SUMMARY_CHARS, cut
from vigil.clock import SystemClock
from vigil.config import Settings
from vigil.errors import VigilError
from vigil.logfile import private_log_handler
from vigil.mcp_transport import LineScreen, log
from vigil.store import open_store

if TYPE_CHECKING:
    import anyio
    from mcp.server import MCPServer

INSTRUCTIONS = (
    "Vigil's tools for the task you are working on. Report progress with note, add "
    "follow-up work with add_followup, read your task again with show, ask a person "
    "with ask when you must not guess, and end with close. They act on your own task only."
)


def serve(settings: Settings, run_id: int) -> None:
    """Serve run ``run_id``'s agent on stdin/stdout until the client hangs up.
    Raises ``VigilError`` (before serving) when the store cannot be opened or the
    run is not open."""
    asyncio.run(_serve(settings, run_id))


async def _serve(settings: Settings, run_id: int) -> None:
    store = await open_store(settings)
    try:
        channel = AgentChannel(store, run_id, settings, SystemClock())
        await channel.bind()  # a run that is not open is refused before the client sees tools
        _log_to(settings, run_id)
        await _run_stdio(build_server(channel))
    finally:
        await store.close()


def _log_to(settings: Settings, run_id: int) -> None:
    """Each call's outcome and each refused message go to ``logs/mcp.log`` (0600,
    secrets masked, rotated at 1 MB); stdout is the protocol's, and stderr the agent
    CLI's to keep or drop."""
    handler = private_log_handler(
        settings.logs_dir / "mcp.log", max_bytes=1024 * 1024, backups=2, pass_env=settings.dispatch.pass_env
    )
    handler.setFormatter(logging.Formatter(f"%(asctime)s %(levelname)s run {run_id}: %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False  # not also on stderr through the SDK's handlers


async def _run_stdio(server: MCPServer) -> None:
    """``server.run_stdio_async()``, with stdin read through ``LineScreen``: a line
    the SDK would drop unanswered is answered instead."""
    from mcp.server.stdio import stdio_server

    lines = LineScreen(sys.stdin.buffer)
    # The SDK types stdin as an anyio file; it only iterates it for text lines.
    async with stdio_server(stdin=cast("anyio.AsyncFile[str]", lines)) as (read_stream, write_stream):
        lines.answer_through(write_stream)
        lowlevel = server._lowlevel_server  # what run_stdio_async runs; it takes no stdin of its own
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


def build_server(channel: AgentChannel) -> MCPServer:
    """The MCP server whose tools call ``channel``."""
    from mcp.server import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations

    # WARNING: a refused call is an answer to the model, not news for the log
    server = MCPServer("vigil", instructions=INSTRUCTIONS, log_level="WARNING")

    async def answer(tool: str, work: Awaitable[str]) -> str:
        """The tool's answer, or its refusal as a tool error; either is logged."""
        try:
            done = await work
        except VigilError as err:
            log.info("%s: %s", tool, err)
            raise ToolError(str(err)) from None
        log.info("%s: %s", tool, done.splitlines()[0] if done else "")
        return done

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def show(task_id: int | None = None) -> str:
        """Your task: subject, description, status, attempt, its parent chain (for a
        follow-up) and the notes so far."""
        return await answer("show", channel.show(task_id))

    @server.tool()
    async def note(text: str, task_id: int | None = None) -> str:
        """Record progress on your task: what you did, what you found. Stored as written."""
        return await answer("note", channel.note(cut(text, NOTE_CHARS), task_id))

    @server.tool()
    async def close(status: str, summary: str, retry_in: str | None = None, task_id: int | None = None) -> str:
        """End your task with a one-line summary. status: "completed" (done),
        "failed" (cannot be done), "blocked" (needs a person or another task first;
        say why), or "pending" with retry_in such as "1h" (cannot be done yet, try
        again later)."""
        return await answer("close", channel.close(status, cut(summary, SUMMARY_CHARS), retry_in, task_id))

    @server.tool()
    async def ask(question: str, choices: list[str] | None = None, task_id: int | None = None) -> str:
        """Ask a person a question you must not guess the answer to (e.g. "deploy to
        staging or to prod?"), with the answers to choose from if there are any.
        Then end your turn without closing the task: the person's answer comes back
        as your next message."""
        return await answer(
            "ask", channel.ask(cut(question, ANSWER_CHARS), [cut(c, SUBJECT_CHARS) for c in choices or ()], task_id)
        )

    @server.tool()
    async def add_followup(
        subject: str,
        description: str = "",
        priority: int = 5,
        skills: list[str] | None = None,
        task_id: int | None = None,
    ) -> str:
        """Add follow-up work as a new task (priority 1 is the most urgent, 9 the
        least; never more urgent than this task; skills by name). It runs later, in
        the same workspace as this task."""
        return await answer(
            "add_followup",
            channel.add_followup(
                cut(subject, SUBJECT_CHARS), cut(description, DESCRIPTION_CHARS), priority, skills or (), task_id
            ),
        )

    return server
