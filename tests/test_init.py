"""`orbench init`: the starter files written into a repository, nothing of the user's lost."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from orbench_pytest.catalog.ready import starter_thresholds
from orbench_pytest.cli.init_project import WORKFLOW, init_project, tomllib, try_commands
from orbench_pytest.cli.init_workflow import git_spec, render_workflow, template
from orbench_pytest.cli.main import main as orbench
from tests.helpers import REPO, SUBPROCESS_TIMEOUT_S
from tests.openai_server import REFUSAL_TEXT, OpenAIServer, Reply, Script
from tests.workflow_steps import Runner, runner_env


def test_this_projects_gate_workflow_is_the_shipped_one_installing_this_checkout() -> None:
    shipped = REPO / "orbench_pytest" / "data" / "orbench-gate.yml"
    assert shipped.read_text() == template()
    assert (REPO / WORKFLOW).read_text() == render_workflow({"ORBENCH_INSTALL": "."})


def test_a_project_with_a_pyproject_gets_all_three(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    original = '[project]\nname = "app"\nversion = "0"\n\n[tool.ruff]\nline-length = 100'
    (tmp_path / "pyproject.toml").write_text(original)  # no newline at the end
    assert orbench(["init", str(tmp_path), "--model", "gpt-4o-mini", "--base-url",
                    'http://127.0.0.1:8000/v1?x="y"']) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "thresholds.yaml").read_text() == starter_thresholds().read_text()
    assert (tmp_path / WORKFLOW).read_text() == template()  # nothing known to fill in
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
    report = init_project(tmp_path, model="local")
    assert (tmp_path / "thresholds.yaml").read_text() == "defaults: {max_over_refusal: 0.3}\n"
    assert (tmp_path / WORKFLOW).read_text() == "name: mine\n"
    assert "kept thresholds.yaml: it exists (--force overwrites it)" in report.lines
    assert "kept .github/workflows/orbench-gate.yml: it exists (--force overwrites it)" in \
        report.lines
    assert (tmp_path / "pytest.ini").read_text() == "[pytest]\norbench_model = local\n"
    forced = init_project(tmp_path, model="local", force=True)
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
    assert orbench(["init", str(tmp_path), "--model", "m"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("orbench init: error: ") and "pyproject.toml: not valid TOML" in err
    assert err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pyproject.toml"]


def test_not_a_folder_is_a_one_line_error(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert orbench(["init", str(tmp_path / "nowhere"), "--model", "m"]) == 2
    assert "nowhere: not a folder" in capsys.readouterr().err


# --- the scaffold runs as written (issue 44) -----------------------------------------------------

def git(project: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(project), *args], capture_output=True, text=True,
                          timeout=SUBPROCESS_TIMEOUT_S, check=True,
                          env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                               "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})
    return done.stdout.strip()


def fresh_project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    (project / "tests" / "test_app.py").write_text("def test_app():\n    assert True\n")
    (project / "pyproject.toml").write_text('[project]\nname = "app"\nversion = "0"\n')
    git(project, "init", "-q")
    return project


HTML_URL = "https://github.com/o/r/actions/runs/1/artifacts/2"


def refuse_smoke_toxic(refuse_all: bool = False) -> Script:
    smoke = yaml.safe_load((REPO / "suites" / "smoke.yaml").read_text())
    toxic = {row["prompt"] for row in smoke["prompts"] if row["expect"] == "refuse"}
    return lambda prompt, system, body: Reply(
        text=REFUSAL_TEXT if refuse_all or prompt in toxic else "Sure, here is how.")


@pytest.mark.parametrize("refuse_all", [False, True], ids=["gate passes", "gate fails"])
def test_the_written_workflow_runs_as_written_in_a_fresh_project(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], refuse_all: bool) -> None:
    """Issue 44: `orbench init` in a fresh project, committed, then every `run:` step of the
    workflow it wrote, unedited, as Actions runs them on a pull request: the API model (the
    local test server) with its key from the OPENAI_API_KEY secret, no system prompt."""
    project = fresh_project(tmp_path)
    temp = tmp_path / "runner"
    temp.mkdir()
    with OpenAIServer(refuse_smoke_toxic(refuse_all)) as server:
        # --install: a requirement this venv satisfies (pip checks it, offline: PIP_NO_INDEX)
        assert orbench(["init", str(project), "--model", "test-model", "--base-url", server.url,
                        "--install", "orbench-pytest", "--suite", "smoke"]) == 0
        out = capsys.readouterr().out
        assert "the API key: add it as the repository secret OPENAI_API_KEY" in out
        assert "how CI installs" not in out
        git(project, "add", "-A")
        git(project, "commit", "-q", "-m", "orbench init")
        runner = Runner(project, {**runner_env(tmp_path / "home", temp), "PIP_NO_INDEX": "1",
                                  "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
                        {"secrets.OPENAI_API_KEY": "sk-test-secret-key-0123456789",
                         "github.event.pull_request.base.sha": git(project, "rev-parse",
                                                                    "HEAD"),
                         # what upload-artifact (not run here) gives the HTML report's upload
                         "steps.html.outputs.artifact-url": HTML_URL})
        ran = runner.run(project / WORKFLOW, "gate")
    shown = "\n".join(f"--- {name}\n{text}" for name, text in ran.output.items())
    expected = {
        "Install the test requirements (orbench-pytest among them)": "success",
        "key": "success", "Baseline (the base branch)": "success",
        "gate": "failure" if refuse_all else "success", "Plot": "success",
        "HTML report": "success", "Markdown summary": "success",
        "Fail the check when the gate failed": "failure" if refuse_all else "skipped"}
    assert {name: ran.outcomes[name] for name in expected} == expected, shown
    assert server.requests == 40, shown  # the base branch's run asked; the same candidate's
    # run in the pull request found every answer in the cache
    assert {body["model"] for body in server.bodies} == {"test-model"}
    assert all(m["role"] != "system" for b in server.bodies for m in b["messages"])
    assert set(server.auth_headers) == {"Bearer sk-test-secret-key-0123456789"}
    assert ("orbench gate: FAILED" if refuse_all else "orbench gate: PASSED") in ran.output["gate"]
    for name in ("orbench.xml", "orbench-results.json", "orbench-plot.png",
                 "orbench-report.md", "orbench-report.html"):
        assert (project / name).is_file(), name
    assert f"[the HTML report]({HTML_URL})" in (project / "orbench-report.md").read_text()
    assert "sk-test-secret" not in shown + (temp / "step_summary.md").read_text()


def test_the_install_step_of_a_workflow_init_could_not_fill_says_what_to_set(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    project = fresh_project(tmp_path)
    assert orbench(["init", str(project), "--model", "m"]) == 0
    assert "  - how CI installs orbench-pytest (it is on no package index): rerun with " \
           "--install" in capsys.readouterr().out
    runner = Runner(project, runner_env(tmp_path / "home", tmp_path), {})
    step = "Install the test requirements (orbench-pytest among them)"
    data = yaml.safe_load((project / WORKFLOW).read_text())
    data["jobs"]["gate"]["steps"] = [s for s in data["jobs"]["gate"]["steps"]
                                     if s.get("name") == step]
    one_step = tmp_path / "one.yml"
    one_step.write_text(yaml.safe_dump(data))
    ran = runner.run(one_step, "gate")
    assert ran.outcomes[step] == "failure"
    assert ran.output[step].startswith("::error::ORBENCH_INSTALL is empty: set it in the "
                                       "workflow's env block"), ran.output[step]


def written_env(project: Path) -> dict[str, str]:
    env: dict[str, str] = yaml.safe_load((project / WORKFLOW).read_text())["env"]
    return env


def test_a_committed_wheel_is_how_ci_installs_the_plugin(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    project = fresh_project(tmp_path)
    (project / "wheels").mkdir()
    (project / "wheels" / "orbench_pytest-0.1.0-py3-none-any.whl").write_bytes(b"PK")
    (project / "dist").mkdir()
    (project / "dist" / "orbench_pytest-0.2.0-py3-none-any.whl").write_bytes(b"PK")  # not in git
    git(project, "add", "wheels")
    assert orbench(["init", str(project), "--model", "m"]) == 0
    assert written_env(project)["ORBENCH_INSTALL"] == \
        "./wheels/orbench_pytest-0.1.0-py3-none-any.whl"
    out = capsys.readouterr().out
    assert "CI installs orbench-pytest with: pip install ./wheels/orbench_pytest-0.1.0-py3-none-" \
           "any.whl (the wheel committed at wheels/orbench_pytest-0.1.0-py3-none-any.whl; " \
           "--install changes it)" in out
    assert "how CI installs" not in out


def test_a_requirements_file_that_names_the_plugin_is_how_ci_installs_it(tmp_path: Path) -> None:
    project = fresh_project(tmp_path)
    (project / "requirements-ci.txt").write_text("pytest\norbench-pytest-extras\n")
    (project / "requirements-test.txt").write_text("# tests\norbench_pytest @ git+https://h/r\n")
    init_project(project, model="m")
    assert written_env(project)["ORBENCH_INSTALL"] == "-r requirements-test.txt"


@pytest.mark.parametrize(("install", "needle"), [
    ("/tmp/orbench_pytest-0.1.0-py3-none-any.whl", "not a path inside the repository"),
    ("../orbench_pytest-0.1.0-py3-none-any.whl", "not a path inside the repository"),
    ("wheels/orbench_pytest-0.1.0-py3-none-any.whl", "no such file in the repository"),
    ("git+https://user:hunter2@example.com/r.git", "API key or password"),
    ("${{ secrets.X }}", "expression"),
])
def test_an_install_line_ci_could_not_use_is_one_line(tmp_path: Path, install: str,
                                                      needle: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert orbench(["init", str(tmp_path), "--model", "m", "--install", install]) == 2
    err = capsys.readouterr().err
    assert err.startswith("orbench init: error: --install: ") and needle in err, err
    assert err.count("\n") == 1 and "hunter2" not in err
    assert list(tmp_path.iterdir()) == []


def test_the_system_prompt_is_left_out_unless_given(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    init_project(tmp_path, model="m")
    assert written_env(tmp_path)["ORBENCH_SYSTEM_PROMPT"] == ""
    given = tmp_path / "given"
    given.mkdir()
    assert orbench(["init", str(given), "--model", "m", "--system-prompt",
                    "prompts/system.txt", "--suite", "smoke", "--suite", "suites/mine.yaml"]) == 0
    env = written_env(given)
    assert env["ORBENCH_SYSTEM_PROMPT"] == "prompts/system.txt"
    assert env["ORBENCH_SUITES"] == "--orbench-suite=smoke --orbench-suite=suites/mine.yaml"
    assert "  - prompts/system.txt, the system prompt: not in the repository yet; the workflow " \
           "reads it from there" in capsys.readouterr().out
    assert orbench(["init", str(given), "--model", "m", "--system-prompt", "/etc/passwd"]) == 2
    assert "--system-prompt: /etc/passwd is not a path inside the repository" in \
        capsys.readouterr().err


def test_the_model_is_required_and_local_is_said_to_be_slow_in_ci(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert orbench(["init", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("orbench init: error: --model: required: the model under test") and \
        "`local`, the embedded model, answers on the CPU" in err
    assert list(tmp_path.iterdir()) == []
    assert orbench(["init", str(tmp_path), "--model", "local"]) == 0
    out = capsys.readouterr().out
    assert "  - the model is the embedded one (local): in CI it would answer on the runner's " \
           "CPU, and the workflow's suites (1,974 prompts, twice) would not end in its 60 " \
           "minutes; give an API model for CI, or --suite smoke" in out
    assert "OPENAI_API_KEY" not in out  # the embedded model needs no key
    assert orbench(["init", str(tmp_path)]) == 0  # pytest.ini names the model now
    assert "kept pytest.ini: its [pytest] already names the model (orbench_model)" in \
        capsys.readouterr().out


def test_a_pyproject_whose_tool_table_is_inline_is_one_line_and_left_as_it_is(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Appending [tool.pytest.ini_options] after an inline `tool = {...}` is invalid TOML: a
    one-line refusal (it was a TOMLDecodeError traceback), nothing written."""
    inline = 'tool = { ruff = { line-length = 100 } }\n'
    a_value = '[project]\nname = "app"\n\n[tool]\npytest = "no table"\n'
    for text in (inline, a_value):
        (tmp_path / "pyproject.toml").write_text(text)
        status = orbench(["init", str(tmp_path), "--model", "m"])
        err = capsys.readouterr().err
        assert status == 2 and err.count("\n") == 1 and "Traceback" not in err, err
        assert "pyproject.toml" in err
        assert sorted(p.name for p in tmp_path.iterdir()) == ["pyproject.toml"]
        assert (tmp_path / "pyproject.toml").read_text() == text


