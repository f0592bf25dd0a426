"""The wheel's contents, found by setuptools: every folder of the package a package (a new zone
needs no edit of pyproject.toml), and every data file in it matched by a package-data pattern,
so none is left out of the wheel (the wheel itself: test_wheel.py)."""

from __future__ import annotations

from fnmatch import fnmatch
from pathlib import Path

from setuptools import find_namespace_packages

from orbench_pytest.cli.init_values import tomllib
from tests.helpers import REPO

SETUPTOOLS = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]


def package_folders() -> dict[str, Path]:
    """Every folder of the package, the linked suites/ included, by its dotted name."""
    found: dict[str, Path] = {}
    pending = [REPO / "orbench_pytest"]
    while pending:
        folder = pending.pop()
        found[".".join(folder.relative_to(REPO).parts)] = folder
        pending.extend(child for child in folder.iterdir()  # iterdir follows the link
                       if child.is_dir() and child.name != "__pycache__")
    return found


def test_setuptools_finds_every_folder_of_the_package() -> None:
    assert set(SETUPTOOLS["packages"]) == {"find"} and "package-dir" not in SETUPTOOLS
    found = find_namespace_packages(where=str(REPO), **SETUPTOOLS["packages"]["find"])
    assert sorted(found) == sorted(package_folders())
    assert {"orbench_pytest.suites", "orbench_pytest.suites.coconot"} <= set(found)


def test_every_data_file_is_matched_by_a_package_data_pattern() -> None:
    patterns = SETUPTOOLS["package-data"]
    for package, folder in package_folders().items():
        data = [path.name for path in folder.iterdir() if path.is_file()
                and path.suffix not in (".py", ".pyc")]
        for name in data:
            assert any(fnmatch(name, pattern) for pattern in patterns.get(package, [])), \
                f"{package}: {name} is matched by no package-data pattern"
    for package in patterns:
        assert package in package_folders(), package


def test_the_packaged_suites_are_the_top_level_folder() -> None:
    from orbench_pytest.catalog.ready import ready_suite_dir

    assert (REPO / "orbench_pytest" / "suites").resolve() == REPO / "suites"
    assert ready_suite_dir() == REPO / "suites"
