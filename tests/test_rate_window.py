"""--orbench-rpm / --orbench-tpm: no 60-second window, as the endpoint sees it, ever holds more
than the limits, whatever the arrival pattern, delivery delays and answer times."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from orbench_pytest.fetch.rate_window import WINDOW_S, RateLimiter
from tests.helpers import VirtualTime


@dataclass(frozen=True)
class Request:
    start_after: float  # since the previous request was queued
    delivery: float  # fraction of its time out before the endpoint counts it
    duration: float  # seconds until the answer is back
    tokens: int


def most_in_any_window(events: list[tuple[float, int]]) -> tuple[int, int]:
    """The most requests and tokens whose arrival times fall in one [t, t + 60) window."""
    events = sorted(events)
    most_requests = most_tokens = 0
    for i, (start, _) in enumerate(events):
        inside = [tokens for when, tokens in events[i:] if when < start + WINDOW_S]
        most_requests = max(most_requests, len(inside))
        most_tokens = max(most_tokens, sum(inside))
    return most_requests, most_tokens


requests = st.lists(st.builds(
    Request,
    start_after=st.sampled_from([0.0, 0.0, 0.5, 3.0, 20.0, 59.9, 60.0, 61.0]),
    delivery=st.sampled_from([0.0, 0.5, 1.0]),
    duration=st.sampled_from([0.0, 0.1, 2.0, 30.0, 75.0]),
    tokens=st.integers(1, 40)), min_size=1, max_size=40)


@settings(max_examples=150, deadline=None)
@given(requests, st.integers(1, 8), st.one_of(st.none(), st.integers(40, 120)),
       st.integers(1, 12))
def test_no_window_ever_holds_more_than_the_limits(plan: list[Request], rpm: int,
                                                   tpm: int | None, workers: int) -> None:
    time = VirtualTime()
    limiter = RateLimiter(rpm, tpm, time.clock, time.sleep)
    arrivals: list[tuple[float, int]] = []
    queue = iter(plan)

    async def worker() -> None:
        for request in queue:  # workers share the plan, like the engine's
            await time.sleep(request.start_after)
            ticket = await limiter.acquire(request.tokens)
            assert ticket is not None
            await time.sleep(request.delivery * request.duration)
            arrivals.append((time.now, request.tokens))  # the endpoint counts it now
            await time.sleep((1 - request.delivery) * request.duration)
            limiter.release(ticket)

    async def main() -> None:
        await asyncio.gather(*(worker() for _ in range(workers)))

    asyncio.run(time.run(main()))
    assert len(arrivals) == len(plan)  # every request went, none was lost waiting
    most_requests, most_tokens = most_in_any_window(arrivals)
    assert most_requests <= rpm
    if tpm is not None:
        assert most_tokens <= tpm


def test_a_burst_that_lands_late_does_not_share_its_minute_with_the_next() -> None:
    """The reported break: rpm 30, 35 requests in one endpoint minute. A burst sent at 0 s that
    reaches the endpoint at 5 s (connections still opening) and requests sent at 60 s: counted
    from the send, both fit; held until 60 s past the answer, the second group waits."""
    time = VirtualTime()
    limiter = RateLimiter(30, None, time.clock, time.sleep)
    arrivals: list[float] = []

    async def request(send_at: float, on_the_way: float) -> None:
        await time.sleep(send_at)
        ticket = await limiter.acquire(1)
        assert ticket is not None
        await time.sleep(on_the_way)
        arrivals.append(time.now)
        await time.sleep(0.2)
        limiter.release(ticket)

    async def main() -> None:
        await asyncio.gather(*[request(0.0, 5.0) for _ in range(30)],  # new connections
                             *[request(60.0, 0.1) for _ in range(5)])  # kept-alive ones

    asyncio.run(time.run(main()))
    assert len(arrivals) == 35
    assert most_in_any_window([(t, 1) for t in arrivals])[0] == 30  # counted from the send: 35
    assert min(arrivals[30:]) >= 5.2 + WINDOW_S


def test_a_retry_is_one_more_request_in_the_window() -> None:
    time = VirtualTime()
    limiter = RateLimiter(2, None, time.clock, time.sleep)

    async def main() -> None:
        for _ in range(2):  # an attempt and its retry
            ticket = await limiter.acquire(1)
            assert ticket is not None
            limiter.release(ticket)
        ticket = await limiter.acquire(1)  # the next prompt waits out the window
        assert ticket is not None and time.now == WINDOW_S

    asyncio.run(time.run(main()))


def test_a_stopped_run_gives_up_waiting() -> None:
    time = VirtualTime()
    limiter = RateLimiter(1, None, time.clock, time.sleep)
    stopped = False

    async def main() -> None:
        nonlocal stopped
        first = await limiter.acquire(1)
        assert first is not None
        limiter.release(first)
        waiting = asyncio.ensure_future(limiter.acquire(1, lambda: stopped))
        await asyncio.sleep(0)
        stopped = True
        assert await waiting is None

    asyncio.run(time.run(main()))
