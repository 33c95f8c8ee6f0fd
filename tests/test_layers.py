"""The import-linter layers contract names every module: a new module left out of
it would have its imports go unchecked (import-linter checks only the layers it is
given)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("vigil", "sensors", "dispatch", "tui")


def _layer_modules() -> list[str]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    (layers,) = (c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers")
    assert "ignore_imports" not in layers
    return [name.strip() for layer in layers["layers"] for name in re.split(r"[|:]", layer)]


def _modules() -> list[str]:
    found = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


def test_every_module_is_in_a_layer() -> None:
    layers = _layer_modules()
    # the root package `vigil` is an empty namespace for the core's modules
    left_out = [
        module
        for module in _modules()
        if module != "vigil" and not any(module == layer or module.startswith(layer + ".") for layer in layers)
    ]
    assert left_out == []
