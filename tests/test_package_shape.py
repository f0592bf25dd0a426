"""The package's shape, checked over its source: no class grows past what one reader holds
in mind (issue 45: the session and the response cache had grown to 357 and 310 lines), and
one exception tree (core/errors.py): every public exception class derives from OrbenchError
(five derived from Exception)."""

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
    assert stray == [], "derive these from OrbenchError (core/errors.py)"
