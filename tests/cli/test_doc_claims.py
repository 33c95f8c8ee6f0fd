"""Claims the docs make that a newcomer checked and found false: each is now true,
and a test holds it so."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.conftest import VigilRunner

DOCS = Path(__file__).parents[2] / "docs"


def test_the_skill_key_table_is_one_table_and_names_every_key_the_parser_takes() -> None:
    text = (DOCS / "skills.md").read_text()
    table = text.split("| key | required | meaning |", 1)[1].split("\n\n", 1)[0]
    rows = [line for line in table.splitlines()[2:] if line.strip()]  # after the |---| line
    assert all(line.startswith("| `") for line in rows), rows  # no blank line splits it
    keys = {line.split("`")[1] for line in rows}
    assert {"description", "command", "workdir", "resume_after_failure", "merge"} <= keys


def test_a_command_skill_runs_in_the_tasks_own_folder_not_the_home_as_skills_md_says(
    home: Path, vigil: VigilRunner
) -> None:
    folder = home / "skills" / "where"
    folder.mkdir(parents=True)
    (folder / "run.py").write_text('import json, os\nprint(json.dumps({"summary": os.getcwd()}))\n')
    (folder / "SKILL.md").write_text(f'---\ndescription: where\ncommand: ["{sys.executable}", "./run.py"]\n---\n')
    task_id = json.loads(vigil("task", "add", "where am I", "--skills", "where", "--json", check=True).stdout)["id"]
    vigil("dispatch", "once", check=True)
    shown = json.loads(vigil("task", "show", str(task_id), "--json", check=True).stdout)
    ran_in = Path(shown["result_summary"])
    assert ran_in == (home / "work" / str(task_id)).resolve()
    assert ran_in != home.resolve()
    assert "scratch folder of the task's own, `work/<task id>`" in " ".join((DOCS / "skills.md").read_text().split())
