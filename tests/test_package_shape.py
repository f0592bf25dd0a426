"""The package's shape, checked over its source: no class grows past what one reader holds
in mind (issue 45: the session and the response cache had grown to 357 and 310 lines)."""

from __future__ import annotations

import ast
from pathlib import Path

import orbench_pytest

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
