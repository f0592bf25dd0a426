"""The package's size: lines and modules of orbench_pytest/, and its largest classes.

    python scripts/code_size.py                # the working tree
    python scripts/code_size.py --rev 63726d4  # any commit, read from git (no checkout)

Lines are counted as `find orbench_pytest -name '*.py' | xargs wc -l` counts them (newlines);
modules are the .py files, `__init__.py` included. A class's methods are the functions defined
directly in its body (properties and static methods included, nested classes not).
"""

from __future__ import annotations

import argparse
import ast
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = "orbench_pytest"


def sources(rev: str | None) -> dict[str, str]:
    """{path: text} of every .py file of the package, at `rev` or in the working tree."""
    if rev is None:
        return {str(p.relative_to(REPO)): p.read_text(encoding="utf-8")
                for p in sorted((REPO / PACKAGE).rglob("*.py"))}
    listed = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, PACKAGE], cwd=REPO,
                            check=True, capture_output=True, text=True).stdout.split()
    return {path: subprocess.run(["git", "show", f"{rev}:{path}"], cwd=REPO, check=True,
                                 capture_output=True, text=True).stdout
            for path in listed if path.endswith(".py")}


def classes(path: str, text: str) -> list[tuple[int, int, str]]:
    """(methods, lines, "path:Class") of every class in the module."""
    found = []
    for node in ast.walk(ast.parse(text, path)):
        if isinstance(node, ast.ClassDef):
            methods = sum(isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
                          for child in node.body)
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            found.append((methods, lines, f"{path}:{node.name}"))
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rev", help="a git commit to measure instead of the working tree")
    ap.add_argument("--top", type=int, default=5, help="how many classes to list (default 5)")
    args = ap.parse_args(argv)
    files = sources(args.rev)
    lines = sum(text.count("\n") for text in files.values())
    print(f"{args.rev or 'working tree'}: {lines:,} lines in {len(files)} modules")
    ranked = sorted((c for path, text in files.items() for c in classes(path, text)),
                    reverse=True)
    for methods, size, name in ranked[:args.top]:
        print(f"  {methods:3d} methods  {size:5d} lines  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
