"""Code work with the real Claude Code and Codex against the scripted model server,
on real repositories made by the tests, from homes made by ``vigil init`` with
only the executor line changed; the tasks are added as a new user would, with
``vigil task add --repo … --check … --review --merge …``:

* each task works in a clone of its own, on its own branch, and the agent
  commits there from inside its CLI's sandbox; what it left is kept on
  ``refs/vigil/tasks/<id>``; two lanes run two tasks at once, and neither sees the
  other's edits;
* a failed run's edits are kept in its change, and the next task's clone is clean;
* a check that fails (the model's first patch is wrong) retries the task with the
  failing output in the second prompt, then passes;
* review: ``vigil task approve`` merges, in each mode; a conflict goes back to the
  agent's own session, which resolves it; ``vigil task reject`` (request changes)
  puts the comment in front of the session that made the change;
* a missing repository fails the task with a clear error, and nothing is run.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.agents import anthropic_api, openai_api
from tests.agents.clis import needs_claude, needs_codex
from tests.agents.codex_home import CodexHome
from tests.agents.homes import ClaudeHome
from tests.agents.model_server import Reply, Script, Text, ToolCall
from tests.code.repos import Repo

pytestmark = pytest.mark.slow

# passes when answer.txt says 42, and prints what it found either way
CHECK = (
    f"{sys.executable} -c \"import sys; t = open('answer.txt').read().strip(); print('found', t); sys.exit(t != '42')\""
)


@dataclass
class Coder:
    """One agent CLI in a home of its own: its model's script, how its model runs a
    shell command or calls a Vigil tool, and what its server saw."""

    home: ClaudeHome
    script: Script
    shell: Callable[[str], Reply]
    vigil: Callable[..., Reply]
    tool_outputs: Callable[[], list[str]]  # of the last run
    prompts: Callable[[], list[str]]  # each run's prompt, in order
    outputs_by_run: Callable[[], list[list[str]]] = lambda: []  # each run's tool outputs

    def dispatch_once(self) -> None:
        proc = self.home.vigil("dispatch", "once", timeout=120)
        assert proc.returncode == 0, proc.stderr


def resumed_with(home: ClaudeHome, task_id: int) -> str:
    """What the task's last run sent its agent: it resumed the session of the run
    before (whose result was sent back), so only the new message."""
    *_, before, last = home.runs(task_id)
    assert last["resumed_from"] == before["id"]
    (record, *_) = [line for line in home.transcript(last) if line.get("type") == "vigil.prompt"]
    assert before["session_id"] in record["argv"]
    assert "# The task" not in record["text"]
    return str(record["text"])


def _unique(texts: list[str]) -> list[str]:
    return list(dict.fromkeys(texts))


@contextmanager
def claude(tmp_path: Path) -> Iterator[Coder]:
    with anthropic_api.anthropic_server() as api:

        def outputs() -> list[str]:
            conversation = api.conversation()
            blocks = [b for m in conversation[-1]["messages"] for b in m["content"] if isinstance(b, dict)]
            return [json.dumps(b.get("content")) for b in blocks if b.get("type") == "tool_result"]

        def prompt_of(body: dict[str, object]) -> str:
            """The prompt Vigil sent: the first message's text block that has it (the
            CLI adds blocks of its own, which differ from request to request)."""
            first = body["messages"][0]["content"]  # type: ignore[index]
            return str(next(b["text"] for b in first if b.get("type") == "text" and "How to report back" in b["text"]))

        def prompts() -> list[str]:
            return _unique([prompt_of(body) for body in api.conversation()])

        def outputs_by_run() -> list[list[str]]:
            last = {prompt_of(body): body for body in api.conversation()}
            return [
                [json.dumps(b.get("content")) for m in body["messages"] for b in m["content"] if _is_result(b)]
                for body in last.values()
            ]

        yield Coder(
            ClaudeHome.initialised(tmp_path, api.server.url),
            api.script,
            lambda command: ToolCall("Bash", {"command": command}),
            anthropic_api.vigil_tool,
            outputs,
            prompts,
            outputs_by_run,
        )


def _is_result(block: object) -> bool:
    return isinstance(block, dict) and block.get("type") == "tool_result"


@contextmanager
def codex(tmp_path: Path) -> Iterator[Coder]:
    with openai_api.openai_server() as api:

        def prompts() -> list[str]:
            found = []
            for request in api.requests():
                users = [item for item in request.get("input", []) if item.get("role") == "user"]
                found += [json.dumps(item) for item in users if "How to report back" in json.dumps(item)][:1]
            return _unique(found)

        yield Coder(
            CodexHome.initialised(tmp_path, api.server.url),
            api.script,
            openai_api.shell,
            openai_api.vigil_tool,
            api.tool_outputs,
            prompts,
        )


CODERS = [
    pytest.param(claude, id="claude", marks=needs_claude),
    pytest.param(codex, id="codex", marks=needs_codex),
]
MakeCoder = Callable[[Path], AbstractContextManager[Coder]]


def project(tmp_path: Path) -> Repo:
    return Repo.make(tmp_path / "project", {"answer.txt": "0\n", "README.md": "the project\n"})


def worktree_of(home: ClaudeHome, task_id: int) -> dict[str, str]:
    value: dict[str, str] = json.loads(home.task(task_id)["worktree"])
    return value


def change_of(task_id: int) -> str:
    """The ref in the operator's repository that holds the task's change."""
    return f"refs/vigil/tasks/{task_id}"


@pytest.mark.parametrize("coder", CODERS)
def test_a_failed_runs_edits_are_kept_and_the_next_tasks_clone_is_clean(tmp_path: Path, coder: MakeCoder) -> None:
    repo = project(tmp_path)
    with coder(tmp_path) as agent:
        home = agent.home
        first = home.add_task("Half a fix", "--repo", str(repo.path))
        second = home.add_task("Another task", "--repo", str(repo.path))
        agent.script.add(
            agent.shell("printf 'half\\n' > half.txt && git add half.txt && git commit -qm 'half a fix'"),
            agent.shell("printf 'more\\n' > more.txt"),
            agent.vigil("close", status="failed", summary="could not finish"),
            Text("Gave up."),
            agent.shell("git status --porcelain; ls; echo listed"),
            Text("Looked."),
        )
        agent.dispatch_once()
        agent.dispatch_once()
        listing = agent.tool_outputs()[-1]
        one = home.task(first)
        branch = worktree_of(home, first)["branch"]
        two_path = Path(worktree_of(home, second)["path"])
    assert one["status"] == "failed"
    assert branch == f"vigil/{first}-half-a-fix"
    # committed by the agent inside its CLI's sandbox; what it left, committed by Vigil
    assert repo.log(change_of(first))[:2] == [
        f"Work left uncommitted by the agent (Vigil task #{first}, attempt 1)",
        "half a fix",
    ]
    assert repo.show(change_of(first), "more.txt") == "more"
    assert repo.git("branch", "--list", "vigil/*") == ""  # the agent wrote nothing in the repository
    (run,) = home.runs(first)
    changes = json.loads(run["changes"])
    assert (changes["dirty"], len(changes["commits"]), changes["files"]) == (True, 2, 2)
    assert home.task(second)["status"] == "completed"
    assert "answer.txt" in listing
    assert "listed" in listing
    assert "half.txt" not in listing
    assert "more.txt" not in listing
    assert not (two_path / "half.txt").exists()
    assert repo.log("main") == ["first commit"]


@pytest.mark.parametrize("coder", CODERS)
def test_a_check_fails_once_then_passes_with_its_output_in_the_second_prompt(tmp_path: Path, coder: MakeCoder) -> None:
    repo = project(tmp_path)
    with coder(tmp_path) as agent:
        home = agent.home
        task_id = home.add_task("Answer the question", "--repo", str(repo.path), "--check", CHECK)
        agent.script.add(
            agent.shell("printf '41\\n' > answer.txt && git commit -qam 'answer 41'"),
            Text("Done: the answer is 41."),
            agent.shell("printf '42\\n' > answer.txt && git commit -qam 'answer 42'"),
            Text("Fixed: the answer is 42."),
        )
        agent.dispatch_once()
        retried = home.task(task_id)
        agent.dispatch_once()
        prompts = agent.prompts()
        shown = home.vigil("task", "show", str(task_id)).stdout
    assert (retried["status"], retried["attempt_count"]) == ("pending", 1)
    assert home.task(task_id)["status"] == "completed"
    runs = home.runs(task_id)
    assert [r["outcome"] for r in runs] == ["checks_failed", "success"]
    failed = json.loads(runs[0]["checks"])
    assert (failed[0]["exit_code"], failed[0]["output"]) == (1, "found 41")
    assert json.loads(runs[1]["checks"])[0]["exit_code"] == 0
    assert len(prompts) == 2
    assert "These checks must pass" in prompts[0]
    assert "found 41" not in prompts[0]
    assert "failed (exit 1); its output ended with:" in prompts[1]
    assert "found 41" in prompts[1]
    assert "check exit 1:" in shown
    assert "check passed:" in shown
    assert repo.show(change_of(task_id), "answer.txt") == "42"


@pytest.mark.parametrize(
    ("coder", "mode"),
    [
        pytest.param(claude, "ff", id="claude-ff", marks=needs_claude),
        pytest.param(claude, "merge", id="claude-merge", marks=needs_claude),
        pytest.param(claude, "squash", id="claude-squash", marks=needs_claude),
        pytest.param(claude, "branch", id="claude-branch", marks=needs_claude),
        pytest.param(codex, "squash", id="codex-squash", marks=needs_codex),
    ],
)
def test_approving_a_reviewed_task_merges_its_branch(tmp_path: Path, coder: MakeCoder, mode: str) -> None:
    repo = project(tmp_path)
    with coder(tmp_path) as agent:
        home = agent.home
        task_id = home.add_task(
            "Answer the question", "--repo", str(repo.path), "--check", CHECK, "--review", "--merge", mode
        )
        agent.script.add(
            agent.shell("printf '42\\n' > answer.txt && git commit -qam 'answer 42'"),
            Text("The answer is 42."),
        )
        agent.dispatch_once()
        held = home.task(task_id)
        diff = json.loads(home.vigil("task", "diff", str(task_id), "--json").stdout)
        approved = home.vigil("task", "approve", str(task_id))
    assert (held["status"], held["review"]) == ("blocked", "pending")
    assert [(f["path"], f["added"], f["removed"]) for f in diff["files"]] == [("answer.txt", 1, 1)]
    assert "+42" in diff["patch"]
    assert approved.returncode == 0, approved.stderr
    task = home.task(task_id)
    assert (task["status"], task["review"]) == ("completed", "approved")
    branch = worktree_of(home, task_id)["branch"]
    merge = home.rows(
        "SELECT actor, from_value, to_value, detail FROM task_events WHERE task_id = ? AND kind = 'merge'", task_id
    )
    assert [(m["actor"], m["from_value"]) for m in merge] == [("human", branch)]
    if mode == "branch":
        assert repo.show("main", "answer.txt") == "0"
        assert f"branch {branch} left for a pull request" in approved.stdout
        assert merge[0]["to_value"] == repo.tip(branch) == repo.git("rev-parse", change_of(task_id))
        return
    assert repo.show("main", "answer.txt") == "42"
    assert (repo.path / "answer.txt").read_text() == "42\n"
    assert merge[0]["to_value"] == repo.tip("main")
    assert merge[0]["detail"] == f"{mode} into main"
    subjects = repo.log("main")
    assert subjects[0] == {"ff": "answer 42", "merge": "Answer the question", "squash": "Answer the question"}[mode]


@needs_claude
def test_a_merge_conflict_goes_back_to_the_agent_which_resolves_it(tmp_path: Path) -> None:
    repo = project(tmp_path)
    with claude(tmp_path) as agent:
        home = agent.home
        task_id = home.add_task("Answer the question", "--repo", str(repo.path), "--review", "--merge", "merge")
        agent.script.add(
            agent.shell("printf 'agent\\n' > answer.txt && git commit -qam 'the agent answers'"),
            Text("Answered."),
            agent.shell(
                "git fetch -q origin; git merge origin/main >/dev/null; printf 'agent and person\\n' > answer.txt && "
                "git commit -qam 'resolve the conflict with main'"
            ),
            Text("Resolved the conflict."),
        )
        agent.dispatch_once()
        repo.commit({"answer.txt": "person\n"}, "a person answers on main")
        refused = home.vigil("task", "approve", str(task_id))
        back = home.task(task_id)
        agent.dispatch_once()
        approved = home.vigil("task", "approve", str(task_id))
    assert refused.returncode == 1
    assert "not merged, sent back to its agent" in refused.stdout
    assert "conflicts in: answer.txt" in refused.stdout
    assert (back["status"], back["review"]) == ("pending", "rejected")
    sent = resumed_with(home, task_id)  # the session that made the change, told of the conflict
    assert "merge conflict: merging your branch into main" in sent
    assert "conflicts in: answer.txt" in sent
    assert approved.returncode == 0, approved.stdout + approved.stderr
    assert home.task(task_id)["status"] == "completed"
    assert repo.show("main", "answer.txt") == "agent and person"


@pytest.mark.parametrize("coder", CODERS)
def test_requested_changes_are_put_in_front_of_the_session_that_made_the_change(
    tmp_path: Path, coder: MakeCoder
) -> None:
    repo = project(tmp_path)
    with coder(tmp_path) as agent:
        home = agent.home
        task_id = home.add_task("Answer the question", "--repo", str(repo.path), "--review")
        agent.script.add(
            agent.shell("printf '42\\n' > answer.txt && git commit -qam 'answer 42'"),
            Text("The answer is 42."),
            agent.shell("printf '42 (six times seven)\\n' > answer.txt && git commit -qam 'say why'"),
            Text("Said why."),
        )
        agent.dispatch_once()
        rejected = home.vigil("task", "reject", str(task_id), "--reason", "Say why it is 42")
        agent.dispatch_once()
    assert rejected.returncode == 0, rejected.stderr
    assert "changes requested" in rejected.stdout
    assert "From human:\nreview: Say why it is 42" in resumed_with(home, task_id)
    task = home.task(task_id)
    assert (task["status"], task["review"]) == ("blocked", "pending")
    assert repo.show(change_of(task_id), "answer.txt") == "42 (six times seven)"


@pytest.mark.parametrize("coder", CODERS)
def test_a_missing_repository_fails_the_task_with_nothing_run(tmp_path: Path, coder: MakeCoder) -> None:
    missing = tmp_path / "gone"
    with coder(tmp_path) as agent:
        home = agent.home
        config = home.path / "vigil.toml"
        config.write_text(config.read_text().replace("[dispatch]\n", f'[dispatch]\nrepo = "{missing}"\n', 1))
        task_id = home.add_task("Answer the question")
        agent.dispatch_once()
        prompts = agent.prompts()
    task = home.task(task_id)
    assert task["status"] == "failed"
    assert task["result_summary"] == f"repository {missing} does not exist"
    assert prompts == []
    assert home.runs(task_id)[0]["pid"] is None  # no process was started
    assert not (home.path / "work" / str(task_id)).exists()


@needs_claude
def test_two_lanes_run_two_tasks_at_once_in_two_clones(tmp_path: Path) -> None:
    """Each agent writes its clone's path into mine.txt, waits until both
    clones have one (so both run at once), then lists its own: it sees its own
    file only. (No ``$VAR`` nor ``$(…)``: Claude Code asks before running those.)"""
    repo = project(tmp_path)
    wait = (
        "pwd > mine.txt; until test -e ../1/mine.txt && test -e ../2/mine.txt; do sleep 0.2; done; "
        "ls; cat mine.txt; git add mine.txt && git commit -qm mine"
    )
    with claude(tmp_path) as agent:
        home = agent.home
        config = home.path / "vigil.toml"
        config.write_text(config.read_text().replace("[dispatch]\n", "[dispatch]\nlanes = 2\n", 1))
        ids = [home.add_task(f"Task {n}", "--repo", str(repo.path)) for n in (1, 2)]
        assert ids == [1, 2]  # the clones are work/1 and work/2
        # both agents take their shell turn before either's next request can come
        agent.script.add(agent.shell(wait), agent.shell(wait), Text("Done."), Text("Done."))
        loops = [home.start("run"), home.start("run")]
        try:
            home.wait_for(lambda: all(home.task(i)["status"] != "pending" for i in ids), timeout_s=90)
            home.wait_for(lambda: all(home.task(i)["status"] != "active" for i in ids), timeout_s=90)
        finally:
            for loop in loops:
                home.stop(loop)
        listings = [outputs[0] for outputs in agent.outputs_by_run()]
    assert [home.task(i)["status"] for i in ids] == ["completed", "completed"]
    worktrees = [worktree_of(home, i) for i in ids]
    assert worktrees[0]["path"] != worktrees[1]["path"]
    for task_id, worktree in zip(ids, worktrees, strict=True):
        assert repo.git("ls-tree", "--name-only", change_of(task_id)).splitlines() == [
            "README.md",
            "answer.txt",
            "mine.txt",
        ]
        assert repo.show(change_of(task_id), "mine.txt") == worktree["path"]
    # each agent saw its own mine.txt only, though the other's existed by then
    assert sorted(listings) == sorted(json.dumps(f"README.md\nanswer.txt\nmine.txt\n{w['path']}") for w in worktrees)


DOC = Path(__file__).resolve().parents[2] / "docs" / "coding.md"
EXAMPLE = re.compile(r"<!-- example: (?P<path>\S+) -->\n```\w*\n(?P<body>.*?)```", re.DOTALL)


@needs_claude
def test_the_walk_through_of_docs_coding_md_as_written(tmp_path: Path) -> None:
    """docs/coding.md's files, skill and commands, with the model's first fix wrong:
    from a failing test to a reviewed fix merged into main."""
    examples = {m["path"]: m["body"] for m in EXAMPLE.finditer(DOC.read_text())}
    assert sorted(examples) == ["calc/.gitignore", "calc/calc.py", "calc/test_calc.py", "skills/fix-tests/SKILL.md"]
    calc = tmp_path / "src" / "calc"
    repo = Repo.make(
        calc, {name.removeprefix("calc/"): body for name, body in examples.items() if name.startswith("calc/")}
    )
    assert repo.git("status", "--porcelain") == ""
    failing = subprocess.run([sys.executable, "-m", "unittest"], cwd=calc, capture_output=True, text=True, check=False)
    assert failing.returncode == 1
    with claude(tmp_path) as agent:
        home = agent.home
        skill = home.path / "skills" / "fix-tests" / "SKILL.md"
        skill.parent.mkdir(parents=True)
        skill.write_text(examples["skills/fix-tests/SKILL.md"].replace("~/src/calc", str(calc)))
        agent.script.add(
            agent.shell("sed -i 's/a - b/b - a/' calc.py && git commit -qam 'swap the operands'"),
            Text("Swapped the operands."),
            agent.shell("sed -i 's/b - a/a + b/' calc.py && python3 -m unittest && git commit -qam 'add() adds'"),
            Text("add() subtracted; it adds now, and the test passes."),
        )
        assert home.vigil("task", "add", "Make the tests pass", "--skills", "fix-tests").stdout == "created task #1\n"
        first = home.vigil("dispatch", "once", timeout=120).stdout
        second = home.vigil("dispatch", "once", timeout=120).stdout
        shown = home.vigil("task", "show", "1").stdout
        diff = home.vigil("task", "diff", "1").stdout
        approved = home.vigil("task", "approve", "1")
    assert first == "task #1 pending: check failed: python3 -m unittest (exit 1)\n"
    assert second.startswith("task #1 awaits review (vigil task diff, approve, reject): add() subtracted")
    assert "branch            vigil/1-make-the-tests-pass (from main at " in shown
    assert "check exit 1: python3 -m unittest" in shown
    assert "check passed: python3 -m unittest" in shown
    assert diff.startswith("task #1: vigil/1-make-the-tests-pass against main")
    assert "-    return a - b\n+    return a + b" in diff
    assert "__pycache__" not in diff
    assert approved.returncode == 0, approved.stderr
    assert "vigil/1-make-the-tests-pass merged into main (squash) at" in approved.stdout
    assert repo.log("main") == ["Make the tests pass", "first commit"]
    assert (
        subprocess.run([sys.executable, "-m", "unittest"], cwd=calc, capture_output=True, check=False).returncode == 0
    )
