"""Codex's session file read for the refusals its ``--json`` stream leaves out. The
records below have the shapes Codex 0.171.0 wrote for these calls."""

from __future__ import annotations

import json
from pathlib import Path

from dispatch.agents.codex.rollout import rollout_path, rollout_refusals, rollout_sandbox_failures
from dispatch.agents.codex.usage import SessionUsage
from dispatch.agents.pricing import TokenUsage

THREAD = "01a2345c-b41d-7193-9613-e1cba1be5167"


def call(call_id: str, cmd: str) -> dict[str, object]:
    arguments = json.dumps({"cmd": cmd})
    payload = {"type": "function_call", "name": "exec_command", "arguments": arguments, "call_id": call_id}
    return {"type": "response_item", "payload": payload}


def output(call_id: str, text: str) -> dict[str, object]:
    return {"type": "response_item", "payload": {"type": "function_call_output", "call_id": call_id, "output": text}}


def write_rollout(codex_home: Path, *records: dict[str, object]) -> Path:
    path = codex_home / "sessions" / "2026" / "12" / "02" / f"rollout-2026-12-02T01-27-00-{THREAD}.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + "not json\n")
    return path


def test_the_session_file_is_found_by_its_thread_under_codex_home(tmp_path: Path) -> None:
    path = write_rollout(tmp_path / "codex-home")
    assert rollout_path({"CODEX_HOME": str(tmp_path / "codex-home")}, THREAD) == path
    assert rollout_path({"HOME": str(tmp_path)}, THREAD) is None  # ~/.codex has none
    assert rollout_path({"CODEX_HOME": str(tmp_path / "codex-home")}, "../../etc") is None


def test_policy_rejections_and_sandbox_refusals_are_denials_and_the_rest_is_not(tmp_path: Path) -> None:
    path = write_rollout(
        tmp_path,
        call("c1", "python3 -m unittest"),
        output("c1", "Process exited with code 1\nOutput:\nFAILED (failures=1)\n"),
        call("c2", "echo x >> /home/agent/vigil.toml"),
        output(
            "c2",
            "Process exited with code 1\nOutput:\n/bin/bash: line 1: /home/agent/vigil.toml: Read-only file system\n",
        ),
        call(
            "c3",
            "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: /home/agent/IDENTITY.md\n+x\n*** End Patch\nEOF\n",
        ),
        output("c3", "patch rejected: writing outside of the project; rejected by user approval settings"),
        call("c4", "rm -f calc.pyc"),
        output(
            "c4",
            "exec_command failed: CreateProcess { message: \"Rejected(\\\"`/bin/bash -c 'rm -f calc.pyc'` rejected: "
            'rm -f style commands are not permitted. Use a safer approach\\")" }',
        ),
    )
    assert rollout_refusals(path) == [
        "exec_command: echo x >> /home/agent/vigil.toml (blocked: Read-only file system)",
        "exec_command: apply_patch <<'EOF' *** Begin Patch *** Add File: /home/agent/IDENTITY.md +x *** End Patch EOF "
        "(patch rejected: writing outside of the project; rejected by user approval settings)",
        "exec_command: rm -f calc.pyc (rejected: rm -f style commands are not permitted. Use a safer approach)",
    ]


def token_count(input_tokens: int, cached: int, output_tokens: int) -> dict[str, object]:
    total = {"input_tokens": input_tokens, "cached_input_tokens": cached, "output_tokens": output_tokens}
    return {"type": "event_msg", "payload": {"type": "token_count", "info": {"total_token_usage": total}}}


def test_the_usage_so_far_is_read_from_the_session_file_as_it_grows(tmp_path: Path) -> None:
    codex_home = tmp_path / "codex"
    session = SessionUsage({"CODEX_HOME": str(codex_home)})
    assert session.read(None) is None  # no thread named yet
    assert session.read(THREAD) is None  # no file yet
    path = write_rollout(codex_home, call("c1", "ls"), token_count(1000, 200, 10))
    assert session.read(THREAD) == TokenUsage(input=800, output=10, cache_read=200)
    with path.open("a") as more:
        half = json.dumps(token_count(3000, 200, 30))
        more.write(half[:20])  # Codex is still writing this line
        more.flush()
        assert session.read(THREAD) == TokenUsage(input=800, output=10, cache_read=200)
        more.write(half[20:] + "\n")
    assert session.read(THREAD) == TokenUsage(input=2800, output=30, cache_read=200)


def test_commands_the_sandbox_could_not_start_are_sandbox_failures_not_refusals(tmp_path: Path) -> None:
    path = write_rollout(
        tmp_path,
        call("c1", "echo hello > out.txt"),
        output(
            "c1",
            "Chunk ID: dcc0f7\nWall time: 0.0000 seconds\nProcess exited with code 1\nOriginal token count: 16\n"
            "Output:\nbwrap: execvp codex-linux-sandbox: No such file or directory\n",
        ),
        # bubblewrap's words in the output of a command that succeeded are the command's own
        call("c2", "cat notes.txt"),
        output("c2", "Process exited with code 0\nOutput:\nbwrap: a line the notes hold\n"),
        call("c3", "echo x >> /home/agent/vigil.toml"),
        output("c3", "Process exited with code 1\nOutput:\n/bin/bash: /home/agent/vigil.toml: Read-only file system\n"),
    )
    assert rollout_sandbox_failures(path) == [
        "exec_command: echo hello > out.txt (bwrap: execvp codex-linux-sandbox: No such file or directory)"
    ]
    assert rollout_refusals(path) == ["exec_command: echo x >> /home/agent/vigil.toml (blocked: Read-only file system)"]
