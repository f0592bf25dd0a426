"""How long the tests wait, in one place: sized for a busy machine, scaled by one variable.

Every wait on something a test does not control the pace of (a child process, a server's
thread, a browser, an event caused in another process) is bounded by a figure from here, never
by a number written at the call. The figures are generous for a 2-core machine at load 20+ (a
pytest start-up alone then takes tens of seconds); a test decides nothing by them: a healthy
run ends, or shows its event, long before. On a slower machine still, multiply them all:
`ORBENCH_TEST_TIMEOUT_SCALE=3 pytest -n 2` (docs/contributing.md).

Imports nothing of the tests, so the servers beside it can use it too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

SCALE_VARIABLE = "ORBENCH_TEST_TIMEOUT_SCALE"


def timeout_scale(environ: Mapping[str, str]) -> float:
    """The factor from $ORBENCH_TEST_TIMEOUT_SCALE (1 when unset): a number of at least 1."""
    raw = environ.get(SCALE_VARIABLE, "").strip()
    if not raw:
        return 1.0
    try:
        scale = float(raw)
    except ValueError:
        scale = 0.0
    if not scale >= 1 or scale == float("inf"):  # also NaN
        raise ValueError(f"{SCALE_VARIABLE}={raw!r}: a number of at least 1 is allowed "
                         "(how many times slower than a busy 2-core machine this one is)")
    return scale


try:
    SCALE = timeout_scale(os.environ)
    SCALE_ERROR: str | None = None
except ValueError as exc:  # reported by tests/conftest.py as a usage error, not a traceback
    SCALE, SCALE_ERROR = 1.0, str(exc)


def scaled(seconds: float) -> float:
    """`seconds` times the machine's factor: for a bound a test sets on wall time it does not
    control (a fetch's duration seen from outside, a browser's reaction)."""
    return seconds * SCALE


# A child process (pytest, orbench, pip) to finish, or an event it causes to be seen.
SUBPROCESS_TIMEOUT_S = scaled(300.0)
# A step that installs or builds (a venv, a wheel, a benchmark at tiny size): a few times more.
LONG_SUBPROCESS_TIMEOUT_S = 3 * SUBPROCESS_TIMEOUT_S
# A thread of this process to start or stop (the test servers), a browser to react.
THREAD_TIMEOUT_S = scaled(60.0)
