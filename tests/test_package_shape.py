"""The package's shape, checked over its source: no class grows past what one reader holds
in mind (issue 45: the session and the response cache had grown to 357 and 310 lines); one
exception tree (core/errors.py): every public exception class derives from OrbenchError (five
derived from Exception); and a public surface per zone: each zone's `__init__.py` lists in
`__all__` the modules other zones may import, and no other zone imports any other."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path
from types import ModuleType

import orbench_pytest
from orbench_pytest.core.errors import OrbenchError

PACKAGE = Path(orbench_pytest.__file__).parent
MAX_CLASS_LINES = 250


def classes(tree: ast.AST) -> list[ast.ClassDef]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]


def class_lengths(source: str) -> dict[str, int]:
    """Each class of a module's source and its length in lines (decorators excluded)."""
    return {node.name: (node.end_lineno or node.lineno) - node.lineno + 1
            for node in classes(ast.parse(source))}


def test_class_lengths_counts_every_line_of_a_class() -> None:
    source = "class A:\n    x = 1\n\n    def f(self):\n        return 2\n\n\nclass B: ...\n"
    assert class_lengths(source) == {"A": 5, "B": 1}


def test_no_class_of_the_package_is_over_250_lines() -> None:
    too_long = {f"{path.relative_to(PACKAGE)}:{name}": lines
                for path in sorted(PACKAGE.rglob("*.py"))
                for name, lines in class_lengths(path.read_text(encoding="utf-8")).items()
                if lines > MAX_CLASS_LINES}
    assert too_long == {}, f"split these classes by job: {too_long}"


def package_modules() -> list[ModuleType]:
    return [importlib.import_module(info.name)
            for info in pkgutil.walk_packages(orbench_pytest.__path__, "orbench_pytest.")]


def exception_classes(module: ModuleType) -> list[type[BaseException]]:
    """The exception classes a module defines (not those it imports)."""
    return [value for value in vars(module).values()
            if inspect.isclass(value) and issubclass(value, BaseException)
            and value.__module__ == module.__name__]


def test_the_walk_finds_the_package_s_exceptions() -> None:
    found = {cls.__name__ for module in package_modules() for cls in exception_classes(module)}
    assert {"OrbenchError", "ConfigError", "CacheWriteError", "TransientFault",
            "_Wrong"} <= found


def test_every_public_exception_of_the_package_derives_from_orbench_error() -> None:
    """A private one (`_Malformed`) may be control flow inside its module, turned into a
    ConfigError before it leaves; its docstring must say so."""
    stray = [f"{cls.__module__}.{cls.__name__}" for module in package_modules()
             for cls in exception_classes(module)
             if not issubclass(cls, OrbenchError)
             and not (cls.__name__.startswith("_") and "control flow" in (cls.__doc__ or ""))]
    assert stray == [], f"derive these from OrbenchError (core/errors.py): {stray}"


def test_the_documented_tree_names_every_public_exception() -> None:
    """docs/reliability.md draws the tree for code that catches them: no class left out."""
    page = (PACKAGE.parent / "docs" / "reliability.md").read_text(encoding="utf-8")
    missing = sorted(cls.__name__ for module in package_modules()
                     for cls in exception_classes(module)
                     if not cls.__name__.startswith("_") and f"── {cls.__name__} " not in page
                     and cls is not OrbenchError)
    assert missing == [], f"add these to the tree in docs/reliability.md: {missing}"


ZONES = sorted(path.parent.name for path in PACKAGE.glob("*/__init__.py"))


def declared_surface(zone: str) -> list[str]:
    module = importlib.import_module(f"orbench_pytest.{zone}")
    assert isinstance(getattr(module, "__all__", None), list), f"{zone}: no __all__"
    return list(module.__all__)


def imported_modules(source: str) -> set[tuple[str, str]]:
    """(zone, module) of every `orbench_pytest.ZONE.MODULE` a module's source imports, those
    under `if TYPE_CHECKING:` and inside functions too."""
    found: set[tuple[str, str]] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] if node.module.count(".") >= 2 else [
                f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "orbench_pytest" and len(parts) >= 3:
                found.add((parts[1], parts[2]))
    return found


def test_imported_modules_reads_every_spelling_of_an_import() -> None:
    source = ("import orbench_pytest.fetch.cache\nfrom orbench_pytest.gate import samples\n"
              "from orbench_pytest.core.errors import ConfigError\nfrom . import x\n"
              "def f():\n    from orbench_pytest.run.runner import Selected\n")
    assert imported_modules(source) == {("fetch", "cache"), ("gate", "samples"),
                                        ("core", "errors"), ("run", "runner")}


def test_each_zone_declares_its_public_modules() -> None:
    for zone in ZONES:
        modules = {path.stem for path in (PACKAGE / zone).glob("*.py")} - {"__init__"}
        surface = declared_surface(zone)
        assert surface and set(surface) <= modules, (zone, sorted(set(surface) - modules))


def test_no_zone_imports_another_zone_s_own_modules() -> None:
    surfaces = {zone: set(declared_surface(zone)) for zone in ZONES}
    private = sorted(
        f"{path.relative_to(PACKAGE)} imports {zone}.{module}"
        for path in PACKAGE.rglob("*.py")
        for zone, module in imported_modules(path.read_text(encoding="utf-8"))
        if zone in surfaces and path.relative_to(PACKAGE).parts[0] != zone
        and module not in surfaces[zone])
    assert private == [], ("import the zone's public modules, or add the module to its "
                           "__all__:\n" + "\n".join(private))
