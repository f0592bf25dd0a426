"""The adaptive concurrency limit: slow start, additive growth, multiplicative cuts, bounds."""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from orbench_pytest.fetch.concurrency import AdaptiveLimit, AdaptiveLimiter, AdaptiveSettings
from tests.helpers import FakeClock
from tests.timeouts import THREAD_TIMEOUT_S


def clean_round(limit: AdaptiveLimit, latency: float = 0.2) -> None:
    """A full round: the limit's worth of requests in flight at once, all answered."""
    n = max(limit.limit, limit.settings.min_round)
    for _ in range(n):
        limit.started()
    for _ in range(n):
        limit.ended()
        limit.success(latency)


def test_slow_start_doubles_each_clean_round_up_to_the_ceiling() -> None:
    limit = AdaptiveLimit(AdaptiveSettings(ceiling=50, start=4), FakeClock())
    seen = [limit.limit]
    for _ in range(6):
        clean_round(limit)
        seen.append(limit.limit)
    assert seen == [4, 8, 16, 32, 50, 50, 50]


def test_a_cut_halves_then_growth_is_additive() -> None:
    clock = FakeClock()
    limit = AdaptiveLimit(AdaptiveSettings(ceiling=100, start=32, cooldown_s=2.0), clock)
    limit.pushed_back()
    assert limit.limit == 16
    clock.now = 5.0
    clean_round(limit)
    assert limit.limit == 17  # + max(1, 10 %), no more doubling


def test_one_burst_of_push_backs_is_one_cut() -> None:
    clock = FakeClock()
    limit = AdaptiveLimit(AdaptiveSettings(ceiling=64, start=64, cooldown_s=2.0), clock)
    for _ in range(30):
        limit.pushed_back()
    assert (limit.limit, limit.cuts) == (32, 1)
    clock.now = 2.5  # the episode goes on after the cooldown: another cut
    limit.pushed_back()
    assert (limit.limit, limit.cuts) == (16, 2)


def test_successes_during_the_cooldown_do_not_grow_the_limit() -> None:
    clock = FakeClock()
    limit = AdaptiveLimit(AdaptiveSettings(ceiling=64, start=8, cooldown_s=2.0), clock)
    limit.pushed_back()
    for _ in range(10):
        clean_round(limit)
    assert limit.limit == 4


def test_a_trickle_below_the_limit_does_not_grow_it() -> None:
    limit = AdaptiveLimit(AdaptiveSettings(ceiling=64, start=16), FakeClock())
    for _ in range(100):  # one request at a time: never near 80 % of 16
        limit.started()
        limit.ended()
        limit.success(0.2)
    assert limit.limit == 16


def test_growth_stops_while_latency_climbs() -> None:
    limit = AdaptiveLimit(AdaptiveSettings(ceiling=128, start=8), FakeClock())
    clean_round(limit, latency=0.2)
    assert limit.limit == 16
    clean_round(limit, latency=0.5)  # 2.5 × the best round: the server queues, hold
    assert limit.limit == 16
    clean_round(limit, latency=0.21)
    assert limit.limit == 32


def test_jitter_of_a_fast_server_is_not_queueing() -> None:
    """A millisecond server's round means vary by several times: within the absolute
    tolerance, the latency still counts as held."""
    limit = AdaptiveLimit(AdaptiveSettings(ceiling=128, start=8), FakeClock())
    clean_round(limit, latency=0.001)
    clean_round(limit, latency=0.004)  # 4 × the best round, yet 3 ms more: still growing
    assert limit.limit == 32
    clean_round(limit, latency=0.2)  # 200 ms more: queueing
    assert limit.limit == 32


def test_fixed_settings_never_move() -> None:
    limit = AdaptiveLimit(AdaptiveSettings.fixed(4), FakeClock())
    clean_round(limit)
    limit.pushed_back()
    assert limit.limit == 4


@given(st.lists(st.sampled_from(["round", "slow", "cut", "wait"]), max_size=60),
       st.integers(1, 200), st.integers(1, 200))
def test_the_limit_stays_within_its_bounds(events: list[str], ceiling: int, start: int) -> None:
    clock = FakeClock()
    limit = AdaptiveLimit(AdaptiveSettings(ceiling=ceiling, start=start), clock)
    for event in events:
        if event == "round":
            clean_round(limit)
        elif event == "slow":
            clean_round(limit, latency=10.0)
        elif event == "cut":
            limit.pushed_back()
        else:
            clock.now += 3.0
        assert 1 <= limit.limit <= ceiling
        assert limit.in_flight == 0


def test_the_limiter_never_lets_more_than_the_limit_through() -> None:
    async def main() -> int:
        limiter = AdaptiveLimiter(AdaptiveLimit(AdaptiveSettings(ceiling=3, start=3),
                                                FakeClock()))
        peak = 0

        async def one() -> None:
            nonlocal peak
            await limiter.acquire()
            peak = max(peak, limiter.limit.in_flight)
            await asyncio.sleep(0.001)
            limiter.release(pushed_back=True)

        await asyncio.gather(*(one() for _ in range(20)))
        return peak

    assert asyncio.run(main()) == 3


def test_a_release_wakes_only_the_waiters_that_fit_in_order() -> None:
    async def main() -> tuple[list[int], int]:
        limiter = AdaptiveLimiter(AdaptiveLimit(AdaptiveSettings(ceiling=2, start=2),
                                                FakeClock()))
        await limiter.acquire()
        await limiter.acquire()
        order: list[int] = []

        async def waiter(n: int) -> None:
            await limiter.acquire()
            order.append(n)

        tasks = [asyncio.ensure_future(waiter(n)) for n in range(4)]
        await asyncio.sleep(0)
        limiter.release(latency_s=0.1)
        for _ in range(3):
            await asyncio.sleep(0)
        woken = list(order)
        for _ in range(5):  # the rest, one release each
            limiter.release(latency_s=0.1)
            await asyncio.sleep(0)
        await asyncio.gather(*tasks)
        return woken, len(order)

    woken, total = asyncio.run(main())
    assert woken == [0] and total == 4


def test_a_cancelled_waiter_hands_its_slot_on() -> None:
    async def main() -> tuple[int, bool]:
        limit = AdaptiveLimit(AdaptiveSettings.fixed(1), FakeClock())
        limiter = AdaptiveLimiter(limit)
        await limiter.acquire()
        first = asyncio.ensure_future(limiter.acquire())
        second = asyncio.ensure_future(limiter.acquire())
        await asyncio.sleep(0)
        limiter.release(latency_s=0.1)  # the slot goes to `first`...
        first.cancel()  # ...which is cancelled before it runs: `second` must get it
        await asyncio.gather(first, return_exceptions=True)
        await asyncio.wait_for(second, timeout=THREAD_TIMEOUT_S)
        return limit.in_flight, second.done()

    assert asyncio.run(main()) == (1, True)
