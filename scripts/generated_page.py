"""The command line of a script that writes a generated docs page: rewrite it, or `--check`
that it is current (exit 1 when stale, as tests/test_docs.py runs it)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def write_or_check(page: Path, render: Callable[[], str], script: str, description: str,
                   argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true", help="exit 1 when the page is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not page.is_file() or page.read_text(encoding="utf-8") != text:
            print(f"{page.relative_to(REPO)} is stale: run python scripts/{script}")
            return 1
        return 0
    page.write_text(text, encoding="utf-8")
    print(f"wrote {page.relative_to(REPO)}")
    return 0
