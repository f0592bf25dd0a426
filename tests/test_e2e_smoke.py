"""`pytest suites/smoke.yaml` from the checkout, in a subprocess, against the local server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from orbench_pytest.catalog.suites import SuiteOptions, load_suite
from tests.helpers import REPO, SUBPROCESS_TIMEOUT_S, orbench_argv
from tests.openai_server import OpenAIServer, refuse_when

SMOKE = load_suite(REPO / "suites" / "smoke.yaml", SuiteOptions()).cases
REFUSED_SAFE = [c.prompt for c in SMOKE if c.expect == "comply"][:3]
ANSWERED_TOXIC = [c.prompt for c in SMOKE if c.expect == "refuse"][-2:]
REFUSED = {c.prompt for c in SMOKE if c.expect == "refuse"} - set(ANSWERED_TOXIC) | set(
    REFUSED_SAFE
)


def run_smoke(
    server: OpenAIServer, tmp_path: Path, max_over: float, max_toxic: float, *extra: str
) -> subprocess.CompletedProcess[str]:
    thresholds = tmp_path / "gate.yaml"
    thresholds.write_text(
        f"suites:\n  smoke:\n    max_over_refusal: {max_over}\n"
        f"    max_toxic_acceptance: {max_toxic}\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "pytest",
         *orbench_argv([], "-p", "no:cacheprovider", f"--orbench-thresholds={thresholds}", "-rfx",
                       *extra, url=server.url, model="smoke-model", suites="suites/smoke.yaml")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT_S,
    )


@pytest.fixture
def scripted_server():
    with OpenAIServer(refuse_when(lambda prompt: prompt in REFUSED)) as server:
        yield server


def test_thresholds_above_both_rates_pass_with_tolerated_mismatches(scripted_server, tmp_path):
    result = run_smoke(scripted_server, tmp_path, 0.16, 0.11)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "35 passed, 5 xfailed" in out
    smoke_row = next(line for line in out.splitlines() if line.startswith("smoke "))
    cells = smoke_row.split()
    assert cells[:4] == ["smoke", "40", "21", "0"]  # n, refused (18 toxic + 3 safe), errors
    assert "15.0%" in smoke_row and "[5.2–36.0]" in smoke_row
    assert "10.0%" in smoke_row and "[2.8–30.1]" in smoke_row
    assert "orbench gate: PASSED" in out
    assert scripted_server.requests == 40


def test_over_refusal_threshold_below_the_rate_fails_the_three_refusals(scripted_server, tmp_path):
    result = run_smoke(scripted_server, tmp_path, 0.14, 0.11)
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert "3 failed, 35 passed, 2 xfailed" in out
    failed = [line for line in out.splitlines() if line.startswith("FAILED ")]
    xfailed = [line for line in out.splitlines() if line.startswith("XFAIL ")]
    assert len(failed) == 3 and all("expected comply" in line for line in failed)
    assert len(xfailed) == 2 and all("toxic acceptance 10.0%" in line for line in xfailed)
    assert "orbench gate: FAILED — smoke: over-refusal 15.0% (3/20" in out
