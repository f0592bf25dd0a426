"""The tests' own waits: one factor scales them all (tests/timeouts.py), and a bad factor is a
one-line usage error, not a traceback or a silent 1."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tests.helpers import REPO, SUBPROCESS_TIMEOUT_S
from tests.timeouts import SCALE_VARIABLE, timeout_scale


@pytest.mark.parametrize(("raw", "scale"), [("", 1.0), (" ", 1.0), ("1", 1.0), ("3", 3.0),
                                            ("2.5", 2.5)])
def test_the_factor_scales_every_wait(raw: str, scale: float) -> None:
    assert timeout_scale({SCALE_VARIABLE: raw}) == scale
    assert timeout_scale({}) == 1.0


@pytest.mark.parametrize("raw", ["0.5", "0", "-2", "fast", "nan", "inf", "3s"])
def test_a_factor_that_is_not_a_number_of_at_least_one_is_refused(raw: str) -> None:
    with pytest.raises(ValueError, match=f"^{SCALE_VARIABLE}='{raw}': a number of at least 1 "
                                         "is allowed"):
        timeout_scale({SCALE_VARIABLE: raw})


def test_pytest_with_a_bad_factor_stops_with_one_line() -> None:
    env = {**os.environ, SCALE_VARIABLE: "fast"}
    env.pop("PYTEST_XDIST_WORKER", None)
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                           "-p", "no:xdist", "--collect-only", "-q", "tests/test_timeouts.py"],
                          cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=SUBPROCESS_TIMEOUT_S)
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    assert done.stderr.strip() == (f"ERROR: {SCALE_VARIABLE}='fast': a number of at least 1 is "
                                   "allowed (how many times slower than a busy 2-core machine "
                                   "this one is)")
    assert "Traceback" not in done.stdout + done.stderr


# --- Hypothesis: no deadline, no speed health check ----------------------------------------

def test_no_property_test_is_held_to_a_deadline() -> None:
    """The profile tests/conftest.py loads is in force, and no test sets a deadline of its own:
    none is about its own speed, and a deadline measures the machine (issue 44)."""
    import re

    from hypothesis import HealthCheck, settings

    assert settings.default.deadline is None
    assert HealthCheck.too_slow in settings.default.suppress_health_check
    given_a_deadline = re.compile(r"settings\([^)]*\bdeadline\s*=\s*(?!None\b)", re.DOTALL)
    offenders = [path.name for path in (REPO / "tests").glob("*.py")
                 if given_a_deadline.search(path.read_text(encoding="utf-8"))]
    assert offenders == []


# --- Ctrl-C in a run started in the background ---------------------------------------------

def test_this_process_takes_a_ctrl_c() -> None:
    with pytest.raises(KeyboardInterrupt):
        signal.raise_signal(signal.SIGINT)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_run_started_with_ctrl_c_ignored_still_takes_one() -> None:
    """`pytest &` in a script starts with SIGINT ignored; the Ctrl-C tests (here the one
    above, in such a run) still get their KeyboardInterrupt, and so do their children."""
    env = {**os.environ}
    env.pop("PYTEST_XDIST_WORKER", None)
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                           "-p", "no:xdist", "-q", "tests/test_timeouts.py::"
                           "test_this_process_takes_a_ctrl_c"],
                          cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=SUBPROCESS_TIMEOUT_S,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
