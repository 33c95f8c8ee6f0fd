"""The import-linter layers contracts name every module: a new module left out of
them would have its imports go unchecked (import-linter checks only the layers it
is given). Inside the store, no module imports the package's face."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("vigil", "sensors", "dispatch", "tui")


def _layers_contracts() -> list[dict[str, object]]:
    """The whole program's layers, then the store's; then any contract that orders
    the inside of one of the store's folders."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = [c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    assert all("ignore_imports" not in c for c in contracts)
    return contracts


def _layer_modules(contract: dict[str, object]) -> list[str]:
    containers = contract.get("containers", [])
    layers = contract["layers"]
    assert isinstance(containers, list)
    assert isinstance(layers, list)
    prefix = "".join(f"{c}." for c in containers)  # one container at most
    return [prefix + name.strip() for layer in layers for name in re.split(r"[|:]", layer)]


def _modules() -> list[str]:
    found = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


def test_every_module_is_in_a_layer() -> None:
    whole, *_ = _layers_contracts()
    layers = _layer_modules(whole)
    # the root package `vigil` is an empty namespace for the core's modules
    left_out = [
        module
        for module in _modules()
        if module != "vigil" and not any(module == layer or module.startswith(layer + ".") for layer in layers)
    ]
    assert left_out == []


def test_every_store_module_is_in_a_store_layer() -> None:
    """A module of the store is a layer of the store's contract, or of the contract
    of its folder (``vigil.store.sqlite``), whose package is a layer of the store's;
    a folder with no contract of its own is one layer (``vigil.store.sql``)."""
    _, store, *folders = _layers_contracts()
    layers = set(_layer_modules(store))
    for folder in _inside(folders, "vigil.store."):
        containers = folder["containers"]
        assert isinstance(containers, list)
        assert len(containers) == 1
        assert containers[0] in layers
        layers |= set(_layer_modules(folder))
    store_modules = [m for m in _modules() if m.startswith("vigil.store.")]
    left_out = [m for m in store_modules if m not in layers and m.rsplit(".", 1)[0] not in layers]
    assert left_out == []


def _inside(contracts: list[dict[str, object]], prefix: str) -> list[dict[str, object]]:
    """The contracts that order the inside of a package whose name starts with ``prefix``."""
    inside = []
    for contract in contracts:
        containers = contract.get("containers", [])
        assert isinstance(containers, list)
        if any(str(container).startswith(prefix) for container in containers):
            inside.append(contract)
    return inside


def test_every_package_module_is_in_its_layer() -> None:
    """Outside the store, a package split into modules (``vigil.cli``) has a contract
    of its own that names each of them."""
    _, _, *rest = _layers_contracts()
    packages = [c for c in rest if c not in _inside(rest, "vigil.store.")]
    assert packages
    for contract in packages:
        containers = contract["containers"]
        assert isinstance(containers, list)
        assert len(containers) == 1
        layers = set(_layer_modules(contract))
        inside = [m for m in _modules() if m.startswith(containers[0] + ".")]
        assert [m for m in inside if m not in layers] == []


def test_no_store_module_imports_the_face() -> None:
    """``from vigil.store import X`` inside the store may only name a submodule:
    the face imports the backends, so a name from it would be an import back up."""
    store = REPO / "vigil" / "store"
    submodules = {path.stem for path in store.glob("*.py")} | {path.name for path in store.iterdir() if path.is_dir()}
    climbing = []
    for path in sorted(store.rglob("*.py")):
        for names in re.findall(r"^\s*from vigil\.store import ([\w, ]+)", path.read_text(encoding="utf-8"), re.M):
            climbing += [f"{path.name}: {n.strip()}" for n in names.split(",") if n.strip() not in submodules]
    assert climbing == []
