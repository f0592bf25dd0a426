"""Shutdown is quiet and bounded: an async target that swallows its cancellation leaves no
"Task was destroyed but it is pending!" lines; a second Ctrl-C while an interrupted run
finishes ends it at once without a traceback; `orbench generate` stops on a stalled endpoint
as the plugin does. Real processes and real signals, each sent once the test has seen the
event it waits for (a file the app wrote, a request the server got), never after a sleep."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import (
    SUBPROCESS_TIMEOUT_S,
    mini_suite,
    orbench_argv,
    orbench_cli,
    wait_until,
)
from tests.openai_server import OpenAIServer, Reply

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

STUBBORN = '''
import asyncio

async def answer(prompt, system_prompt):
    while True:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            pass  # swallows its cancellation: it never ends
'''


def test_an_async_target_that_swallows_cancellation_ends_quietly(
        pytester: pytest.Pytester, plugin_args: list[str]) -> None:
    """Before: the run ended, then printed "Task was destroyed but it is pending!" and the
    task's line for each abandoned call (12 lines in the issue's run)."""
    mini_suite(pytester)
    pytester.makepyfile(stubborn=STUBBORN)
    result = pytester.runpytest_subprocess(
        *plugin_args, "suites", "--orbench-target=stubborn:answer", "--orbench-timeout=0.5",
        "--orbench-cache=off", "-p", "no:cacheprovider", timeout=SUBPROCESS_TIMEOUT_S)
    text = result.stdout.str() + result.stderr.str()
    assert "ignored its cancellation and was abandoned" in text, text
    assert "orbench gate: FAILED" in text
    assert "Task was destroyed" not in text and "Traceback" not in text, text


# --- a second Ctrl-C ----------------------------------------------------------------------------

BLOCKING_APP = '''
import threading
from pathlib import Path

def answer(prompt, system_prompt):
    Path("asked").touch()  # the test's cue: the fetch is under way
    threading.Event().wait()  # an answer that never comes
'''
SLOW_FINISH = '''
import threading
from pathlib import Path

def pytest_sessionfinish(session):
    """A finish that takes long: a large JUnit file, a plugin's summary, a slow disk."""
    Path("finishing").touch()  # the test's cue: the interrupted run is finishing
    threading.Event().wait()
'''


def test_a_second_ctrl_c_during_a_slow_finish_ends_the_run_at_once(
        pytester: pytest.Pytester, plugin_args: list[str]) -> None:
    """Before: the second KeyboardInterrupt escaped from wherever it landed (here the slow
    hook; in the issue, Hypothesis' pytest plugin) with its traceback."""
    mini_suite(pytester)
    pytester.makepyfile(app=BLOCKING_APP)
    pytester.makeconftest(SLOW_FINISH)
    # Hypothesis' plugin stays loaded, as in a user's run.
    child = subprocess.Popen(
        [sys.executable, "-m", "pytest", *plugin_args, "suites", "--orbench-target=app:answer",
         "--orbench-cache=off", "-p", "no:cacheprovider"],
        cwd=pytester.path, env=os.environ.copy(), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    try:
        wait_until((pytester.path / "asked").exists, "the app was asked")
        child.send_signal(signal.SIGINT)
        wait_until((pytester.path / "finishing").exists, "the interrupted run began to finish")
        child.send_signal(signal.SIGINT)
        output, _ = child.communicate(timeout=SUBPROCESS_TIMEOUT_S)
    finally:
        child.kill()
    assert child.returncode == pytest.ExitCode.INTERRUPTED, output
    assert "Traceback" not in output and "KeyboardInterrupt\n" not in output[-200:], output
    assert output.rstrip().endswith(
        "orbench: interrupted again: stopped at once (this run's reports were not written)")


def test_one_ctrl_c_still_finishes_the_run(pytester: pytest.Pytester,
                                           plugin_args: list[str]) -> None:
    """The first Ctrl-C is pytest's as before: a clean stop, its summary, no traceback."""
    mini_suite(pytester)
    pytester.makepyfile(app=BLOCKING_APP)
    child = subprocess.Popen(
        [sys.executable, "-m", "pytest", *orbench_argv(plugin_args, "--orbench-cache=off",
                                                       "--orbench-target=app:answer")],
        cwd=pytester.path, env=os.environ.copy(), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    try:
        wait_until((pytester.path / "asked").exists, "the app was asked")
        child.send_signal(signal.SIGINT)
        output, _ = child.communicate(timeout=SUBPROCESS_TIMEOUT_S)
    finally:
        child.kill()
    assert child.returncode == pytest.ExitCode.INTERRUPTED, output
    assert "KeyboardInterrupt" in output and "Traceback" not in output, output
    assert "interrupted again" not in output


# --- orbench generate on a stalled endpoint ---------------------------------------------------

def test_orbench_generate_stops_on_a_stall_as_the_plugin_does(tmp_path: Path) -> None:
    """Every reply trickles a byte at a time until its timeout. Before: generate built its
    fetch settings without the timeout, so only 20 failed attempts in a row stopped it; now
    no answer for 2 timeouts since the first failure does (the plugin's rule)."""
    seeds = tmp_path / "seeds.csv"
    seeds.write_text("prompt,category\n" + "".join(f"How do I pick lock {i}?,crime\n"
                                                  for i in range(40)), encoding="utf-8")
    with OpenAIServer(lambda prompt, system, body: Reply(fault="trickle")) as server:
        done = orbench_cli("generate", "--seeds", seeds, "--out", tmp_path / "out",
                           "--rewriter-model", "rewriter", "--rewriter-base-url", server.url,
                           "--moderator", "mod1", "--moderator-base-url", server.url,
                           "--timeout", "1", "--max-retries", "50",
                           "--cache-path", tmp_path / "cache.sqlite3", cwd=tmp_path)
    text = done.stdout + done.stderr
    assert "Traceback" not in text, text
    # Before: each of the 40 requests timed out twice (80 timeouts, halving the concurrency)
    # and the stage ended "no answer after 2 attempts"; now the stall stops the stage.
    assert "not sent: endpoint unavailable: no answer for 2s since the first failure" in text
