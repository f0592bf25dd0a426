"""Issue 43 point 7: retry and wait headers of any value (inf, nan, negative, huge, 1e400,
non-numeric, HTTP dates, retry-after-ms) go through one parser (fetch/wait_headers.py): a
finite wait or none, never an exception; the run ends with its gate line, never INTERNALERROR.
Through the real hostile server, and a property over every header text."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orbench_pytest.fetch.retry import GiveUp, Retry, RetryPolicy, RetrySettings, StopRun
from orbench_pytest.fetch.targets import FaultKind, TransientFault
from orbench_pytest.fetch.wait_headers import WAIT_CEILING_S, wait_seconds
from tests import hostile_server as hs
from tests.helpers import SAFE, cases, run_orbench, write_suite

NOW = 1_790_000_000.0  # an injected wall clock (2026-09)

HOSTILE = {
    "Retry-After: inf": {"Retry-After": "inf"},
    "Retry-After: nan": {"Retry-After": "nan"},
    "Retry-After: -5": {"Retry-After": "-5"},
    "Retry-After: 1e400": {"Retry-After": "1e400"},
    "Retry-After: 10**30": {"Retry-After": "1" + "0" * 30},
    "Retry-After: soon": {"Retry-After": "soon"},
    "Retry-After: a date in 9999": {"Retry-After": "Fri, 31 Dec 9999 23:59:59 GMT"},
    "Retry-After: a date before 1970": {"Retry-After": "Thu, 01 Jan 1900 00:00:00 GMT"},
    "retry-after-ms: inf": {"retry-after-ms": "inf"},
    "retry-after-ms: -inf": {"retry-after-ms": "-inf"},
    "retry-after-ms: nan and Retry-After: 1e400": {"retry-after-ms": "nan",
                                                    "Retry-After": "1e400"},
}


@pytest.mark.parametrize(("value", "expected"), [
    ("1", 1.0), ("0.5", 0.5), ("-5", 0.0), ("inf", WAIT_CEILING_S), ("1e400", WAIT_CEILING_S),
    ("Infinity", WAIT_CEILING_S), ("-inf", 0.0), ("nan", None), ("soon", None), ("", None),
    ("Sun, 29 Nov 2026 00:00:10 GMT", None),  # parsed below with its own clock
])
def test_retry_after_values(value: str, expected: float | None) -> None:
    if value.startswith("Sun"):
        return
    assert wait_seconds({"retry-after": value}, now=NOW) == expected


def test_an_http_date_is_a_wait_from_the_injected_clock_and_a_past_date_none_of_it() -> None:
    assert wait_seconds({"retry-after": "Mon, 21 Sep 2026 14:13:30 GMT"}, now=NOW) == 10.0
    assert wait_seconds({"retry-after": "Thu, 01 Jan 1970 00:00:00 GMT"}, now=NOW) == 0.0
    assert wait_seconds({"retry-after": "Fri, 31 Dec 9999 23:59:59 GMT"}, now=NOW) == (
        WAIT_CEILING_S)
    assert wait_seconds({"retry-after-ms": "250", "retry-after": "30"}, now=NOW) == 0.25
    assert wait_seconds({"retry-after-ms": "inf"}, now=NOW) == WAIT_CEILING_S


@given(st.dictionaries(st.sampled_from(["retry-after", "retry-after-ms"]),
                       st.one_of(st.text(max_size=40),
                                 st.floats().map(repr), st.floats().map(str),
                                 st.integers().map(str),
                                 st.datetimes().map(lambda d: d.strftime(
                                     "%a, %d %b %Y %H:%M:%S GMT")))),
       st.floats(min_value=0, max_value=4e9))
def test_any_header_is_a_finite_wait_or_none_and_the_policy_decides_without_raising(
        headers: dict[str, str], now: float) -> None:
    wait = wait_seconds(headers, now=now)
    assert wait is None or (math.isfinite(wait) and 0.0 <= wait <= WAIT_CEILING_S)
    policy = RetryPolicy(RetrySettings(), clock=lambda: 0.0, rng=random.Random(0))
    for kind in (FaultKind.RATE_LIMIT, FaultKind.SERVER_ERROR):
        decision = policy.after_fault(TransientFault(kind, "x", wait, 429), 0, 0)
        assert isinstance(decision, (Retry, GiveUp, StopRun))
        if isinstance(decision, Retry):
            assert math.isfinite(decision.wait_s) and decision.wait_s >= 0
        if isinstance(decision, StopRun):
            assert "inf" not in decision.reason and "nan" not in decision.reason


@pytest.mark.parametrize("headers", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_wait_header_ends_the_run_with_its_gate_line(pytester, plugin_args,
                                                               headers: dict[str, str]) -> None:
    write_suite(pytester, cases([SAFE[0]]), "one",
                thresholds={"defaults": {"max_error_rate": 1.0}})
    asked = []

    def script(prompt: str) -> bytes:
        asked.append(prompt)
        if len(asked) == 1:
            return hs.http(429, b'{"error": {"message": "slow down"}}', headers)
        return hs.answer("Sure: here is how.")

    with hs.HostileServer(script) as server:
        result = run_orbench(pytester, plugin_args, "-p", "no:cacheprovider", url=server.url,
                             retries=1)
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text and "Traceback" not in text, text
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), text
    result.stdout.fnmatch_lines(["orbench gate: *"])
    if result.ret == pytest.ExitCode.TESTS_FAILED:  # a wait past the cap stops the run
        result.stdout.fnmatch_lines(["*rate limited * (Retry-After), more than the 60s a run "
                                     "waits*"])
