"""Run a GitHub workflow job's `run:` steps here, as Actions would on ubuntu-latest: each
step a `bash --noprofile --norc -eo pipefail` script with the workflow's, the job's and the
step's env, `${{ … }}` expressions from a table, `if:` conditions evaluated, `uses:` steps
skipped (the caller stands in for them). An expression or condition not in the tables fails
the test: a new step that needs one adds it here (a small table, not a GitHub emulator)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.timeouts import LONG_SUBPROCESS_TIMEOUT_S

EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
STATUS_FUNCTIONS = ("always()", "failure()", "success()", "cancelled()")


@dataclass
class Ran:
    # by step id, else name: success | failure | skipped
    outcomes: dict[str, str] = field(default_factory=dict)
    output: dict[str, str] = field(default_factory=dict)  # step name: stdout + stderr


@dataclass
class Runner:
    cwd: Path
    env: dict[str, str]
    values: Mapping[str, str]  # expression → value: "secrets.OPENAI_API_KEY" → the key
    event: str = "pull_request"
    timeout: float = LONG_SUBPROCESS_TIMEOUT_S

    def condition(self, text: str, ran: Ran, job_failed: bool) -> bool:
        terms: dict[str, Callable[[re.Match[str]], bool]] = {
            r"always\(\)": lambda m: True,
            r"success\(\)": lambda m: not job_failed,
            r"hashFiles\('([^']+)'\) != ''": lambda m: (self.cwd / m[1]).exists(),
            r"github\.event_name == '([a-z_]+)'": lambda m: self.event == m[1],
            r"steps\.([\w-]+)\.outcome == '(\w+)'": lambda m: ran.outcomes.get(m[1]) == m[2],
        }
        results = []
        for term in (t.strip() for t in text.split("&&")):
            match = next(((m, check) for pattern, check in terms.items()
                          if (m := re.fullmatch(pattern, term))), None)
            assert match is not None, f"workflow_steps: no rule for the condition {term!r}"
            results.append(match[1](match[0]))
        implied_success = not any(f in text for f in STATUS_FUNCTIONS)
        return all(results) and not (implied_success and job_failed)

    def expand(self, value: object) -> str:
        def one(match: re.Match[str]) -> str:
            assert match[1] in self.values, f"workflow_steps: no value for ${{{{ {match[1]} }}}}"
            return self.values[match[1]]

        return EXPRESSION.sub(one, str(value))

    def run(self, workflow: Path, job: str) -> Ran:
        data: dict[Any, Any] = yaml.safe_load(workflow.read_text())
        base = {**self.env, **{k: self.expand(v) for k, v in data.get("env", {}).items()}}
        spec = data["jobs"][job]
        base.update({k: self.expand(v) for k, v in spec.get("env", {}).items()})
        ran, job_failed = Ran(), False
        for step in spec["steps"]:
            name = step.get("id") or step.get("name") or step["uses"]
            if "run" not in step or not self.condition(step.get("if", "success()"), ran,
                                                        job_failed):
                ran.outcomes[name] = "skipped"
                continue
            env = {**base, **{k: self.expand(v) for k, v in step.get("env", {}).items()}}
            script = Path(self.env["RUNNER_TEMP"]) / "step.sh"  # as Actions: not in the tree
            script.write_text(step["run"])
            done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail",
                                   str(script)], cwd=self.cwd, env=env, text=True,
                                  capture_output=True, timeout=self.timeout)
            script.unlink()
            ran.output[name] = done.stdout + done.stderr
            ran.outcomes[name] = "success" if done.returncode == 0 else "failure"
            if done.returncode != 0 and not step.get("continue-on-error"):
                job_failed = True
        return ran


def runner_env(home: Path, temp: Path) -> dict[str, str]:
    """A runner's environment: this interpreter's bin/ first on PATH (its `python`,
    `orbench`), no key or orbench setting of ours, the GitHub files in `temp`."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("PYTEST", "OPENAI", "ORBENCH_", "HF_", "GITHUB_"))}
    bin_dir = Path(sys.executable).parent
    env.update(HF_HUB_OFFLINE="1", PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
               HOME=str(home),
               RUNNER_TEMP=str(temp), GITHUB_OUTPUT=str(temp / "github_output"),
               GITHUB_ENV=str(temp / "github_env"),
               GITHUB_STEP_SUMMARY=str(temp / "step_summary.md"), CI="true",
               GITHUB_ACTIONS="true")
    return env
