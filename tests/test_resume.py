"""Kill a run mid-fetch (SIGKILL, SIGINT), run it again: only the unanswered prompts are asked."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from orbench_pytest.fetch.engine import ANSWERS_COMMIT_EVERY_S
from tests.helpers import (
    SUBPROCESS_TIMEOUT_S,
    answers_stored,
    orbench_argv,
    run_orbench,
    wait_until,
    write_suite,
)
from tests.openai_server import HoldAfter, OpenAIServer

N = 80
CONCURRENCY = 4
LATENCY_S = 0.05
ANSWERS_IN_AN_INTERVAL = math.ceil(CONCURRENCY * ANSWERS_COMMIT_EVERY_S / LATENCY_S)


def bread_suite(root: Path) -> list[str]:
    prompts = [f"question {i}: how do I bake bread?" for i in range(N)]
    write_suite(root, [{"prompt": p, "expect": "comply"} for p in prompts])
    return prompts


def cached_rows(root: Path) -> int:
    return answers_stored(root / "c.sqlite3")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "SIGINT"])
def test_a_killed_run_resumes_asking_only_the_rest(pytester, plugin_args, sig) -> None:
    prompts = bread_suite(pytester.path)
    # 50 ms a request, 4 at a time; after a third, requests are held until the kill has landed.
    held = HoldAfter(N // 3)
    with OpenAIServer(held, latency_s=LATENCY_S) as server:
        run = {"url": server.url, "cache": "c.sqlite3"}
        concurrency = f"--orbench-concurrency={CONCURRENCY}"
        process = subprocess.Popen(
            [sys.executable, "-m", "pytest", *orbench_argv(plugin_args, concurrency, **run)],
            cwd=pytester.path, env=os.environ.copy(), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True)
        wait_until(lambda: server.requests > N // 3, f"the server got {N // 3 + 1} requests")
        answered_before_kill = server.requests - server.in_flight
        process.send_signal(sig)
        output, _ = process.communicate(timeout=SUBPROCESS_TIMEOUT_S)
        held.release()
        first_run = list(server.prompts)

        kept = cached_rows(pytester.path)
        assert 0 < kept < N, output  # the kill landed mid-run
        # Every answer the server had sent before the kill is kept, but for those still on
        # the wire then (at most one per connection) and those of the last commit interval.
        assert kept >= answered_before_kill - CONCURRENCY - ANSWERS_IN_AN_INTERVAL
        if sig == signal.SIGINT:  # Ctrl-C: a clean stop, pending requests cancelled
            assert process.returncode == pytest.ExitCode.INTERRUPTED, output
            assert "KeyboardInterrupt" in output and "Traceback" not in output
        else:
            assert process.returncode == -signal.SIGKILL

        result = run_orbench(pytester, plugin_args, concurrency, **run)
        second_run = server.prompts[len(first_run):]

    result.assert_outcomes(passed=N)
    assert len(second_run) == N - kept  # only the rest is asked ...
    assert len(set(second_run)) == len(second_run)  # ... each once ...
    assert set(first_run) | set(second_run) == set(prompts)  # ... and together they cover all
    result.stdout.fnmatch_lines([f"answers: {N} ({kept} from cache), requests: {N - kept},*"])
    assert cached_rows(pytester.path) == N
