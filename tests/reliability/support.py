"""Shared by the reliability tests: a home whose ``probe`` skill runs a small
recording agent through the command executor, and a way to run the real ``vigil``
with a chosen environment and umask."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

PROBE_AGENT = """\
import json, os, sys
payload = sys.stdin.read()
with open(sys.argv[1], "w", encoding="utf-8") as out:
    json.dump({"argv": sys.argv, "stdin": payload, "env": dict(os.environ)}, out)
said = os.environ.get("PROBE_SAY", "").replace("{key}", os.environ.get("PROBE_API_KEY", ""))
said = said or json.loads(payload)["description"]
print(said)
print(said, file=sys.stderr)
sys.exit(int(os.environ.get("PROBE_EXIT", "0")))
"""


PROBE_CONFIG = """\
[dispatch]
executor = "dry-run"
max_retries = 0
pass_env = ["PROBE_SAY", "PROBE_EXIT"{extra}]
"""


def write_probe_skill(home: Path, record: Path, *, pass_env: tuple[str, ...] = ()) -> None:
    """``skills/probe``: runs ``probe.py RECORD`` (argv, stdin and env written there),
    which prints ``$PROBE_SAY`` (``{key}`` replaced by ``$PROBE_API_KEY``) to stdout
    and stderr (without it: the task's description) and exits ``$PROBE_EXIT``.
    The home's vigil.toml is replaced: those two names and ``pass_env`` are passed."""
    extra = "".join(f", {json.dumps(name)}" for name in pass_env)
    (home / "vigil.toml").write_text(PROBE_CONFIG.format(extra=extra), encoding="utf-8")
    folder = home / "skills" / "probe"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "probe.py").write_text(PROBE_AGENT, encoding="utf-8")
    (folder / "SKILL.md").write_text(
        "---\n"
        "description: Records what it was given.\n"
        f"command: [{json.dumps(sys.executable)}, ./probe.py, {json.dumps(str(record))}]\n"
        "---\n"
        "Record and exit.\n",
        encoding="utf-8",
    )


def run_vigil(
    home: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    umask: int = 0o022,
    timeout_s: float = 60,
) -> subprocess.CompletedProcess[str]:
    """The real ``vigil --home HOME ARGS`` in a subprocess; ``env`` is added to a
    clean copy of this process's environment (no ``VIGIL_*``)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("VIGIL_")}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "vigil", "--home", str(home), *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout_s,
        check=False,
        umask=umask,
    )


def read_record(path: Path) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return value


WAIT_S = 60.0  # how long a helper below waits at the most: a safety net only


def database(home: Path) -> Path:
    """The home's SQLite file."""
    return home / "data" / "vigil.db"


@contextmanager
def running(home: Path, *args: str) -> Iterator[subprocess.Popen[str]]:
    """``vigil ARGS`` in the background, its output piped (killed at the end if
    still running)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIGIL_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "vigil", "--home", str(home), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=WAIT_S)


def wait_until(condition: Callable[[], object], what: str) -> None:
    """Poll ``condition`` every 50 ms until it holds; fail naming ``what`` after
    ``WAIT_S``."""
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
