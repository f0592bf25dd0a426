"""What identifies the candidate: the code of a `module:function` target, a user-given version.

A cached answer belongs to the candidate that gave it, so the cache key carries this
fingerprint. For `--orbench-target=module:function` it is the source of the target's module
and of every module of the user's project it imports, directly or not, found statically:
nothing is imported or executed here. "The user's project" is the folder the target module
was found in and the current folder, minus installed packages (site-packages,
dist-packages) and the Python installation. Not covered: data files the code reads (prompt
templates, configuration), imports by computed name (`importlib.import_module(name)`),
environment variables and remote services the code calls; give `--orbench-target-version`
for those.
"""

from __future__ import annotations

import ast
import hashlib
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib.machinery import ModuleSpec, PathFinder
from pathlib import Path
from typing import Any

from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.paths import resolved
from orbench_pytest.fetch.endpoints import parse_target_spec


@dataclass(frozen=True)
class CodeFingerprint:
    """A callable target's code, hashed: a changed file changes its answers' keys."""

    digest: str  # sha256 over the covered files' paths and bytes
    files: tuple[str, ...]  # covered files, relative to the project folder where possible


def code_fingerprint(spec: str, cwd: Path | None = None,
                     search_path: Sequence[str] | None = None) -> CodeFingerprint:
    """The fingerprint of `module:function`'s code, read from disk (never imported)."""
    module_name = parse_target_spec(spec)[0]
    if not all(part.isidentifier() for part in module_name.split(".")):
        raise ConfigError(f"--orbench-target: {module_name!r} is not a module name "
                          "(e.g. myapp or myapp.chat)")
    here = (cwd or Path.cwd()).resolve()
    roots = [str(here), *(p for p in (search_path if search_path is not None else sys.path)
                          if p and _elsewhere(p, here))]
    origin = _find(module_name, roots)
    if origin is None or origin.origin is None:
        raise ConfigError(f"--orbench-target: cannot find module {module_name!r} "
                          "(looked in the current folder and sys.path)")
    target_file = Path(origin.origin).resolve()
    depth = module_name.count(".") + (1 if target_file.name == "__init__.py" else 0)
    project_roots = {target_file.parents[depth], here}
    walker = _Walker(roots, project_roots)
    walker.visit(module_name, target_file, is_package=target_file.name == "__init__.py")
    digest = hashlib.sha256()
    shown = []
    for path in sorted(walker.files):
        name = _relative(path, project_roots)
        try:
            content = path.read_bytes()
        except OSError as exc:
            raise ConfigError(f"--orbench-target: cannot read {path} ({exc.strerror}), "
                              "a module the target imports") from None
        digest.update(name.encode("utf-8") + b"\0" + hashlib.sha256(content).digest())
        shown.append(name)
    return CodeFingerprint(digest.hexdigest(), tuple(shown))


def target_fingerprint(target: str | None, version: str | None,
                       cwd: Path | None = None) -> dict[str, Any]:
    """The fingerprint fields of the cache identity and of the results file."""
    found: dict[str, Any] = {}
    if target is not None:
        code = code_fingerprint(target, cwd)
        found["code"] = code.digest
        found["code_files"] = list(code.files)
    if version is not None:
        found["version"] = version
    return found


class _Walker:
    """Follows import statements through the project's own modules."""

    def __init__(self, roots: list[str], project_roots: set[Path]) -> None:
        self.roots = roots
        self.project_roots = project_roots
        self.files: set[Path] = set()
        self._seen: set[str] = set()
        self._excluded = {Path(p).resolve() for p in
                          {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}}

    def in_project(self, path: Path) -> bool:
        if any(part in ("site-packages", "dist-packages") for part in path.parts):
            return False
        if any(path.is_relative_to(prefix) for prefix in self._excluded
               if not any(root.is_relative_to(prefix) for root in self.project_roots)):
            return False
        return any(path.is_relative_to(root) for root in self.project_roots)

    def visit(self, name: str, path: Path, *, is_package: bool) -> None:
        if name in self._seen:
            return
        self._seen.add(name)
        self.files.add(path)
        # A package's __init__ runs on import of any of its modules.
        parent = name.rpartition(".")[0]
        if parent:
            self.visit_name(parent)
        if path.suffix != ".py":
            return
        try:
            tree = ast.parse(path.read_bytes(), filename=str(path))
        except (OSError, SyntaxError, ValueError):
            return  # hashed all the same; importing it will report the error
        package = name if is_package else parent
        for imported in _imports(tree, package):
            self.visit_name(imported)

    def visit_name(self, name: str) -> None:
        if name in self._seen:
            return
        spec = _find(name, self.roots)
        if spec is None or spec.origin is None or spec.origin in ("built-in", "frozen"):
            return
        path = Path(spec.origin).resolve()
        if path.is_file() and self.in_project(path):
            self.visit(name, path, is_package=path.name.startswith("__init__."))


def _elsewhere(entry: str, here: Path) -> bool:
    """A sys.path entry other than `here`; one that cannot be followed (a symlink loop in
    $PYTHONPATH) holds no module, as Python's own import finds."""
    try:
        return resolved(Path(entry)) != here
    except ConfigError:
        return False


def _imports(tree: ast.AST, package: str) -> Iterator[str]:
    """Module names an AST imports (anywhere: top level, functions, try blocks)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".") if package else []
                if node.level - 1 > len(parts):
                    continue
                parts = parts[:len(parts) - (node.level - 1)]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            if not base:
                continue
            yield base
            # `from pkg import mod` imports a module when `mod` is one.
            yield from (f"{base}.{alias.name}" for alias in node.names if alias.name != "*")


def _find(name: str, roots: list[str]) -> ModuleSpec | None:
    """Locate a module without importing it or its parent packages."""
    path: list[str] | None = roots
    spec = None
    parts = name.split(".")
    for index in range(len(parts)):
        if path is None:
            return None
        try:
            spec = PathFinder.find_spec(".".join(parts[:index + 1]), path)
        except (ImportError, ValueError):
            return None
        if spec is None:
            return None
        locations = spec.submodule_search_locations
        path = list(locations) if locations is not None else None
    return spec


def _relative(path: Path, roots: set[Path]) -> str:
    for root in sorted(roots, key=lambda r: len(r.parts), reverse=True):
        if path.is_relative_to(root):
            return path.relative_to(root).as_posix()
    return os.fspath(path)
