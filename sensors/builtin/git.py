"""``git``: new commits on a branch of a local repository become tasks.

Options: ``repo`` (required, a path relative to the home), ``branch`` (default
``HEAD``), ``ignore_first`` (default true: the first run records the branch's tip).

The cursor in state is the last commit seen. Each run lists
``git rev-list --reverse <last>..<branch>`` (oldest first, at most the per-run cap;
the rest next run) and makes one task per commit, keyed by its hash (scope
``ever``). If the last commit no longer exists (history rewritten and collected),
the branch's tip becomes the new cursor and a warning is recorded. ``git`` runs as
a subprocess with an argv list, never through a shell; it must be on ``PATH``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sensors.api import FoundTask, SensorContext, sensor
from sensors.builtin.process import kill_group
from sensors.options import OptionReader
from vigil.models import DedupScope

SEP = "\x1f"
END = "\x1e"
MAX_BODY_CHARS = 4000


@dataclass(frozen=True)
class GitOptions:
    repo: Path
    branch: str
    ignore_first: bool


class GitFailed(RuntimeError):
    """git exited with an error; the message carries its stderr."""


def parse_options(raw: Mapping[str, Any], home: Path) -> GitOptions:
    reader = OptionReader(raw, home)
    options = GitOptions(reader.path("repo"), reader.str_("branch", "HEAD"), reader.bool_("ignore_first", True))
    if options.branch.startswith("-"):
        raise ValueError(f"branch: {options.branch!r} is not a branch name")
    reader.done()
    return options


async def run_git(repo: Path, *args: str) -> str:
    """stdout of ``git -C repo args…``; raises ``GitFailed``. Killed if cancelled."""
    proc = await asyncio.create_subprocess_exec(
        "git",
        "-C",
        str(repo),
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
        env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"},
    )
    try:
        out, err = await proc.communicate()
    except asyncio.CancelledError:
        await kill_group(proc)
        raise
    if proc.returncode != 0:
        message = err.decode(errors="replace").strip().splitlines()
        raise GitFailed(f"git {args[0]} in {repo}: {message[-1] if message else f'exit {proc.returncode}'}")
    return out.decode(errors="replace")


@sensor(every="1m", options=parse_options)
async def git(ctx: SensorContext) -> list[FoundTask]:
    """New commits on a branch of a local repository become tasks."""
    opts = parse_options(ctx.options, ctx.home)
    tip = (await run_git(opts.repo, "rev-parse", "--verify", "--end-of-options", f"{opts.branch}^{{commit}}")).strip()
    last = ctx.state.get("last")
    if not isinstance(last, str):  # first run
        ctx.state["last"] = tip
        if opts.ignore_first:
            return []
        span = tip
    elif last == tip:
        return []
    elif await _missing(opts.repo, last):
        ctx.warn(f"last seen commit {last[:12]} is gone (history rewritten?); now following from {tip[:12]}")
        ctx.state["last"] = tip
        return []
    else:
        span = f"{last}..{tip}"
    # Oldest first; only as many as one run may return, the rest next run.
    hashes = (await run_git(opts.repo, "rev-list", "--reverse", span)).split()[: ctx.max_tasks]
    if not hashes:  # the branch moved backwards (reset): follow it
        ctx.state["last"] = tip
        return []
    log_format = f"--format=%H{SEP}%an <%ae>{SEP}%aI{SEP}%s{SEP}%b{END}"
    out = await run_git(opts.repo, "show", "--no-patch", log_format, *hashes)
    tasks = []
    for record in out.split(END):
        fields = record.strip("\n").split(SEP)
        if len(fields) != 5:
            continue
        sha, author, date, subject, body = fields
        tasks.append(
            FoundTask(
                key=sha,
                subject=f"New commit on {opts.branch} in {opts.repo.name}: {subject}"[:300],
                description=(
                    f"Commit {sha}\nAuthor: {author}\nDate: {date}\n\n{subject}\n\n{body.strip()[:MAX_BODY_CHARS]}"
                ),
                dedup=DedupScope.EVER,
            )
        )
    ctx.state["last"] = hashes[-1]
    return tasks


async def _missing(repo: Path, sha: str) -> bool:
    try:
        await run_git(repo, "cat-file", "-e", f"{sha}^{{commit}}")
    except GitFailed:
        return True
    return False
