"""An agent CLI is one folder: no product module outside ``dispatch/agents/`` (and
the core's facts, ``vigil/agent_clis.py``) branches on a CLI's name; each looks the
CLI up by name (docs/architecture.md, *The agent CLIs*)."""

from __future__ import annotations

import ast
from pathlib import Path

from dispatch.agents.registry import AGENT_CLIS
from vigil.agent_clis import CLI_FACTS

REPO = Path(__file__).resolve().parent.parent
ALLOWED = (REPO / "dispatch" / "agents", REPO / "vigil" / "agent_clis.py")


def _names_a_cli(node: ast.AST) -> bool:
    """A ``"claude"`` literal, or a tuple, list or set holding one."""
    items = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
    return any(isinstance(item, ast.Constant) and item.value in CLI_FACTS for item in items)


def test_no_module_outside_the_agents_folder_branches_on_a_cli_name() -> None:
    found = []
    for package in ("vigil", "sensors", "dispatch", "tui"):
        for path in sorted((REPO / package).rglob("*.py")):
            if any(path == allowed or allowed in path.parents for allowed in ALLOWED):
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                compared = [node.left, *node.comparators] if isinstance(node, ast.Compare) else []
                keys = [key for key in node.keys if key is not None] if isinstance(node, ast.Dict) else []
                if isinstance(node, ast.expr) and any(_names_a_cli(part) for part in [*compared, *keys]):
                    found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert found == []


def test_the_registry_describes_each_cli_the_core_knows() -> None:
    assert list(AGENT_CLIS) == list(CLI_FACTS)
    assert all(cli.facts is CLI_FACTS[name] for name, cli in AGENT_CLIS.items())
