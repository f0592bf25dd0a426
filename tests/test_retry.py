"""The retry policy on its own: typed faults in, decisions out, time from a fake clock."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orbench_pytest.fetch.retry import GiveUp, Retry, RetryPolicy, RetrySettings, StopRun
from orbench_pytest.fetch.targets import FaultKind, TransientFault
from tests.helpers import FakeClock


def fault(kind: FaultKind, retry_after: float | None = None, status: int | None = None,
          reason: str = "boom") -> TransientFault:
    return TransientFault(kind, reason, retry_after, status)


def test_a_quota_fault_stops_the_run_at_once_with_the_providers_message() -> None:
    policy = RetryPolicy(RetrySettings())
    decision = policy.after_fault(fault(FaultKind.QUOTA, status=429, reason=(
        "HTTP 429 insufficient_quota: You exceeded your current quota")), 0, 0)
    assert decision == StopRun("quota exhausted: HTTP 429 insufficient_quota: "
                               "You exceeded your current quota")


def test_a_retry_after_beyond_the_cap_stops_the_run_and_within_it_waits() -> None:
    policy = RetryPolicy(RetrySettings(max_retry_after_s=60), rng=random.Random(1))
    long_wait = policy.after_fault(fault(FaultKind.RATE_LIMIT, 3600, 429), 0, 0)
    assert isinstance(long_wait, StopRun) and "3600s (Retry-After)" in long_wait.reason
    short = policy.after_fault(fault(FaultKind.RATE_LIMIT, 2.0, 429), 0, 0)
    assert isinstance(short, Retry) and 2.0 <= short.wait_s <= 2.2


@pytest.mark.parametrize("kind", [FaultKind.SERVER_ERROR, FaultKind.RATE_LIMIT])
def test_every_retried_faults_retry_after_obeys_the_one_cap(kind) -> None:
    policy = RetryPolicy(RetrySettings(max_retry_after_s=60), rng=random.Random(1))
    long_wait = policy.after_fault(fault(kind, 100000.5, 503, "HTTP 503 busy"), 0, 0)
    told = "rate limited" if kind is FaultKind.RATE_LIMIT else "told to wait"
    assert long_wait == StopRun(f"{told} for 100001s (Retry-After), more than the 60s a run "
                                "waits: HTTP 503 busy")
    short = policy.after_fault(fault(kind, 60.0, 503), 0, 0)
    assert isinstance(short, Retry) and 60.0 <= short.wait_s <= 61.0


def test_rate_limits_in_a_row_past_the_budget_stop_the_run_and_an_answer_resets_it() -> None:
    policy = RetryPolicy(RetrySettings(max_consecutive_rate_limits=5, max_retries=100))
    for attempt in range(4):
        assert isinstance(policy.after_fault(fault(FaultKind.RATE_LIMIT), attempt, 0), Retry)
    policy.succeeded()
    for attempt in range(4):
        assert isinstance(policy.after_fault(fault(FaultKind.RATE_LIMIT), attempt, 0), Retry)
    last = policy.after_fault(fault(FaultKind.RATE_LIMIT), 4, 0)
    assert isinstance(last, StopRun) and "5 requests in a row got HTTP 429" in last.reason


def test_rate_limits_do_not_count_toward_an_outage() -> None:
    policy = RetryPolicy(RetrySettings(max_consecutive_failures=3, max_retries=100))
    for attempt in range(50):
        assert isinstance(policy.after_fault(fault(FaultKind.RATE_LIMIT), attempt, 0), Retry)
    policy.after_fault(fault(FaultKind.SERVER_ERROR, status=502), 0, 0)
    policy.after_fault(fault(FaultKind.CONNECTION), 0, 0)
    down = policy.after_fault(fault(FaultKind.TIMEOUT), 0, 1)
    assert down == StopRun("endpoint unavailable: 3 failed attempts in a row, the last: boom")


def test_a_prompt_gives_up_after_max_retries_and_a_timeout_is_retried_once() -> None:
    policy = RetryPolicy(RetrySettings(max_retries=2))
    assert isinstance(policy.after_fault(fault(FaultKind.SERVER_ERROR), 1, 0), Retry)
    assert policy.after_fault(fault(FaultKind.SERVER_ERROR), 2, 0) == GiveUp(
        "no answer after 3 attempts: boom")
    assert isinstance(policy.after_fault(fault(FaultKind.TIMEOUT), 0, 1), Retry)
    assert policy.after_fault(fault(FaultKind.TIMEOUT), 1, 2) == GiveUp(
        "no answer after 2 attempts: boom")


@given(st.integers(0, 12), st.floats(0.01, 5.0))
def test_backoff_is_equal_jitter_under_the_ceiling(attempt: int, base: float) -> None:
    policy = RetryPolicy(RetrySettings(backoff_base_s=base, backoff_max_s=30.0),
                         rng=random.Random(attempt))
    ceiling = min(30.0, base * 2 ** attempt)
    assert ceiling / 2 <= policy.backoff(attempt, None) <= ceiling


def test_max_duration_runs_on_the_injected_clock() -> None:
    clock = FakeClock(500.0)
    policy = RetryPolicy(RetrySettings(max_duration_s=30), clock)
    policy.start()
    clock.now += 29.5
    assert policy.time_left() == pytest.approx(0.5) and policy.over_time() is None
    clock.now += 1
    assert policy.over_time() == "the run took longer than --orbench-max-duration=30s"
    assert RetryPolicy(RetrySettings(), clock).time_left() is None


def test_no_answer_for_two_timeouts_stops_the_run_whatever_the_pace_of_failures() -> None:
    """Clock injected: one failed attempt per timeout (the concurrency halved to 1) stops at
    the third failure, two timeouts after the first, not at the twentieth."""
    from orbench_pytest.fetch.retry import STALL_TIMEOUTS, stall_bound

    clock = FakeClock()
    timeout = 120.0
    policy = RetryPolicy(RetrySettings(stall_s=stall_bound(timeout)), clock=clock)
    decisions = []
    for n in range(1, 20):
        clock.now = n * timeout  # each attempt fails at its timeout
        decisions.append(policy.after_fault(fault(FaultKind.TIMEOUT), 0, 1))
        if isinstance(decisions[-1], StopRun):
            break
    assert len(decisions) == 1 + STALL_TIMEOUTS == 3
    assert decisions[-1].reason.startswith(  # type: ignore[union-attr]
        "endpoint unavailable: no answer for 240s since the first failure (3 failed attempts")
    # An answer in between starts the streak again.
    policy.succeeded()
    clock.now += 1000
    assert isinstance(policy.after_fault(fault(FaultKind.TIMEOUT), 0, 1), Retry)
