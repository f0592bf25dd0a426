"""The request layer: one send, with its concurrency slot, rate window, retries and the run's stop.

Every request of a run goes through one `RequestLayer`: the target's (engine.py) and the
LLM judge's (judges/channel.py). It holds an adaptive concurrency limit per endpoint
(concurrency.py: grows while answers come back fast and clean, cut on 429 / 5xx, never above
its ceiling), the optional rpm/tpm window (rate_window.py) and a RetryPolicy (retry.py) that
decides backoff, giving up and stopping the run. The first target request goes out alone: a
wrong key or model stops the run after one request, not after `concurrency` of them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, Protocol, TypeVar

from orbench_pytest.core.redact import redact
from orbench_pytest.core.types import Response
from orbench_pytest.fetch.concurrency import AdaptiveLimit, AdaptiveLimiter, AdaptiveSettings
from orbench_pytest.fetch.costs import PROMPTS, Spending
from orbench_pytest.fetch.rate_window import RateLimiter
from orbench_pytest.fetch.retry import (
    Clock,
    GiveUp,
    RetryPolicy,
    RetrySettings,
    Sleep,
    StopRun,
    pushes_back,
)
from orbench_pytest.fetch.targets import ConfigFault, FaultKind, TransientFault


class RequestTally(Protocol):
    """What the requests of a run came to: the fields the layer writes of the run's report
    (engine.FetchReport)."""

    requests: int
    retries: int
    spent: Spending  # the requests (and their answers' tokens) by kind
    retry_reasons: dict[str, int]  # e.g. {"HTTP 429": 12}
    stopped_reason: str | None
    config_error: str | None


Tally = TypeVar("Tally", bound=RequestTally)


class RequestLayer(Generic[Tally]):
    """`clock` and `sleep` drive rate limits, backoff and --orbench-max-duration; tests pass
    fakes. The default sleep ends early when the run stops."""

    def __init__(self, tally: Tally, *, rpm: int | None, tpm: int | None,
                 retry: RetrySettings, adaptive: bool, clock: Clock = time.monotonic,
                 sleep: Sleep | None = None) -> None:
        self.tally = tally
        self.policy = RetryPolicy(retry, clock)
        self._adaptive = adaptive
        self._clock = clock
        self._sleep_fn = sleep
        self._limiter = RateLimiter(rpm, tpm, clock, self.sleep)
        self._stop: asyncio.Event | None = None
        self._first_exchange: asyncio.Event | None = None
        self._probe_sent = False
        self.out_of_time = False

    def limit(self, ceiling: int) -> AdaptiveLimit:
        """A concurrency limit for one endpoint: adaptive up to `ceiling`, or fixed at it."""
        return AdaptiveLimit(AdaptiveSettings(ceiling=ceiling) if self._adaptive
                             else AdaptiveSettings.fixed(ceiling), self._clock)

    def start(self) -> None:
        """The run begins (inside its event loop): its stop, its probe, its time limit."""
        self._stop = asyncio.Event()
        self._first_exchange = asyncio.Event()
        self.policy.start()

    @property
    def stopping(self) -> bool:
        return self._stop is not None and self._stop.is_set()

    def stop(self) -> None:
        """Stop the run; its reason, if any, is the caller's to record."""
        if self._stop is not None:
            self._stop.set()

    def stop_run(self, reason: str) -> None:
        if self.tally.stopped_reason is None:
            self.tally.stopped_reason = reason
        self.stop()

    def why_stopped(self, default: str) -> str:
        return self.tally.stopped_reason or self.tally.config_error or default

    async def attempts(self, send: Callable[[], Awaitable[Response]], tokens: int, *,
                       gated: bool, slots: AdaptiveLimiter | None,
                       kind: str = PROMPTS) -> Response | None:
        """One request with its retries; None when the run was stopped meanwhile.

        `gated`: a target request, held until the first one (the probe) has come back.
        `slots`: the concurrency limit each attempt is sent within.
        `kind`: what the request is for, as the cost line counts it (costs.KINDS).
        """
        stop = self._stop
        assert stop is not None
        first = self._first_exchange
        assert first is not None
        timeouts = 0
        attempt = 0
        while True:
            probe = gated and not self._probe_sent
            self._probe_sent = self._probe_sent or gated
            if gated and not probe:
                await first.wait()
            if stop.is_set():
                return None
            try:
                try:
                    response = await self._send_once(send, tokens, slots, attempt == 0,
                                                     kind)
                finally:
                    # Whatever came back (the handlers below run before any waiter wakes,
                    # so a ConfigFault's stop is already set when they look).
                    if probe:
                        first.set()
                if response is None:
                    return None
            except ConfigFault as fault:
                self.tally.config_error = redact(str(fault))
                stop.set()
                return None
            except TransientFault as fault:
                self.tally.retry_reasons[fault.tally] = (
                    self.tally.retry_reasons.get(fault.tally, 0) + 1)
                timeouts += fault.kind is FaultKind.TIMEOUT
                decision = self.policy.after_fault(fault, attempt, timeouts)
                if isinstance(decision, StopRun):
                    self.stop_run(decision.reason)
                    return None
                if isinstance(decision, GiveUp):
                    return Response(text=None, error=decision.reason)
                self.tally.retries += 1
                attempt += 1
                await self.sleep(decision.wait_s)
                continue
            self.policy.succeeded()
            response.attempts = attempt + 1
            return response

    async def _send_once(self, send: Callable[[], Awaitable[Response]], tokens: int,
                         slots: AdaptiveLimiter | None, first_attempt: bool,
                         kind: str) -> Response | None:
        """One attempt: a slot of the concurrency limit (target requests), a place in the rate
        window, the request. The slot is held only while the request is out (never during a
        backoff) and is given back with what the attempt says of the endpoint's load: a
        first-attempt answer and its latency, a push-back, or nothing."""
        stop = self._stop
        assert stop is not None
        if slots is not None:
            await slots.acquire()
        latency_s: float | None = None
        pushed_back = False
        try:
            if stop.is_set():
                return None
            ticket = await self._limiter.acquire(tokens, stop.is_set)
            if ticket is None or stop.is_set():
                if ticket is not None:
                    self._limiter.release(ticket)
                return None
            self.tally.requests += 1
            self.tally.spent.of(kind).requests += 1
            try:
                response = await send()
            except TransientFault as fault:
                pushed_back = pushes_back(fault)
                raise
            finally:
                self._limiter.release(ticket)
            if first_attempt:
                latency_s = response.latency_ms / 1000
            return response
        finally:
            if slots is not None:
                slots.release(latency_s=latency_s, pushed_back=pushed_back)

    async def sleep(self, seconds: float) -> None:
        if self._sleep_fn is not None:
            await self._sleep_fn(seconds)
            return
        stop = self._stop
        if stop is None:
            await asyncio.sleep(seconds)
            return
        try:  # the default sleep: wakes early when the run stops
            await asyncio.wait_for(stop.wait(), timeout=seconds)
        except asyncio.TimeoutError:
            pass

    async def within_time(self, tasks: Sequence[asyncio.Future[None]]) -> None:
        """`tasks` run to their end, or until --orbench-max-duration (then they are cancelled
        and the run ends); whatever way they end, none is left running."""
        watchdog = asyncio.ensure_future(self.watch_the_clock(tasks))
        try:
            await asyncio.gather(*tasks)
        except asyncio.CancelledError:
            if not self.out_of_time:
                raise  # Ctrl-C from outside, not the run's own time limit
        finally:
            watchdog.cancel()
            for task in tasks:
                task.cancel()
            await asyncio.gather(watchdog, *tasks, return_exceptions=True)

    async def watch_the_clock(self, workers: Sequence[asyncio.Future[None]]) -> None:
        """--orbench-max-duration: past it, requests in flight are abandoned and the run ends."""
        while True:
            left = self.policy.time_left()
            if left is None:
                return
            if left <= 0:
                break
            await self.sleep(left)
            if self.stopping:
                return
        self.stop_run(self.policy.over_time() or "out of time")
        self.out_of_time = True
        for task in workers:
            task.cancel()
