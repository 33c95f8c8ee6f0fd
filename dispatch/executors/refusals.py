"""Telling a refused action from an ordinary failure in what an agent CLI reports.

Three kinds of refusal reach Vigil besides a CLI's own permission denials:

* Vigil's MCP tools refused the call (another task, a run that ended): the tool's
  error text holds ``refused:`` (``vigil.errors.REFUSED``);
* the model called a Vigil tool that does not exist (``mcp__vigil__set_priority``);
* the OS sandbox stopped a command: a write outside the workspace fails with
  ``Read-only file system`` (bubblewrap's read-only mounts; ``vigil`` itself says
  so of its database), a database opened read-only with ``attempt to write a
  readonly database``, a forbidden system call with ``Operation not permitted``;
* ``vigil`` refused a person-only command run from inside a task (``only a person
  can …``).

Each becomes one line on the run's ``permission_denials``, ``tool: what`` with the
reason, the same shape as the CLIs' own denials.

A sandbox that could not start at all is not a refusal: every command fails with
bubblewrap's own complaint (``bwrap: execvp codex-linux-sandbox: No such file or
directory`` from Codex 0.171.0 whose helper is missing, ``bwrap: setting up uid
map: Permission denied`` where user namespaces are refused) and nothing the agent
meant to run ran. ``sandbox_start_failure`` finds it in a failed command's output;
the run is then ``sandbox_failed``, not a success.
"""

from __future__ import annotations

import re

from vigil.errors import REFUSED

VIGIL_TOOL_PREFIX = "mcp__vigil__"  # Claude Code's name for a tool of the server named vigil
SANDBOX_REFUSAL = re.compile(
    r"Read-only file system|attempt to write a readonly database|Operation not permitted|only a person can",
    re.IGNORECASE,
)
SANDBOX_START_FAILURE = re.compile(r"^bwrap: .+$", re.MULTILINE)  # bubblewrap's own messages
NO_SUCH_TOOL = re.compile(r"No such tool available: ([\w.-]+)|unsupported call: ([\w.-]+)")
LINE_MAX = 300  # characters of one denial line


def sandbox_refusal(output: str) -> str | None:
    """The sandbox's refusal named in a command's ``output``, or None."""
    match = SANDBOX_REFUSAL.search(output)
    return match.group(0) if match else None


def sandbox_start_failure(output: str) -> str | None:
    """Bubblewrap's complaint in the ``output`` of a command that failed, when the
    sandbox could not start it; None otherwise."""
    match = SANDBOX_START_FAILURE.search(output)
    return match.group(0).strip() if match else None


def sandbox_failed_error(failures: list[str]) -> str:
    """The error of a run whose commands did not start in the CLI's sandbox
    (``failures``: one denial-shaped line each, at least one)."""
    count = len(failures)
    return (
        f"the CLI's sandbox did not start {count} command{'' if count == 1 else 's'} "
        f"(`vigil doctor` says how to fix it): {failures[0]}"
    )


def channel_refusal(text: str) -> str | None:
    """The refusal in a Vigil tool's error ``text`` (from ``refused:`` on), or None."""
    at = text.find(REFUSED)
    return text[at:].strip() if at >= 0 else None


def unknown_vigil_tool(text: str) -> str | None:
    """The name of a Vigil tool that does not exist, from a CLI's error text, or None."""
    match = NO_SUCH_TOOL.search(text)
    name = next((group for group in match.groups() if group), None) if match else None
    return name if name is not None and "vigil" in name else None


def denial_line(tool: str, what: str, why: str) -> str:
    """One denial on one line: ``tool: what (why)``, white space runs (a heredoc's
    newlines) made single spaces, cut to ``LINE_MAX`` characters."""
    what, why = " ".join(what.split()), " ".join(why.split())
    line = f"{tool}: {what} ({why})" if what else f"{tool}: {why}"
    return line if len(line) <= LINE_MAX else line[: LINE_MAX - 1] + "…"
