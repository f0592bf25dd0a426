"""Suite files by name: the suffixes a suite file has, and whether a node id lies in one.

Light on purpose (no YAML parser): pytest asks about every file it walks. Which files are
suites in a run is suite_selection's job.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

SUITE_SUFFIXES = (".yaml", ".yml")


def names_suite_file(nodeid: str) -> bool:
    """A node id of an item inside a suite file (its path part ends in .yaml / .yml)."""
    return nodeid.partition("::")[0].endswith(SUITE_SUFFIXES)


def may_hold_suites(command_line_args: Sequence[str], invocation_dir: Path) -> bool:
    """Whether a path typed on the command line can bring a suite into the run: a suite file
    (or a node id in one), or a folder holding a YAML file directly (suite_selection's rule:
    only a named folder's own YAML files are suites). When none can, and no orbench option
    is set, the plugin loads nothing more."""
    for arg in command_line_args:
        path = invocation_dir / arg.split("::")[0]
        if path.suffix in SUITE_SUFFIXES:
            return True
        if path.is_dir():
            try:
                with os.scandir(path) as entries:
                    if any(entry.name.endswith(SUITE_SUFFIXES) for entry in entries):
                        return True
            except OSError:  # unreadable: let the session look (and pytest report it)
                return True
    return False
