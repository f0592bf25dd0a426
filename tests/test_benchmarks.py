"""Each kept benchmark runs as a user runs it (`python benchmarks/NAME.py`, in a subprocess) at
a tiny size, so a script that no longer imports or no longer matches the plugin fails here, not
on the day someone needs its figure. Marked `bench`: deselected by default, run once by .ci/run
(`pytest -m bench -n 2`). The figures themselves are not checked: they depend on the machine.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.helpers import REPO, SHARED_DATA, shared_data

pytestmark = pytest.mark.bench

# name → the smallest flags that still run every part of it, and the shared-data folders it
# reads (the test is skipped, naming them, where they are absent).
RUNS: dict[str, tuple[list[str], tuple[str, ...]]] = {
    "adaptive_concurrency": (["--prompts", "20", "--latency", "0.01", "--limit", "4",
                              "--repeat", "1"], ()),
    "cache_writes": (["--prompts", "50", "--repeat", "1", "--intervals", "0"], ()),
    "calibration_coverage": (["--draws", "3"], ()),
    "calibration_replay": (["--draws", "3", "--labels", "30"], ("do-not-answer",)),
    "collect_80k": (["--rows", "100", "--repeat", "1"], ()),
    "docs_runners": ([], ()),
    "failing_80k": (["--n", "50", "--concurrency", "4"], ()),
    "faults": (["--prompts", "20", "--repeat", "1", "--only", "flaky", "--only", "dead"], ()),
    "html_report": (["--sizes", "20", "--repeats", "1", "--answer-chars", "80"], ("orbench",)),
    "idle_cost": (["--repeat", "1"], ()),
    "judge_accuracy": (["--fresh-only"], ("orbench", "xstest")),
    "judge_dna": ([], ("do-not-answer",)),
    "judge_concurrency": (["--prompts", "6", "--latency", "0.01", "--judge-concurrency",
                           "default", "--judge-concurrency", "2"], ()),
    "judge_equality": (["--write", "{tmp}/judgments.json"], ()),
    "judge_speed": (["--n", "40", "--repeat", "1", "--server-repeat", "1", "--latency", "0.01",
                     "--server-concurrency", "8"], ()),
    "large_runs": (["--shard-size", "40", "--shards", "2", "--latency", "0",
                    "--concurrency", "4", "--batch-size", "40"], ()),
    "results_io": (["--items", "50", "--repeats", "1"], ()),
    "rewordings": (["--tries", "2"], ()),
}

# name → why it has no tiny run here.
NOT_RUN = {
    "chat_suites_local": "runs the embedded model (minutes on 2 cores)",
    "generate": "runs the embedded model (minutes on 2 cores)",
    "local_determinism": "runs the embedded model (minutes on 2 cores)",
    "local_model": "runs the embedded model (minutes on 2 cores)",
    "temperature": "runs the embedded model (about half an hour)",
    "install_footprint": "builds fresh virtualenvs and installs the package into them",
    "rerun_instructions": "counts instructions under valgrind over the 1,974 shared rows "
                          "(about 2 minutes; no smaller size)",
    "throughput": "its smallest set is the 1,974 shared rows, repeated (minutes)",
}


def test_every_benchmark_is_run_here_or_says_why_not() -> None:
    scripts = {path.stem for path in (REPO / "benchmarks").glob("*.py")} - {"_common"}
    assert scripts == set(RUNS) | set(NOT_RUN)
    assert not set(RUNS) & set(NOT_RUN)


@pytest.mark.parametrize("name", sorted(RUNS))
def test_the_benchmark_runs_at_a_tiny_size(name: str, tmp_path) -> None:
    flags, data = RUNS[name]
    for folder in data:
        shared_data(folder)
    env = {**os.environ, "ORBENCH_SHARED_DATA": str(SHARED_DATA),
           "ORBENCH_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("PYTEST_XDIST_WORKER", None)
    done = subprocess.run([sys.executable, f"benchmarks/{name}.py",
                           *(flag.format(tmp=tmp_path) for flag in flags)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert done.stdout.strip(), "it printed no figure"


@pytest.mark.parametrize("name", sorted(NOT_RUN))
def test_the_benchmark_without_a_tiny_size(name: str) -> None:
    pytest.skip(f"benchmarks/{name}.py: {NOT_RUN[name]}")