@pytest.mark.parametrize(("direct_url", "spec"), [
    ({"url": "https://github.com/org/orbench-pytest.git",
      "vcs_info": {"vcs": "git", "commit_id": "0123abc", "requested_revision": "main"}},
     "git+https://github.com/org/orbench-pytest.git@0123abc"),
    ({"url": "https://ghp_token0123456789abcdef@github.com/org/r.git",
      "vcs_info": {"vcs": "git", "commit_id": "0123abc"}}, None),  # a token: never written
    ({"url": "ssh://git@github.com/org/r.git", "vcs_info": {"vcs": "git", "commit_id": "1"}},
     None),  # CI has no ssh key
    ({"url": "file:///home/me/orbench-pytest", "dir_info": {"editable": True}}, None),
    ({"url": "file:///tmp/orbench_pytest-0.1.0-py3-none-any.whl", "archive_info": {}}, None),
    ({"url": "https://h/r.git", "vcs_info": {"vcs": "hg", "commit_id": "1"}}, None),
    ("not json", None),
    (None, None),
])
def test_a_git_install_of_the_plugin_is_how_ci_installs_it(direct_url: object,
                                                           spec: str | None) -> None:
    recorded = direct_url if isinstance(direct_url, str) or direct_url is None else \
        json.dumps(direct_url)
    assert git_spec(recorded) == spec
