"""Running checks: argv, not a shell; the output's tail; a timeout ends the whole
group; a missing program is a failed check; in bubblewrap a check writes only its
workspace (and a /tmp of its own)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from dispatch.checks import Sandbox, check_sandbox, run_check, run_checks
from dispatch.process import group_alive
from tests.agents.clis import needs_bwrap
from vigil.codework import OUTPUT_TAIL_CHARS, Check

ENV = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8"}
started: list[int] = []


async def record(pid: int, pgid: int, proc_start: str | None) -> None:
    started.append(pgid)


def python(code: str, timeout_ms: int | None = None) -> Check:
    return Check((sys.executable, "-c", code), timeout_ms)


async def test_each_check_runs_in_the_workspace_with_its_exit_code_and_output(tmp_path: Path) -> None:
    checks = [
        python("import os, sys; print('in', os.getcwd(), flush=True); print('oops', file=sys.stderr); sys.exit(3)"),
        Check(("echo", "$HOME", "`id`")),  # no shell: the words are printed as they are
        python("print('x' * 10000)"),
        Check(("no-such-program-here",)),
    ]
    results = await run_checks(checks, cwd=tmp_path, env=ENV, timeout_s=30, grace_s=1, on_start=record)
    assert [r.exit_code for r in results] == [3, 0, 0, None]
    assert results[0].output == f"in {tmp_path}\noops"
    assert results[1].output == "$HOME `id`"
    assert len(results[2].output) == OUTPUT_TAIL_CHARS
    assert results[3].output == "cannot start 'no-such-program-here': no such executable file"
    assert [r.how() for r in results] == ["exit 3", "passed", "passed", "could not start"]


async def test_a_check_past_its_timeout_is_ended_with_its_group(tmp_path: Path) -> None:
    started.clear()
    # the check leaves a child behind that would outlive it
    code = (
        "import subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "time.sleep(60)\n"
    )
    result = await run_check(python(code), cwd=tmp_path, env=ENV, timeout_s=1, grace_s=1, on_start=record)
    assert (result.exit_code, result.timed_out, result.how()) == (None, True, "timed out")
    assert result.output.endswith("[vigil: ended after 1s, the check's timeout]")
    (pgid,) = started
    assert not group_alive(pgid)


@needs_bwrap
async def test_in_its_sandbox_a_check_writes_its_workspace_and_nothing_else(tmp_path: Path) -> None:
    workspace = tmp_path / "work"
    workspace.mkdir()
    git_dir = tmp_path / "git"
    git_dir.mkdir()
    outside = tmp_path / "home" / "vigil.toml"
    outside.parent.mkdir()
    outside.write_text("# the home's\n")
    sandbox = check_sandbox(ENV, [git_dir])
    assert sandbox is not None
    code = (
        "import pathlib, sys\n"
        "pathlib.Path('made.txt').write_text('in the workspace')\n"
        f"pathlib.Path({str(git_dir / 'ref')!r}).write_text('in a git folder')\n"
        "try:\n"
        f"    pathlib.Path({str(outside)!r}).write_text('changed')\n"
        "except OSError as err:\n"
        "    print('refused:', err.strerror)\n"
    )
    result = await run_check(
        python(code), cwd=workspace, env=ENV, timeout_s=30, grace_s=1, on_start=record, sandbox=sandbox
    )
    assert result.exit_code == 0, result.output
    assert (workspace / "made.txt").read_text() == "in the workspace"
    assert (git_dir / "ref").read_text() == "in a git folder"
    assert outside.read_text() == "# the home's\n"
    assert result.output.startswith("refused:")


@needs_bwrap
async def test_in_its_sandbox_a_check_runs_a_program_installed_in_the_hosts_tmp(tmp_path: Path) -> None:
    # a project cloned and installed in /tmp: its virtualenv would be hidden by the
    # sandbox's private /tmp, so the program's prefix is bound back, read-only
    prefix = Path(tempfile.mkdtemp(dir="/tmp")) / "venv"  # the host's /tmp is the point
    (prefix / "bin").mkdir(parents=True)
    (prefix / "share").mkdir()
    (prefix / "share" / "data.txt").write_text("from the prefix\n")
    tool = prefix / "bin" / "tool"
    tool.write_text(
        '#!/bin/sh\ncat "$(dirname "$0")/../share/data.txt"\n'
        'touch "$(dirname "$0")/../mine" 2>/dev/null || echo read-only\n'
    )
    tool.chmod(0o755)
    workspace = tmp_path / "work"
    workspace.mkdir()
    env = {**ENV, "PATH": f"{prefix / 'bin'}:{ENV['PATH']}"}
    sandbox = check_sandbox(env, [])
    assert sandbox is not None
    try:
        for argv in ((str(tool),), ("tool",)):
            result = await run_check(
                Check(argv), cwd=workspace, env=env, timeout_s=30, grace_s=1, on_start=record, sandbox=sandbox
            )
            assert (result.exit_code, result.output) == (0, "from the prefix\nread-only"), argv
    finally:
        shutil.rmtree(prefix.parent)


def test_the_sandbox_is_bubblewrap_with_tmp_replaced_and_the_workspace_bound_back() -> None:
    argv = Sandbox("/usr/bin/bwrap", (Path("/r/.git/objects"),)).wrap(("pytest", "-q"), Path("/h/work/3"))
    assert argv == [
        "/usr/bin/bwrap", "--die-with-parent", "--unshare-pid", "--unshare-net",
        "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
        "--bind", "/h/work/3", "/h/work/3", "--bind", "/r/.git/objects", "/r/.git/objects",
        "--chdir", "/h/work/3", "--", "pytest", "-q",
    ]  # fmt: skip
    online = Sandbox("/usr/bin/bwrap", network=True).wrap(("pytest",), Path("/h/work/3"))
    assert "--unshare-net" not in online  # [checks] network = true
    assert check_sandbox({"PATH": "/nowhere"}, []) is None
