"""`orbench init`: the starter files written into a repository, nothing of the user's lost."""

from __future__ import annotations

from pathlib import Path

import pytest

from orbench_pytest.catalog.ready import starter_thresholds
from orbench_pytest.cli.init_project import WORKFLOW, init_project, tomllib, try_commands
from orbench_pytest.cli.main import main as orbench
from tests.helpers import REPO


def test_the_shipped_workflow_is_this_projects_gate_workflow() -> None:
    shipped = REPO / "orbench_pytest" / "data" / "orbench-gate.yml"
    assert shipped.read_bytes() == (REPO / WORKFLOW).read_bytes()


def test_a_project_with_a_pyproject_gets_all_three(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    original = '[project]\nname = "app"\nversion = "0"\n\n[tool.ruff]\nline-length = 100'
    (tmp_path / "pyproject.toml").write_text(original)  # no newline at the end
    assert orbench(["init", str(tmp_path), "--model", "gpt-4o-mini", "--base-url",
                    'http://127.0.0.1:8000/v1?x="y"']) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "thresholds.yaml").read_text() == starter_thresholds().read_text()
    assert (tmp_path / WORKFLOW).read_bytes() == (REPO / WORKFLOW).read_bytes()
    text = (tmp_path / "pyproject.toml").read_text()
    assert text.startswith(original + "\n")
    data = tomllib.loads(text)
    assert data["tool"]["pytest"]["ini_options"] == {
        "orbench_model": "gpt-4o-mini", "orbench_base_url": 'http://127.0.0.1:8000/v1?x="y"'}
    assert data["tool"]["ruff"] == {"line-length": 100}
    for command, _ in try_commands():
        assert f"  {command}\n" in out
    assert len(try_commands()) == 3


def test_nothing_is_overwritten_without_force(tmp_path: Path) -> None:
    (tmp_path / "thresholds.yaml").write_text("defaults: {max_over_refusal: 0.3}\n")
    (tmp_path / WORKFLOW).parent.mkdir(parents=True)
    (tmp_path / WORKFLOW).write_text("name: mine\n")
    report = init_project(tmp_path)
    assert (tmp_path / "thresholds.yaml").read_text() == "defaults: {max_over_refusal: 0.3}\n"
    assert (tmp_path / WORKFLOW).read_text() == "name: mine\n"
    assert "kept thresholds.yaml: it exists (--force overwrites it)" in report.lines
    assert "kept .github/workflows/orbench-gate.yml: it exists (--force overwrites it)" in \
        report.lines
    assert (tmp_path / "pytest.ini").read_text() == "[pytest]\norbench_model = local\n"
    forced = init_project(tmp_path, force=True)
    assert (tmp_path / "thresholds.yaml").read_text() == starter_thresholds().read_text()
    assert "overwrote thresholds.yaml: the gate: limits per suite" in forced.lines
    assert (tmp_path / "pytest.ini").read_text() == "[pytest]\norbench_model = local\n"
    assert "kept pytest.ini: its [pytest] already names the model (orbench_model)" in \
        forced.lines


@pytest.mark.parametrize(("name", "content", "header"), [
    ("pyproject.toml", '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n',
     "tool.pytest.ini_options"),
    ("pytest.ini", "[pytest]\ntestpaths = tests\n", "pytest"),
    ("tox.ini", "[tox]\nenvlist = py\n\n[pytest]\ntestpaths = tests\n", "pytest"),
    ("setup.cfg", "[metadata]\nname = app\n\n[tool:pytest]\ntestpaths = tests\n", "tool:pytest"),
])
def test_existing_pytest_settings_are_never_edited_the_lines_are_printed(
        tmp_path: Path, name: str, content: str, header: str) -> None:
    (tmp_path / name).write_text(content)
    report = init_project(tmp_path, model="m", base_url="http://h/v1")
    assert (tmp_path / name).read_text() == content
    assert f"{name} holds your pytest settings ([{header}]); it is left as it is: add" in \
        report.lines
    quoted = name == "pyproject.toml"
    assert ('    orbench_model = "m"' if quoted else "    orbench_model = m") in report.lines
    assert not (tmp_path / "pytest.ini").exists() or name == "pytest.ini"


def test_a_broken_pyproject_stops_before_anything_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "pyproject.toml").write_text("[project\nname = 'app'\n")
    assert orbench(["init", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("orbench init: error: ") and "pyproject.toml: not valid TOML" in err
    assert err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pyproject.toml"]


def test_not_a_folder_is_a_one_line_error(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert orbench(["init", str(tmp_path / "nowhere")]) == 2
    assert "nowhere: not a folder" in capsys.readouterr().err
