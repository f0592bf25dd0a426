"""The retry policy: after each failed attempt, wait (how long), give up on the prompt, or stop
the run. Pure decisions from typed fault kinds and an injected clock, so tests drive it with a
fake clock instead of patching `time` or sleeping.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from orbench_pytest.core import defaults
from orbench_pytest.core.redact import redact
from orbench_pytest.fetch.targets import FaultKind, TransientFault
from orbench_pytest.fetch.wait_headers import WAIT_CEILING_S

Clock = Callable[[], float]  # seconds, monotonic
Sleep = Callable[[float], Awaitable[None]]

# Faults that say the endpoint is at its capacity (a 429, a 5xx, an answer slower than the
# timeout): the adaptive concurrency limit is cut. A reset or a bad body says nothing of load.
PUSH_BACK_KINDS = frozenset({FaultKind.RATE_LIMIT, FaultKind.SERVER_ERROR, FaultKind.TIMEOUT})

# The run stops when no attempt has been answered for STALL_TIMEOUTS × --orbench-timeout since
# the first failure of the streak (and STALL_MIN_FAILURES attempts failed): a slow-loris
# endpoint (each attempt times out, each timeout halves the concurrency until attempts go out
# one at a time) is given up within (1 + STALL_TIMEOUTS + 1) × the timeout of the run's start,
# whatever the concurrency, instead of the 20 failures' 17-19 timeouts.
STALL_TIMEOUTS = 2
STALL_MIN_FAILURES = 3


def pushes_back(fault: TransientFault) -> bool:
    return fault.kind in PUSH_BACK_KINDS


@dataclass(frozen=True)
class RetrySettings:
    """When to retry a failed request, how long to wait, and when to give up."""

    max_retries: int = defaults.MAX_RETRIES
    backoff_base_s: float = defaults.BACKOFF_S
    backoff_max_s: float = defaults.BACKOFF_MAX_S
    # Consecutive failed attempts (not rate limits) after which the endpoint counts as down.
    max_consecutive_failures: int = 20
    # Consecutive 429s (no answer in between) after which the limit counts as permanent.
    max_consecutive_rate_limits: int = 200
    # A Retry-After longer than this ends the run instead of stalling it.
    max_retry_after_s: float = 60.0
    # Timeouts of one prompt are retried at most this often: a slow-loris endpoint must not
    # hold a prompt for (1 + max_retries) × timeout.
    max_timeout_retries: int = 1
    max_duration_s: float | None = None  # --orbench-max-duration: the whole run's bound
    # No answer for this long (failures only, rate limits aside): the endpoint is down.
    stall_s: float | None = None


@dataclass(frozen=True, slots=True)
class Retry:
    """Send this prompt again after `wait_s`."""

    wait_s: float


@dataclass(frozen=True, slots=True)
class GiveUp:
    """This prompt ends as an error; the run goes on."""

    reason: str


@dataclass(frozen=True, slots=True)
class StopRun:
    """The endpoint is unusable for this run (down, out of quota, asking for hours)."""

    reason: str


Decision = Retry | GiveUp | StopRun


class RetryPolicy:
    """Decides after each fault; keeps the run-wide streaks that tell an outage from a blip."""

    def __init__(self, settings: RetrySettings, clock: Clock = time.monotonic,
                 rng: random.Random | None = None) -> None:
        self.settings = settings
        self.clock = clock
        self._rng = rng or random.Random()
        self._failures = 0
        self._rate_limits = 0
        self._deadline: float | None = None
        self._streak_start: float | None = None  # the first failure since the last answer

    def start(self) -> None:
        """The run begins now: --orbench-max-duration counts from here."""
        if self.settings.max_duration_s is not None:
            self._deadline = self.clock() + self.settings.max_duration_s

    def time_left(self) -> float | None:
        return None if self._deadline is None else self._deadline - self.clock()

    def over_time(self) -> str | None:
        left = self.time_left()
        if left is not None and left <= 0:
            return (f"the run took longer than --orbench-max-duration="
                    f"{self.settings.max_duration_s:g}s")
        return None

    def succeeded(self) -> None:
        self._failures = 0
        self._rate_limits = 0
        self._streak_start = None

    def after_fault(self, fault: TransientFault, attempt: int, timeouts: int) -> Decision:
        """`attempt`: 0-based number of the attempt that failed; `timeouts`: how many of this
        prompt's attempts timed out, this one included."""
        s = self.settings
        reason = redact(fault.reason)
        if fault.kind is FaultKind.QUOTA:
            return StopRun(f"quota exhausted: {reason}")
        too_long = self._too_long_a_wait(fault, reason)
        if too_long is not None:
            return too_long
        if fault.kind is FaultKind.RATE_LIMIT:
            self._rate_limits += 1
            if self._rate_limits >= s.max_consecutive_rate_limits:
                return StopRun(f"rate limited: {s.max_consecutive_rate_limits} requests in a "
                               f"row got HTTP 429, the last: {reason}")
        else:
            self._failures += 1
            now = self.clock()
            if self._streak_start is None:
                self._streak_start = now
            if self._failures >= s.max_consecutive_failures:
                return StopRun(f"endpoint unavailable: {s.max_consecutive_failures} failed "
                               f"attempts in a row, the last: {reason}")
            stalled = now - self._streak_start
            if (s.stall_s is not None and self._failures >= STALL_MIN_FAILURES
                    and stalled >= s.stall_s):
                return StopRun(f"endpoint unavailable: no answer for {stalled:.0f}s since the "
                               f"first failure ({self._failures} failed attempts in a row), "
                               f"the last: {reason}")
        last = attempt >= s.max_retries or (
            fault.kind is FaultKind.TIMEOUT and timeouts > s.max_timeout_retries)
        if last:
            return GiveUp(f"no answer after {attempt + 1} attempts: {reason}")
        return Retry(self.backoff(attempt, fault.retry_after))

    def _too_long_a_wait(self, fault: TransientFault, reason: str) -> StopRun | None:
        """A Retry-After (seconds or an HTTP date) past the cap ends the run, whatever fault
        carried it (a 429, a 503): the run never sleeps for what a server says unbounded."""
        cap = self.settings.max_retry_after_s
        if fault.retry_after is None or fault.retry_after <= cap:
            return None
        told = "rate limited" if fault.kind is FaultKind.RATE_LIMIT else "told to wait"
        # A wait comes from fetch/wait_headers.py: finite, at most its ceiling.
        wait = ("without end" if fault.retry_after >= WAIT_CEILING_S
                else f"for {math.ceil(fault.retry_after)}s")
        return StopRun(f"{told} {wait} (Retry-After), more than the {cap:g}s a run "
                       f"waits: {reason}")

    def backoff(self, attempt: int, retry_after: float | None) -> float:
        s = self.settings
        if retry_after is not None:
            # The server's word, plus a little jitter so the waiting requests do not return
            # in one burst.
            return float(retry_after + self._rng.uniform(0, min(1.0, retry_after * 0.1)))
        ceiling = min(s.backoff_max_s, s.backoff_base_s * 2 ** attempt)
        return float(ceiling / 2 + self._rng.uniform(0, ceiling / 2))  # equal jitter


def stall_bound(timeout_s: float | None) -> float | None:
    """RetrySettings.stall_s for a request timeout (None: no bound but the failure count)."""
    return None if timeout_s is None else STALL_TIMEOUTS * timeout_s
