"""--orbench-rpm and --orbench-tpm: requests and (estimated) tokens per sliding minute.

A request stays in the window from the moment it is sent until 60 s after its answer came
back. Counting from the send alone is not enough: the endpoint counts a request when it
arrives, which can be any time before the answer (a connection still being opened, a busy
loop, a proxy), so a burst sent at 0 s that lands late shares the endpoint's minute with
requests sent at 60 s. Holding each request until 60 s past its answer keeps every
60-second window, as the endpoint sees it, within the limits. Every attempt counts,
retries included.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from orbench_pytest.fetch.retry import Clock, Sleep

WINDOW_S = 60.0


@dataclass(slots=True)
class Ticket:
    """One request's place in the window; given back with `RateLimiter.release`."""

    tokens: int
    released: bool = False


class RateLimiter:
    def __init__(self, rpm: int | None, tpm: int | None, clock: Clock = time.monotonic,
                 sleep: Sleep = asyncio.sleep) -> None:
        self.rpm = rpm
        self.tpm = tpm
        self._clock = clock
        self._sleep = sleep
        self._answered: deque[tuple[float, int]] = deque()  # (answer time, tokens), in order
        self._answered_tokens = 0
        self._open = 0  # requests sent and not answered yet
        self._open_tokens = 0
        self._lock = asyncio.Lock()
        self._released = asyncio.Event()

    @property
    def limited(self) -> bool:
        return self.rpm is not None or self.tpm is not None

    async def acquire(self, tokens: int,
                      given_up: Callable[[], bool] = lambda: False) -> Ticket | None:
        """Wait until one more request of `tokens` fits the window, then count it as sent;
        None when `given_up()` turns true meanwhile (the run stopped)."""
        ticket = Ticket(tokens)
        if not self.limited:
            return ticket
        async with self._lock:  # one waiter at a time: requests leave in arrival order
            while not self._fits(tokens):
                if self._answered:  # the oldest answer leaves the window first
                    await self._sleep(max(0.01, self._answered[0][0] + WINDOW_S - self._clock()))
                else:  # all in flight: nothing leaves before an answer comes back
                    self._released.clear()
                    await self._released.wait()
                if given_up():
                    return None
            self._open += 1
            self._open_tokens += tokens
        return ticket

    def release(self, ticket: Ticket) -> None:
        """The request's answer (or failure) is back: it leaves the window in 60 s."""
        if ticket.released or not self.limited:
            return
        ticket.released = True
        self._open -= 1
        self._open_tokens -= ticket.tokens
        self._answered.append((self._clock(), ticket.tokens))
        self._answered_tokens += ticket.tokens
        self._released.set()

    def _fits(self, tokens: int) -> bool:
        now = self._clock()
        while self._answered and now - self._answered[0][0] >= WINDOW_S:
            self._answered_tokens -= self._answered.popleft()[1]
        count = self._open + len(self._answered)
        used = self._open_tokens + self._answered_tokens
        rpm_ok = self.rpm is None or count < self.rpm
        # A request estimated above the whole tpm goes alone, else it could never go.
        tpm_ok = self.tpm is None or used + tokens <= self.tpm or count == 0
        return rpm_ok and tpm_ok
