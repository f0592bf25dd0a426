"""Each benchmark scenario runs as a user runs it (`python -m benchmarks NAME --tiny`, in a
subprocess) at its smallest size, so a scenario that no longer imports or no longer matches the
plugin fails here, not on the day someone needs its figure. Marked `bench`: deselected by
default, run once by .ci/run (`pytest -m bench -n 2`). The figures themselves are not checked:
they depend on the machine. No benchmark module is imported here.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO, SHARED_DATA, shared_data
from tests.timeouts import LONG_SUBPROCESS_TIMEOUT_S

pytestmark = pytest.mark.bench

# name → the ../shared/data folders it reads (the test is skipped, naming them, where absent).
SCENARIOS: dict[str, tuple[str, ...]] = {
    "throughput": ("orbench", "xstest", "do-not-answer"),
    "residue": ("orbench", "xstest", "do-not-answer"),
    "idle": (),
    "install": (),
    "concurrency": (),
    "judge-concurrency": (),
    "large-runs": (),
    "html-report": ("orbench",),
    "judge": ("orbench", "xstest"),
    "calibration": ("do-not-answer",),
    "rewordings": (),
    "local": (),
    "local-determinism": (),
    "temperature": (),
}


def run(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ORBENCH_SHARED_DATA": str(SHARED_DATA),
           "ORBENCH_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("PYTEST_XDIST_WORKER", None)
    return subprocess.run([sys.executable, "-m", "benchmarks", *args], cwd=REPO, env=env,
                          capture_output=True, text=True,
                          timeout=LONG_SUBPROCESS_TIMEOUT_S)


def test_each_scenario_is_run_here_and_quoted_by_its_page(tmp_path: Path) -> None:
    listed = dict(line.split() for line in run("--list", tmp_path=tmp_path).stdout.splitlines())
    assert set(listed) == set(SCENARIOS)
    for name, page in listed.items():
        quoted = re.findall(r"python -m benchmarks ([\w-]+)", (REPO / page).read_text())
        assert name in quoted, f"{page} quotes no `python -m benchmarks {name}`"


def test_an_unknown_scenario_is_named_with_the_known_ones(tmp_path: Path) -> None:
    done = run("nope", tmp_path=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("python -m benchmarks: no scenario 'nope'; the scenarios: ")


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_scenario_runs_at_a_tiny_size(name: str, tmp_path: Path) -> None:
    for folder in SCENARIOS[name]:
        shared_data(folder)
    done = run(name, "--tiny", tmp_path=tmp_path)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert done.stdout.strip(), "it printed no figure"
