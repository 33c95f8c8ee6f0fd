"""``command``: run a program; each JSON line it prints becomes a task.

So sensors can be written in any language. Options: ``command`` (required, an argv
list — never a shell string), ``cwd`` (default: the home), ``env`` (a table of
variables to set), ``pass_env`` (names of the daemon's variables to pass on),
``max_output_bytes`` (default 1 MiB). The program gets an explicit environment,
never the daemon's whole one (``vigil.environment``: PATH, HOME, locale, proxies,
then ``pass_env`` and ``env``). The entry's ``timeout`` bounds the run: the
program's whole process group is killed when it expires (or when Vigil stops).

Each stdout line is one JSON object::

    {"key": "disk-full:/var", "subject": "Disk /var is 95% full",
     "description": "…", "priority": 2, "skills": ["ops"], "dedup": "open"}

``key`` and ``subject`` are required; ``scheduled_for`` is epoch ms, from 1970 to
9999 (``vigil.durations``). Blank lines are skipped. A malformed line (not JSON,
nested past ``MAX_NESTING``, not an object, missing key or subject, a field of the
wrong type, text with a lone surrogate escape such as ``"\ud800"``, which is valid
JSON but no UTF-8) is reported in the run's error text with its line number, and the
good lines are kept. A non-zero exit status fails the run (nothing is stored);
the last line of stderr is the error text. Exit status 75 (``EX_TEMPFAIL``,
sysexits.h) says the failure is temporary: the run fails the same way, counted and
backed off like any failure, and the error says so. ``VIGIL_HOME`` and ``VIGIL_SENSOR`` are
set for the program, and its state JSON is passed as ``VIGIL_SENSOR_STATE``.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sensors.api import FoundTask, SensorContext, sensor
from sensors.builtin.process import kill_group
from sensors.options import OptionReader
from vigil.durations import time_problem
from vigil.environment import explicit_env
from vigil.models import DedupScope

FIELDS = {"key", "subject", "description", "priority", "skills", "scheduled_for", "dedup"}
MAX_STDERR_BYTES = 64 * 1024
MAX_NESTING = 100  # brackets deep: a task line needs two; past this the parser would recurse for nothing
EX_TEMPFAIL = 75  # sysexits.h: a temporary failure, retried on the back-off schedule


@dataclass(frozen=True)
class CommandOptions:
    argv: tuple[str, ...]
    cwd: Path
    env: dict[str, str]
    max_output_bytes: int
    pass_env: tuple[str, ...] = ()


class CommandFailed(RuntimeError):
    """The program exited non-zero or printed too much."""


def parse_options(raw: Mapping[str, Any], home: Path) -> CommandOptions:
    reader = OptionReader(raw, home)
    options = CommandOptions(
        reader.argv("command"),
        reader.path("cwd", "."),
        reader.str_map("env"),
        reader.int_("max_output_bytes", 1 << 20, 1),
        reader.names("pass_env"),
    )
    reader.done()
    return options


def _load(line: str) -> dict[str, Any]:
    """The JSON object on ``line``; raises ``ValueError`` saying why not."""
    if _nesting(line) > MAX_NESTING:
        raise ValueError(f"nested deeper than {MAX_NESTING} levels")
    try:
        data = json.loads(line)
    except json.JSONDecodeError as err:
        raise ValueError(f"not JSON ({err.msg})") from None
    except RecursionError:  # deeper than the interpreter allows, for all the count above
        raise ValueError("nested too deeply") from None
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    return data


def parse_line(line: str) -> FoundTask:
    """One output line → a task; raises ``ValueError`` saying what is wrong."""
    data = _load(line)
    unknown = sorted(set(data) - FIELDS)
    if unknown:
        raise ValueError(f"unknown field {unknown[0]!r}")
    for field in ("key", "subject"):
        if not isinstance(data.get(field), str) or not data[field].strip():
            raise ValueError(f"missing or empty {field!r}")
    if not isinstance(data.get("description", ""), str):
        raise ValueError("'description' must be a string")
    priority = data.get("priority")
    if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int) or not 1 <= priority <= 9):
        raise ValueError("'priority' must be an integer 1-9")
    skills = data.get("skills")
    if skills is not None and (not isinstance(skills, list) or not all(isinstance(s, str) for s in skills)):
        raise ValueError("'skills' must be a list of strings")
    when = data.get("scheduled_for")
    if when is not None and (problem := time_problem(when)) is not None:
        raise ValueError(f"'scheduled_for' {problem}")
    if data.get("dedup", "open") not in ("open", "ever"):
        raise ValueError("'dedup' must be 'open' or 'ever'")
    texts = (data["key"], data["subject"], data.get("description", ""), *(skills or ()))
    if not all(_utf8(text) for text in texts):
        raise ValueError("a text holds a lone surrogate escape (such as \\ud800): not UTF-8")
    return FoundTask(
        key=data["key"],
        subject=data["subject"],
        description=data.get("description", ""),
        priority=priority,
        skills=None if skills is None else tuple(skills),
        scheduled_for=when,
        dedup=DedupScope(data.get("dedup", "open")),
    )


def _nesting(line: str) -> int:
    """How deep the brackets of ``line`` go (strings included: an over-estimate,
    enough to refuse a line before the parser recurses into it)."""
    depth = deepest = 0
    for char in line:
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


async def _read_capped(stream: asyncio.StreamReader, limit: int) -> bytes:
    data = await stream.read(limit + 1)
    rest = data
    while rest and len(data) <= limit:
        rest = await stream.read(limit + 1 - len(data))
        data += rest
    return data


@sensor(every="1m", options=parse_options)
async def command(ctx: SensorContext) -> list[FoundTask]:
    """Runs a program; each JSON line it prints becomes a task."""
    opts = parse_options(ctx.options, ctx.home)
    env = {
        **explicit_env(os.environ, opts.pass_env),
        **opts.env,
        "VIGIL_HOME": str(ctx.home),
        "VIGIL_SENSOR": ctx.name,
        "VIGIL_SENSOR_STATE": json.dumps(ctx.state),
    }
    try:
        proc = await asyncio.create_subprocess_exec(
            *opts.argv,
            cwd=opts.cwd,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # its own process group, killed as a whole
        )
    except OSError as problem:
        raise CommandFailed(f"cannot start {opts.argv[0]!r}: {problem.strerror}") from None
    assert proc.stdout is not None
    assert proc.stderr is not None
    stderr = asyncio.ensure_future(_read_capped(proc.stderr, MAX_STDERR_BYTES))
    try:
        out = await _read_capped(proc.stdout, opts.max_output_bytes)
        if len(out) > opts.max_output_bytes:
            raise CommandFailed(f"printed more than max_output_bytes ({opts.max_output_bytes}); killed")
        err = await stderr
        code = await proc.wait()
    finally:
        if not stderr.done():
            stderr.cancel()
            await asyncio.gather(stderr, return_exceptions=True)
        if proc.returncode is None:  # timeout, cancellation or too much output
            await kill_group(proc)
    if code != 0:
        lines = err.decode(errors="replace").strip().splitlines()
        tempfail = " (EX_TEMPFAIL: temporary failure, retried with back-off)" if code == EX_TEMPFAIL else ""
        raise CommandFailed(f"exited with status {code}{tempfail}" + (f": {lines[-1]}" if lines else ""))
    tasks = []
    bad = []
    for number, line in enumerate(out.decode(errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            tasks.append(parse_line(line))
        except ValueError as problem:
            bad.append(f"line {number}: {problem}")
    if bad:
        ctx.warn(f"{len(bad)} malformed output line(s): " + "; ".join(bad[:5]))
    return tasks
