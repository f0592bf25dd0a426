"""The candidate's fingerprint: the code of a module:function target, read without importing it,
and the version a user gives."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orbench_pytest.config.parsers import version
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.fetch.fingerprint import code_fingerprint, target_fingerprint


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    site = tmp_path / "venv" / "lib" / "site-packages"
    write(root, {
        "app.py": "import json\nimport helpers\nfrom pkg import tools\nimport installed\n"
                  "def answer(prompt, system_prompt):\n    return helpers.reply(prompt)\n",
        "helpers.py": "def reply(prompt):\n    from pkg.deep import inner\n    return 'ok'\n",
        "pkg/__init__.py": "",
        "pkg/tools.py": "from . import shared\nfrom .sub.leaf import x\n",
        "pkg/shared.py": "X = 1\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/leaf.py": "x = 2\n",
        "pkg/deep/__init__.py": "from .inner import *\n",
        "pkg/deep/inner.py": "Y = 3\n",
        "unused.py": "Z = 4\n",
        "prompts/system.txt": "Be helpful.\n",
    })
    write(site, {"installed.py": "import helpers_of_installed\n"})
    return root


def fingerprint_of(project: Path, spec: str = "app:answer") -> tuple[str, tuple[str, ...]]:
    site = project.parent / "venv" / "lib" / "site-packages"
    found = code_fingerprint(spec, cwd=project, search_path=[str(site)])
    return found.digest, found.files


def test_covers_the_module_and_every_project_module_it_imports(project: Path) -> None:
    _, files = fingerprint_of(project)
    assert files == ("app.py", "helpers.py", "pkg/__init__.py", "pkg/deep/__init__.py",
                     "pkg/deep/inner.py", "pkg/shared.py", "pkg/sub/__init__.py",
                     "pkg/sub/leaf.py", "pkg/tools.py")


@pytest.mark.parametrize("changed", ["app.py", "helpers.py", "pkg/shared.py", "pkg/sub/leaf.py",
                                     "pkg/deep/inner.py", "pkg/__init__.py"])
def test_a_change_to_any_covered_module_changes_the_fingerprint(project: Path,
                                                                changed: str) -> None:
    before, _ = fingerprint_of(project)
    path = project / changed
    path.write_text(path.read_text() + "# edited\n")
    assert fingerprint_of(project)[0] != before


@pytest.mark.parametrize("changed", ["unused.py", "prompts/system.txt",
                                     "../venv/lib/site-packages/installed.py"])
def test_files_outside_the_import_graph_or_installed_are_not_covered(project: Path,
                                                                     changed: str) -> None:
    before, _ = fingerprint_of(project)
    path = project / changed
    path.write_text(path.read_text() + "# edited\n")
    assert fingerprint_of(project)[0] == before


def test_a_renamed_file_with_the_same_bytes_is_another_fingerprint(project: Path) -> None:
    before, _ = fingerprint_of(project)
    (project / "pkg" / "shared.py").rename(project / "pkg" / "common.py")
    (project / "pkg" / "tools.py").write_text("from . import common\nfrom .sub.leaf import x\n")
    after, files = fingerprint_of(project)
    assert after != before and "pkg/common.py" in files


def test_nothing_is_imported_or_executed(project: Path) -> None:
    (project / "helpers.py").write_text("raise SystemExit('executed')\nimport pkg.shared\n")
    fingerprint_of(project)
    assert "helpers" not in sys.modules and "app" not in sys.modules


def test_a_syntax_error_is_hashed_and_left_for_the_import_to_report(project: Path) -> None:
    before, _ = fingerprint_of(project)
    (project / "app.py").write_text("def answer(:\n")
    after, files = fingerprint_of(project)
    assert after != before and files == ("app.py",)


def test_a_target_in_a_package_and_in_a_src_folder(tmp_path: Path) -> None:
    write(tmp_path, {"src/myapp/__init__.py": "", "src/myapp/entry.py": "from .core import f\n",
                     "src/myapp/core.py": "def f(p, s):\n    return p\n"})
    found = code_fingerprint("myapp.entry:f", cwd=tmp_path, search_path=[str(tmp_path / "src")])
    assert found.files == ("myapp/__init__.py", "myapp/core.py", "myapp/entry.py")


def test_a_module_that_cannot_be_found_is_a_one_line_error(project: Path) -> None:
    with pytest.raises(ConfigError, match=r"^--orbench-target: cannot find module 'nope'"):
        code_fingerprint("nope:answer", cwd=project, search_path=[])


@pytest.mark.parametrize(("spec", "message"), [
    ("app", "'app' is not of the form module:function"),
    ("..:answer", "'..' is not a module name"),
    ("my-app:answer", "'my-app' is not a module name"),
])
def test_a_malformed_target_is_a_one_line_error(project: Path, spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=f"^--orbench-target: {re.escape(message)}"):
        code_fingerprint(spec, cwd=project, search_path=[])


def test_the_results_fingerprint_has_code_and_version(project: Path) -> None:
    found = target_fingerprint("app:answer", "sha-1", cwd=project)
    assert found["version"] == "sha-1" and len(found["code"]) == 64
    assert "helpers.py" in found["code_files"]
    assert target_fingerprint(None, None) == {}
    assert target_fingerprint(None, "v2") == {"version": "v2"}


@pytest.mark.parametrize("raw", ["", "   ", "a\nb", "x" * 201, "tab\there"])
def test_a_bad_version_is_a_one_line_error(raw: str) -> None:
    with pytest.raises(ConfigError) as caught:
        check_version(raw)
    message = str(caught.value)
    assert message.startswith("--orbench-target-version:") and "\n" not in message


@given(st.text(min_size=1, max_size=200).filter(lambda t: t.strip() and t.strip().isprintable()))
def test_any_printable_version_is_kept_stripped(raw: str) -> None:
    assert check_version(raw) == raw.strip()


def check_version(raw: str) -> str | None:
    return version(raw, "--orbench-target-version", Path())
