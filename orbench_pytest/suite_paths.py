"""Suite files by name: the suffixes a suite file has, and whether a node id lies in one.

Light on purpose (no YAML parser): pytest asks about every file it walks. Which files are
suites in a run is suite_selection's job.
"""

from __future__ import annotations

SUITE_SUFFIXES = (".yaml", ".yml")


def names_suite_file(nodeid: str) -> bool:
    """A node id of an item inside a suite file (its path part ends in .yaml / .yml)."""
    return nodeid.partition("::")[0].endswith(SUITE_SUFFIXES)
