"""Adaptive concurrency: find the endpoint's speed instead of asking the user to guess it.

Slow start + AIMD (after Inspect's adaptive connections): the limit starts modestly and
doubles after each clean round until the first push-back; then it grows by a little per clean
round. A 429 or a 5xx cuts it multiplicatively, at most once per cooldown, so one burst of
errors is one cut. A round counts only when the work filled the limit (a trickle says nothing
about headroom) and its latency held (no more than `latency_slack` × the best round's, or
`latency_tolerance_s` above it: a server that queues answers more slowly when pushed is
already at its speed, while a millisecond of jitter on a fast server is not queueing). The
limit never leaves [floor, ceiling]; the ceiling is --orbench-concurrency.

Pure logic with an injected clock; `AdaptiveLimiter` adds the asyncio gate the engine waits on.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from orbench_pytest.core import defaults

Clock = Callable[[], float]


@dataclass(frozen=True)
class AdaptiveSettings:
    """How the adaptive concurrency limit moves between its floor and ceiling."""

    ceiling: int = defaults.CONCURRENCY
    start: int = defaults.CONCURRENCY_START
    floor: int = 1
    decrease_factor: float = 0.5
    increase_fraction: float = 0.1  # steady state: + max(1, 10 % of the limit) per clean round
    cooldown_s: float = 2.0
    latency_slack: float = 1.5
    latency_tolerance_s: float = 0.05
    saturation: float = 0.8  # a round counts when peak in flight reached 80 % of the limit
    min_round: int = 4

    @classmethod
    def fixed(cls, limit: int) -> AdaptiveSettings:
        """A limit that never moves (the embedded model's slots, --orbench-fixed-concurrency)."""
        return cls(ceiling=limit, start=limit, floor=limit)


class AdaptiveLimit:
    """The current limit and the feedback that moves it."""

    def __init__(self, settings: AdaptiveSettings, clock: Clock = time.monotonic) -> None:
        self.settings = settings
        self._clock = clock
        self.limit = max(settings.floor, min(settings.start, settings.ceiling))
        self.in_flight = 0
        self.cuts = 0
        self.peak = self.limit  # the highest limit reached, for the run's summary
        self._slow_start = True
        self._cut_until = float("-inf")
        self._reset_round()
        self._best_latency: float | None = None

    def _reset_round(self) -> None:
        self._round_successes = 0
        self._round_latency = 0.0
        self._round_peak = self.in_flight

    def started(self) -> None:
        self.in_flight += 1
        self._round_peak = max(self._round_peak, self.in_flight)

    def ended(self) -> None:
        self.in_flight -= 1

    def success(self, latency_s: float) -> None:
        """A request answered on its first attempt (retried ones are neutral)."""
        if self._clock() < self._cut_until:
            return  # sent before the cut: says nothing about the new limit
        self._round_successes += 1
        self._round_latency += latency_s
        if self._round_successes < max(self.limit, self.settings.min_round):
            return
        mean = self._round_latency / self._round_successes
        saturated = self._round_peak >= self.settings.saturation * self.limit
        best = self._best_latency
        latency_held = best is None or mean <= max(self.settings.latency_slack * best,
                                                   best + self.settings.latency_tolerance_s)
        if best is None or mean < best:
            self._best_latency = mean
        if saturated and latency_held:
            if self._slow_start:
                grown = self.limit * 2
            else:
                grown = self.limit + max(1, int(self.limit * self.settings.increase_fraction))
            self.limit = min(self.settings.ceiling, grown)
            self.peak = max(self.peak, self.limit)
        self._reset_round()

    def pushed_back(self) -> None:
        """A 429 or a 5xx: the endpoint is at (or past) what it can take."""
        now = self._clock()
        if now < self._cut_until:
            return
        self._slow_start = False
        cut = max(self.settings.floor, int(self.limit * self.settings.decrease_factor))
        self.cuts += cut < self.limit
        self.limit = cut
        self._cut_until = now + self.settings.cooldown_s
        self._reset_round()


class AdaptiveLimiter:
    """An asyncio gate whose size follows an AdaptiveLimit.

    A release hands the freed slots straight to the longest waiters: no waiter wakes only to
    find the gate full again (with 100 waiting, a Condition's notify_all would wake all 100
    for every answer).
    """

    def __init__(self, limit: AdaptiveLimit) -> None:
        self.limit = limit
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def acquire(self) -> None:
        if not self._waiters and self.limit.in_flight < self.limit.limit:
            self.limit.started()
            return
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(granted)
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                self._give_back()  # the slot came with the cancellation: pass it on
            else:
                self._waiters.remove(granted)
            raise

    def release(self, *, latency_s: float | None = None, pushed_back: bool = False) -> None:
        """`latency_s`: a clean first-attempt answer; `pushed_back`: a 429 / 5xx was seen."""
        self.limit.ended()
        if pushed_back:
            self.limit.pushed_back()
        elif latency_s is not None:
            self.limit.success(latency_s)
        self._wake()

    def _give_back(self) -> None:
        self.limit.ended()
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.limit.in_flight < self.limit.limit:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.limit.started()
                waiter.set_result(None)
