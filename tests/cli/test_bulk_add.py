"""`vigil task add --from`: 10,000 JSON lines with repeated keys and a bad line, in
one transaction, through the real `vigil`."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import VigilRunner

LINES = 10_000
BAD_LINE = 5_001


def _lines(path: Path) -> Path:
    """10,000 lines: every 10th reuses the key of the line before it (an open
    repeat), line 5,001 is not JSON; some wait for approval, some are due later."""
    with path.open("w", encoding="utf-8") as out:
        for n in range(1, LINES + 1):
            if n == BAD_LINE:
                out.write('{"subject": "cut short\n')
                continue
            record: dict[str, object] = {"subject": f"bulk {n}", "priority": 1 + n % 9, "skills": []}
            record["source_key"] = f"key-{n - 1}" if n % 10 == 0 else f"key-{n}"
            if n % 1000 == 7:
                record["requires_approval"] = True
            if n % 1000 == 8:
                record["scheduled_for"] = "2h"
            out.write(json.dumps(record) + "\n")
        out.write("\n")  # a blank line at the end is nothing
    return path


def test_a_bad_line_refuses_the_whole_batch(vigil: VigilRunner, tmp_path: Path) -> None:
    result = vigil("task", "add", "--from", str(_lines(tmp_path / "tasks.jsonl")))
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"vigil: error: 1 bad line(s), nothing added: line {BAD_LINE}: not JSON: "
        "Unterminated string starting at: line 1 column 13 (char 12); --skip-bad adds the others"
    )
    assert json.loads(vigil("task", "list", "--json", check=True).stdout)["total"] == 0


def test_ten_thousand_lines_with_repeated_keys_and_a_bad_one(vigil: VigilRunner, tmp_path: Path) -> None:
    path = _lines(tmp_path / "tasks.jsonl")
    result = vigil("task", "add", "--from", str(path), "--skip-bad", "--json")
    assert result.returncode == 1  # a line was refused
    report = json.loads(result.stdout)
    lines = report["lines"]
    assert [line["line"] for line in lines] == list(range(1, LINES + 1))
    repeats = list(range(10, LINES + 1, 10))
    assert (report["created"], report["existing"], report["refused"]) == (LINES - len(repeats) - 1, 1000, 1)
    by_line = {line["line"]: line for line in lines}
    for n in repeats:  # the task its key already names, created earlier in the same batch
        assert by_line[n]["result"] == "existing"
        assert by_line[n]["id"] == by_line[n - 1]["id"]
    assert by_line[BAD_LINE]["result"] == "refused"
    assert by_line[BAD_LINE]["reason"].startswith("not JSON")

    listed = json.loads(vigil("task", "list", "--all", "--json", check=True).stdout)
    assert listed["total"] == report["created"]
    subjects = {t["subject"] for t in listed["tasks"]}
    assert "bulk 10" not in subjects
    assert {"bulk 9", "bulk 11", f"bulk {BAD_LINE + 1}"} <= subjects
    approval = json.loads(vigil("task", "list", "--status", "approval", "--all", "--json", check=True).stdout)
    assert {t["subject"] for t in approval["tasks"]} == {f"bulk {n}" for n in range(7, LINES, 1000)}

    again = vigil("task", "add", "--from", str(path), "--skip-bad")  # every key is held now
    assert again.returncode == 1
    assert again.stdout.splitlines() == [
        f"created 0, existing {LINES - 1:,}, refused 1",
        f"line {BAD_LINE}: refused: not JSON: Unterminated string starting at: line 1 column 13 (char 12)",
    ]


def test_from_stdin_and_what_does_not_go_with_it(vigil: VigilRunner) -> None:
    added = vigil("task", "add", "--from", "-", input_text='{"subject": "from a pipe", "skills": ["nope"]}\n')
    assert added.returncode == 2
    assert "line 1: unknown skill 'nope'" in added.stderr
    ok = vigil("task", "add", "--from", "-", input_text='{"subject": "from a pipe", "id": 77, "status": "done"}\n')
    assert ok.stdout.strip() == "created 1, existing 0, refused 0"
    both = vigil("task", "add", "x", "--from", "-", input_text="")
    assert (both.returncode, both.stderr.strip()) == (
        2,
        "vigil: error: SUBJECT does not go with --from: each line gives its task's fields",
    )
    assert "--priority does not go with --from" in vigil("task", "add", "--from", "-", "-p", "3").stderr
    assert "Missing argument 'SUBJECT' (or --from FILE for many tasks)" in vigil("task", "add").stderr
