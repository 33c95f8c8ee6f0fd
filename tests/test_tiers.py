"""Each test module declares its own tier (``pytestmark = pytest.mark.slow``, or the
mark on a test); these rules hold the declarations to what the tiers promise: what
runs the real agent CLIs or a real terminal, the reliability suite, and every test
`make test` runs alone is in the slow tier, which `make check` leaves out."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

TESTS = REPO / "tests"
REAL_CLIS = {"needs_claude", "needs_codex"}  # tests.agents.clis: the real Claude Code and Codex


def modules() -> Iterator[Path]:
    yield from sorted(TESTS.rglob("test_*.py"))


def _marks(node: ast.expr | None) -> set[str]:
    """The ``pytest.mark.<name>`` names (and bare names such as ``needs_claude``) in
    a ``pytestmark`` value or a decorator list."""
    found: set[str] = set()
    for sub in ast.walk(node) if node is not None else ():
        if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Attribute) and sub.value.attr == "mark":
            found.add(sub.attr)
        elif isinstance(sub, ast.Name):
            found.add(sub.id)
    return found


def module_marks(tree: ast.Module) -> set[str]:
    values = [
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets)
    ]
    return set().union(*(_marks(value) for value in values))


def uses_tmux(tree: ast.Module) -> bool:
    """Whether the module looks for tmux (``shutil.which("tmux")``) to drive a terminal."""
    return any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "which"
        and [ast.literal_eval(arg) for arg in node.args if isinstance(arg, ast.Constant)] == ["tmux"]
        for node in ast.walk(tree)
    )


def marks_by_test(tree: ast.Module) -> dict[str, set[str]]:
    """Each test function's own marks, by name."""
    return {
        node.name: set().union(*(_marks(d) for d in node.decorator_list))
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_")
    }


def tier_problems(path: Path, source: str) -> list[str]:
    """Why the module at ``path``, ``source``, breaks a rule (none: it holds)."""
    tree = ast.parse(source)
    own = module_marks(tree)
    name = str(path.relative_to(REPO))
    problems = []
    if "slow" not in own:
        if path.parent.name == "reliability":
            problems.append(f"{name}: the reliability suite is slow; declare pytestmark = pytest.mark.slow")
        if own & REAL_CLIS:
            problems.append(f"{name}: runs the real agent CLIs; declare it slow")
        if uses_tmux(tree):
            problems.append(f"{name}: drives a real terminal (tmux); declare it slow")
        if "alone" in own:
            problems.append(f"{name}: marked alone but not slow: make check would run it")
        problems += [
            f"{name}::{test}: marked alone but not slow: make check would run it"
            for test, marks in marks_by_test(tree).items()
            if "alone" in marks and "slow" not in marks
        ]
    return problems


def test_every_module_declares_the_tier_its_kind_needs() -> None:
    found = [problem for path in modules() for problem in tier_problems(path, path.read_text(encoding="utf-8"))]
    assert found == []


CLI = "from tests.agents.clis import needs_codex\n"
TMUX = 'import shutil\nif shutil.which("tmux"): pass\n'
MARK = "import pytest\n"


@pytest.mark.parametrize(
    ("source", "problem", "declared"),
    [
        (
            CLI + "pytestmark = needs_codex\n",
            "runs the real agent CLIs",
            CLI + MARK + "pytestmark = [needs_codex, pytest.mark.slow]\n",
        ),
        (TMUX, "drives a real terminal", TMUX + MARK + "pytestmark = pytest.mark.slow\n"),
        (
            MARK + "pytestmark = pytest.mark.alone\n",
            "marked alone but not slow",
            MARK + "pytestmark = [pytest.mark.slow, pytest.mark.alone]\n",
        ),
        (
            MARK + "@pytest.mark.alone\ndef test_x(): pass\n",
            "test_x: marked alone",
            MARK + "pytestmark = pytest.mark.slow\n@pytest.mark.alone\ndef test_x(): pass\n",
        ),
    ],
)
def test_the_rules_catch_an_undeclared_tier(source: str, problem: str, declared: str) -> None:
    path = TESTS / "reliability" / "test_example.py"  # judged by its place and text, never written
    found = tier_problems(path, source)
    assert any(problem in p for p in found), found
    assert any("the reliability suite is slow" in p for p in found)
    assert tier_problems(path, declared) == []
