"""Which YAML files are suites in this run: only the ones asked for.

A suite is asked for by a path on the command line (the file itself, a node id in it, or the
folder holding it), by `--orbench-suite`, or by the ini key `orbench_suites`. A plain `pytest`
in a project with a suites/ folder therefore collects no suite and starts no evaluation.
Suites named by option are added to the run, never substituted for it: pytest's arguments
(typed, testpaths or the invocation folder) stay as they are, and the plugin collects each
named suite file the directory walk did not reach (`named_suite_files`).
Free of pytest: the plugin passes in its arguments.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from orbench_pytest.catalog.paths import SUITE_SUFFIXES
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.paths import resolved, stat_of


@dataclass(frozen=True)
class SuiteRequest:
    """The suites a run asks for: by path, by folder, by name."""

    files: frozenset[Path]  # suite files asked for by path (resolved)
    folders: frozenset[Path]  # folders whose own YAML files are suites (resolved)
    named: tuple[Path, ...]  # --orbench-suite / orbench_suites: files or folders (resolved)

    @property
    def any(self) -> bool:
        return bool(self.files or self.folders)


def suite_request(command_line_args: Sequence[str], invocation_dir: Path,
                  suite_paths: Sequence[Path]) -> SuiteRequest:
    """`command_line_args`: the paths the user typed (not testpaths, not the default '.');
    `suite_paths`: --orbench-suite / orbench_suites, already resolved to files or folders."""
    files: set[Path] = set()
    folders: set[Path] = set()
    for arg in command_line_args:
        try:
            path = resolved(invocation_dir / arg.split("::")[0])
            stat_of(path)
        except ConfigError:  # a loop, an over-long name: pytest names it ("file or directory
            continue         # not found")
        _add(path, files, folders)
    named = tuple(resolved(path, "--orbench-suite") for path in suite_paths)
    for path in named:
        _add(path, files, folders)
    return SuiteRequest(frozenset(files), frozenset(folders), named)


def _add(path: Path, files: set[Path], folders: set[Path]) -> None:
    if path.is_dir():
        folders.add(path)
    elif path.suffix in SUITE_SUFFIXES:
        files.add(path)


def is_requested_suite(path: Path, request: SuiteRequest) -> bool:
    """A YAML file named itself, or one directly inside a named folder (not deeper: `pytest .`
    does not turn every YAML file of the project into a suite)."""
    if path.suffix not in SUITE_SUFFIXES:
        return False
    try:
        real = resolved(path)
    except ConfigError:  # a symlink loop met by the walk: not a suite
        return False
    return real in request.files or real.parent in request.folders


def named_suite_files(request: SuiteRequest) -> list[Path]:
    """The suite files named by option, in order, once each: a named file, or a named
    folder's own YAML files. The plugin collects those the walk over pytest's arguments did
    not reach (outside them, in a dot folder, under --ignore). They are never added to
    pytest's arguments: pytest 8.4 collects only a file argument that lies inside a folder
    argument (its walk sees the folder as a duplicate), and pytest 9 drops such a file argument
    when the walk skips its folder."""
    found: dict[Path, None] = {}
    for path in request.named:
        if path.is_dir():
            found.update(dict.fromkeys(sorted(
                entry for entry in path.iterdir()
                if entry.suffix in SUITE_SUFFIXES and entry.is_file())))
        else:
            found[path] = None
    return list(found)


READY_PREFIX = "orbench:"  # ready suites' node ids: orbench:smoke.yaml::smoke[case]


def node_path(path: Path, rootpath: Path, ready_dir: Path | None = None) -> str | None:
    """The node id of a suite file pytest would not name the same on every machine.

    A ready suite (a file of `ready_dir`, this package's suites): `orbench:<file name>`, the
    same from a checkout, an editable install and a wheel in any venv, so --lf, -k,
    --deselect, baselines and JUnit names keep working when the venv moves. Another file
    outside the rootdir: its path relative to the rootdir. None inside the rootdir (a user's
    own suite), where pytest's own id is kept."""
    if ready_dir is not None and resolved(path).parent == ready_dir.resolve():
        return f"{READY_PREFIX}{path.name}"
    try:
        path.relative_to(rootpath)
        return None
    except ValueError:
        return os.path.relpath(path, rootpath).replace(os.sep, "/")


def typed_ready_ids(args: Sequence[str], ready_dir: Path) -> list[str]:
    """Node ids of ready suites typed on the command line (orbench:smoke.yaml::smoke[case],
    copied from a report or a CI log) as the paths pytest collects them from."""
    out = []
    for arg in args:
        path_part, sep, rest = arg.partition("::")
        if path_part.startswith(READY_PREFIX):
            arg = f"{suite_file_of(path_part, Path('.'), ready_dir)}{sep}{rest}"
        out.append(arg)
    return out


def suite_file_of(path_part: str, rootpath: Path, ready_dir: Path) -> Path:
    """Back from a node id's path part to the suite file (xdist's controller)."""
    if path_part.startswith(READY_PREFIX):
        return ready_dir / path_part[len(READY_PREFIX):]
    return rootpath / path_part
