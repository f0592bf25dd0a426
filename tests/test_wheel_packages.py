"""The wheel's package list: every folder of the package listed, so setuptools neither warns
"Package would be ignored" nor leaves a data folder out (the wheel itself: test_wheel.py)."""

from __future__ import annotations

from orbench_pytest.cli.init_values import tomllib
from tests.helpers import REPO


def test_every_folder_of_the_package_is_in_the_packages_list() -> None:
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {".".join(path.relative_to(REPO).parts)
               for path in [REPO / "orbench_pytest", *(REPO / "orbench_pytest").rglob("*")]
               if path.is_dir() and path.name != "__pycache__"}
    mapped = set(setuptools["package-dir"])  # orbench_pytest.suites: the top-level suites/
    for package, folder in setuptools["package-dir"].items():  # suites/coconot/ and the like
        mapped |= {".".join([package, *path.relative_to(REPO / folder).parts])
                   for path in (REPO / folder).rglob("*")
                   if path.is_dir() and path.name != "__pycache__"}
    assert set(setuptools["packages"]) == folders | mapped
    for package in setuptools["package-data"]:
        assert package in setuptools["packages"], package
