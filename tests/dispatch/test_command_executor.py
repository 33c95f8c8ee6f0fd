"""The command executor: a skill's argv, the task as JSON on stdin, exit code and
last JSON line decide; task text never reaches a shell."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from dispatch.executors.command import CommandExecutor
from dispatch.skills import load_skill
from tests.dispatch.agent_support import REPO, agent_settings, make_ctx, make_task
from vigil.models import OutcomeKind


def script(home: Path, body: str) -> tuple[str, ...]:
    path = home / "script.py"
    path.write_text(body, encoding="utf-8")
    return (sys.executable, str(path))


async def test_the_task_arrives_as_json_and_the_last_json_line_reports(home: Path) -> None:
    seen = home / "seen.json"
    command = script(
        home,
        "import json, sys\n"
        f"task = json.load(sys.stdin); open({str(seen)!r}, 'w').write(json.dumps(task))\n"
        "print('working'); print('{\"progress\": 1}')\n"
        "print(json.dumps({'status': 'completed', 'summary': 'did ' + task['subject'], 'detail': 'all of it',"
        " 'cost_usd': 0.25}))\n",
    )
    settings = agent_settings(home)
    task = make_task(subject="the thing", skills=("x",), parent_id=3)
    outcome = await CommandExecutor().run(task, make_ctx(settings, command=command, attempt=2, run_id=9))
    assert outcome.kind is OutcomeKind.SUCCESS
    assert outcome.summary == "did the thing"
    assert outcome.detail == "all of it"
    assert outcome.cost_usd == 0.25
    assert outcome.exit_code == 0
    got = json.loads(seen.read_text())
    assert got == {
        "id": 7, "subject": "the thing", "description": "Three new files arrived.", "priority": 3,
        "skills": ["x"], "source": "human", "source_key": None, "parent_id": 3, "attempt": 2, "run_id": 9,
        "home": str(home),
    }  # fmt: skip


async def test_exit_zero_without_a_report_is_success_with_the_output(home: Path) -> None:
    command = script(home, "print('line one')\nprint('line two')\n")
    outcome = await CommandExecutor().run(make_task(), make_ctx(agent_settings(home), command=command))
    assert outcome.kind is OutcomeKind.SUCCESS
    assert outcome.summary == "line one line two"
    assert outcome.detail == "line one\nline two"


async def test_a_failed_status_fails(home: Path) -> None:
    command = script(home, 'print(\'{"status": "failed", "summary": "no space"}\')\n')
    outcome = await CommandExecutor().run(make_task(), make_ctx(agent_settings(home), command=command))
    assert outcome.kind is OutcomeKind.FAILED
    assert outcome.error == "no space"
    assert outcome.detail == ""  # the report line is not repeated as output


async def test_a_report_without_summary_leaves_the_rest_of_the_output_as_summary(home: Path) -> None:
    command = script(home, "print('checked 3 hosts')\nprint('{\"status\": \"completed\"}')\n")
    outcome = await CommandExecutor().run(make_task(), make_ctx(agent_settings(home), command=command))
    assert outcome.kind is OutcomeKind.SUCCESS
    assert outcome.summary == "checked 3 hosts"
    assert outcome.detail == "checked 3 hosts"


async def test_non_zero_exit_fails_whatever_the_report_says(home: Path) -> None:
    command = script(
        home, "import sys\nprint('{\"status\": \"completed\"}')\nprint('boom', file=sys.stderr)\nsys.exit(4)\n"
    )
    ctx = make_ctx(agent_settings(home), command=command)
    outcome = await CommandExecutor().run(make_task(), ctx)
    assert outcome.kind is OutcomeKind.FAILED
    assert outcome.exit_code == 4
    assert outcome.error == "exited with code 4: boom"
    assert '"vigil.stderr"' in ctx.transcript_path.read_text()


async def test_an_unknown_status_is_a_failure_that_says_so(home: Path) -> None:
    command = script(home, 'print(\'{"status": "maybe"}\')\n')
    outcome = await CommandExecutor().run(make_task(), make_ctx(agent_settings(home), command=command))
    assert outcome.kind is OutcomeKind.FAILED
    assert outcome.error is not None
    assert "'maybe'" in outcome.error


async def test_no_command_fails_clearly(home: Path) -> None:
    outcome = await CommandExecutor().run(make_task(), make_ctx(agent_settings(home), command=None))
    assert outcome.kind is OutcomeKind.FAILED
    assert "command" in outcome.summary


async def test_timeout(home: Path) -> None:
    command = script(home, "import time\ntime.sleep(600)\n")
    ctx = make_ctx(agent_settings(home), command=command, timeout_s=1.0)
    outcome = await CommandExecutor(grace_s=0.2).run(make_task(), ctx)
    assert outcome.kind is OutcomeKind.TIMEOUT


async def test_shell_syntax_in_the_subject_is_only_data(home: Path) -> None:
    seen = home / "seen.txt"
    command = script(home, f"import json, sys\nopen({str(seen)!r}, 'w').write(json.load(sys.stdin)['subject'])\n")
    subject = "$(touch pwned) `touch pwned2`; \"q\" 'q'\nrm -rf nothing && touch pwned3"
    outcome = await CommandExecutor().run(make_task(subject=subject), make_ctx(agent_settings(home), command=command))
    assert outcome.kind is OutcomeKind.SUCCESS
    assert seen.read_text() == subject
    assert not any((home / name).exists() for name in ("pwned", "pwned2", "pwned3"))


async def test_the_shipped_disk_check_skill_runs(home: Path) -> None:
    skill = load_skill(REPO / "skills", "disk-check")
    assert skill.command is not None
    settings = agent_settings(home)
    ok = await CommandExecutor().run(
        make_task(description="min_free_percent=0"), make_ctx(settings, command=skill.command)
    )
    assert ok.kind is OutcomeKind.SUCCESS
    assert "% free" in ok.summary
    low = await CommandExecutor().run(
        make_task(description="min_free_percent=100.1"), make_ctx(settings, command=skill.command, attempt=2)
    )
    assert low.kind is OutcomeKind.FAILED
    assert "below the 100.1% minimum" in low.summary
