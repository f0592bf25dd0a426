"""The import-linter contract in pyproject.toml covers every module of the package.

The pytest layer is every module that imports pytest; every other module must sit in one
layer of the contract, and in the "no pytest below the pytest layer" list, so that a new
module cannot escape the layering by not being named.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "orbench_pytest"


def _contracts() -> dict[str, dict]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return {c["type"]: c for c in config["tool"]["importlinter"]["contracts"]}


def _imports_pytest(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level
                 else [])
        if any(name.split(".")[0] in ("pytest", "_pytest") for name in names):
            return True
    return False


def _modules() -> dict[str, bool]:
    """Every module of the package → whether it imports pytest itself."""
    return {path.stem: _imports_pytest(path) for path in PACKAGE.glob("*.py")
            if path.stem != "__init__"}


def _layered() -> list[str]:
    names = []
    for layer in _contracts()["layers"]["layers"]:
        names += [name.strip().strip("()") for name in layer.replace("|", ":").split(":")]
    return names


def test_every_module_outside_the_pytest_layer_is_in_one_layer() -> None:
    modules = _modules()
    layered = _layered()
    assert len(layered) == len(set(layered)), "a module is in two layers"
    unplaced = sorted(name for name, pytest_layer in modules.items()
                      if not pytest_layer and name not in layered)
    assert not unplaced, f"add to a layer of [tool.importlinter] in pyproject.toml: {unplaced}"
    misplaced = sorted(name for name in layered if modules.get(name))
    assert not misplaced, f"these import pytest, so they belong to the pytest layer: {misplaced}"
    gone = sorted(name for name in layered if name not in modules)
    assert not gone, f"listed in the contract but not in the package: {gone}"


def test_the_no_pytest_list_is_the_layered_modules() -> None:
    forbidden = _contracts()["forbidden"]
    listed = [name.removeprefix("orbench_pytest.") for name in forbidden["source_modules"]]
    assert sorted(listed) == sorted(_layered())
    assert set(forbidden["forbidden_modules"]) == {"pytest", "_pytest"}


def test_the_pytest_layer_is_known_to_ruff() -> None:
    """Modules that import pytest are exempt from ruff's banned-api rule, and only they."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    ignores = config["tool"]["ruff"]["lint"]["per-file-ignores"]
    exempt = {Path(pattern).stem for pattern, rules in ignores.items()
              if pattern.startswith("orbench_pytest/") and "TID251" in rules}
    assert exempt == {name for name, pytest_layer in _modules().items() if pytest_layer}
