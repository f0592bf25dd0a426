"""Which files are suites: YAML in a `suites/` folder, or YAML named on the command line.

Light on purpose (no YAML parser): pytest asks it about every file it walks.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

SUITE_SUFFIXES = (".yaml", ".yml")


def explicit_paths(args: Iterable[str], invocation_dir: Path) -> set[Path]:
    """The files named on the command line (node ids cut to their path)."""
    return {(invocation_dir / arg.split("::")[0]).resolve() for arg in args}


def is_suite_path(path: Path, explicit: set[Path]) -> bool:
    return path.suffix in SUITE_SUFFIXES and (path.parent.name == "suites"
                                              or path.resolve() in explicit)


def names_suite_file(nodeid: str) -> bool:
    """A node id of an item inside a suite file (its path part ends in .yaml / .yml)."""
    return nodeid.partition("::")[0].endswith(SUITE_SUFFIXES)
