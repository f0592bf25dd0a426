"""The fetch engine against the real local server: concurrency, pooling, rate limits, cache modes,
and stopping early (cancel, -x) without losing what was answered."""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from orbench_pytest.core.types import Label, Response, Verdict
from orbench_pytest.fetch.cache import ResponseCache
from orbench_pytest.fetch.engine import FetchSettings, Job
from orbench_pytest.fetch.rate_window import RateLimiter
from orbench_pytest.fetch.retry import Clock, Sleep
from orbench_pytest.fetch.targets import GenerationParams, OpenAICompatibleTarget
from orbench_pytest.judges.judge import OfflineJudge
from orbench_pytest.judges.verdicts import Verdicts
from orbench_pytest.run.judged_fetch import JudgedFetch, fetch_and_judge
from tests.helpers import (
    LENIENT,
    FakeClock,
    answers_stored,
    jobs,
    questions,
    run_orbench,
    write_suite,
)
from tests.openai_server import (
    REFUSAL_TEXT,
    FirstWave,
    HoldAfter,
    OpenAIServer,
    Reply,
    refuse_when,
)
from tests.timeouts import THREAD_TIMEOUT_S


def engine(server: OpenAIServer, cache: ResponseCache | None = None, *,
           clock: Clock = time.monotonic, sleep: Sleep | None = None,
           **settings: object) -> JudgedFetch:
    concurrency = int(settings.get("concurrency", 16))  # type: ignore[call-overload]
    target = OpenAICompatibleTarget(server.url, "m", None, GenerationParams(), concurrency)
    return JudgedFetch(target, OfflineJudge(), cache,
                       FetchSettings(**settings),  # type: ignore[arg-type]
                       clock=clock, sleep=sleep)


@pytest.mark.parametrize("concurrency", [1, 4, 9])
def test_concurrency_bound_is_reached_and_never_exceeded(concurrency: int) -> None:
    # Pinned (the adaptive limit's moves: test_adaptive_fetch.py); after the probe, answers
    # are held until the bound is reached, which a busy machine's slow sends cannot then miss.
    wave = FirstWave(concurrency, probe=True, latency_s=0.03)
    with wave as server:
        report = fetch_and_judge(engine(server, concurrency=concurrency, adaptive=False),
                                 jobs(4 * concurrency + 3))
        assert wave.held == server.max_in_flight == concurrency
        assert server.requests == 4 * concurrency + 3 == len(report.answers)
        # One pooled client sized to the bound: connections are reused, never churned.
        assert server.connections <= concurrency


def test_the_option_sets_the_bound_of_a_pytest_run(pytester, plugin_args) -> None:
    write_suite(pytester, questions(20), thresholds=LENIENT)
    wave = FirstWave(3, probe=True, latency_s=0.03)
    with wave as server:
        result = run_orbench(pytester, plugin_args, "--orbench-concurrency=3", url=server.url,
                             cache="c.sqlite3")
        assert wave.held == server.max_in_flight == 3 and server.connections <= 3
    result.assert_outcomes(passed=20)


def test_each_distinct_prompt_is_asked_once(openai_server: OpenAIServer) -> None:
    doubled = jobs(5) + jobs(5)  # the same key twice (e.g. a suite listing a prompt twice)
    report = fetch_and_judge(engine(openai_server), doubled)
    assert openai_server.requests == 5 and len(report.answers) == 5


def test_the_phase_never_writes_out_its_report(openai_server: OpenAIServer) -> None:
    """asyncio.run, restoring Ctrl-C's handler at its end, writes out its main task, result and
    all (for 80K answers 0.4 s and 44 MB of text): the phase's task returns nothing."""
    written: list[str] = []

    class Loud(Verdicts):
        def __repr__(self) -> str:
            written.append("repr")
            return "Loud(...)"

    class Phase(JudgedFetch):
        async def run(self, jobs: Iterable[Job],
                      cached: dict[str, Response] | None = None) -> Verdicts:
            self.verdicts = Loud(answers=(await super().run(jobs, cached)).answers)
            return self.verdicts

    fetch = engine(openai_server)
    fetch.__class__ = Phase
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal
    try:
        verdicts = fetch_and_judge(fetch, jobs(3))
    finally:
        signal.signal(signal.SIGINT, previous)
    assert isinstance(verdicts, Loud) and len(verdicts.answers) == 3
    assert written == []


async def until(condition: Callable[[], bool], timeout: float = THREAD_TIMEOUT_S) -> None:
    """Wait for something the code under test will do (never to show that it did not)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.005)


def test_rpm_limit_holds_back_the_request_after_the_limit(tmp_path: Path) -> None:
    async def scenario(server: OpenAIServer, cache: ResponseCache) -> None:
        fake = FakeClock(1000.0, advance=False)
        limited = engine(server, cache, rpm=5, clock=fake, sleep=fake.asleep)
        task = asyncio.ensure_future(limited.run(jobs(8)))
        assert fake.parked is not None
        await asyncio.wait_for(fake.parked.wait(), timeout=THREAD_TIMEOUT_S)
        await until(lambda: len(limited.verdicts.answers) == 5)
        # The sixth request waits for the window: the full minute, since no time has passed.
        assert server.requests == 5 and fake.slept == [60.0]
        # Cancelling (what Ctrl-C does) ends the waiting requests and keeps the answers.
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    cache = ResponseCache(tmp_path / "c.sqlite3")
    with OpenAIServer() as server:
        asyncio.run(scenario(server, cache))
    assert answers_stored(cache) == 5


def test_tpm_limit_counts_prompt_and_expected_output_tokens() -> None:
    async def scenario(server: OpenAIServer) -> None:
        fake = FakeClock(1000.0, advance=False)
        # Each request is estimated at len(prompt) // 4 + 100 tokens: two fit in 250.
        limited = engine(server, tpm=250, est_output_tokens=100, clock=fake,
                         sleep=fake.asleep)
        task = asyncio.ensure_future(limited.run(jobs(4)))
        assert fake.parked is not None
        await asyncio.wait_for(fake.parked.wait(), timeout=THREAD_TIMEOUT_S)
        await until(lambda: len(limited.verdicts.answers) == 2)
        assert server.requests == 2 and len(fake.slept) == 1
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    with OpenAIServer() as server:
        asyncio.run(scenario(server))


def test_rate_limiter_window_frees_slots_after_sixty_seconds() -> None:
    fake = FakeClock(1000.0)

    async def scenario() -> None:
        limiter = RateLimiter(rpm=2, tpm=None, clock=fake, sleep=fake.asleep)

        async def request() -> None:  # answered at once
            ticket = await limiter.acquire(1)
            assert ticket is not None
            limiter.release(ticket)

        await request()
        fake.now += 10
        await request()
        await request()  # must wait until the first one's answer is 60 s old

    asyncio.run(scenario())
    assert fake.slept and sum(fake.slept) == pytest.approx(50.0)


def test_cache_hits_are_not_asked_and_misses_are(tmp_path: Path,
                                                 openai_server: OpenAIServer) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite3")
    phase = engine(openai_server, cache)
    first = fetch_and_judge(phase, jobs(6))
    assert openai_server.requests == 6 and phase.report.cache_hits == 0
    assert answers_stored(cache) == 6
    phase = engine(openai_server, cache)
    second = fetch_and_judge(phase, jobs(6) + jobs(2, "new"))
    assert openai_server.requests == 8  # only the two new prompts
    assert phase.report.cache_hits == 6
    assert sum(a.cached for a in second.answers.values()) == 6
    assert [a.verdict for a in second.answers.values()][:6] == \
        [a.verdict for a in first.answers.values()]


# --- cache modes through pytest -------------------------------------------------------------
PROMPTS = [f"question {i}: how do I bake bread?" for i in range(5)]


def cached_texts(pytester: pytest.Pytester) -> list[str | None]:
    path = pytester.path / "c.sqlite3"
    if not path.exists():
        return []
    cache = ResponseCache(path)
    try:
        return sorted(r.text or "" for r in cache.get_many(_all_keys(cache)).values())
    finally:
        cache.close()


def _all_keys(cache: ResponseCache) -> list[str]:
    return [key for (key,) in cache._db.execute("SELECT key FROM responses")]


class Switchable:
    """A server script that answers, or refuses every prompt once switched."""

    def __init__(self) -> None:
        self.refuse = False

    def __call__(self, prompt: str, system: str | None, body: dict) -> Reply:
        return Reply(text=REFUSAL_TEXT if self.refuse else "Sure: flour, water, salt, yeast.")


def test_cache_on_writes_then_answers_from_the_cache(pytester, plugin_args) -> None:
    write_suite(pytester, questions(5), thresholds=LENIENT)
    script = Switchable()
    with OpenAIServer(script) as server:
        run_orbench(pytester, plugin_args,
                    url=server.url, cache="c.sqlite3").assert_outcomes(passed=5)
        script.refuse = True  # a rerun must not see this: it is answered from the cache
        result = run_orbench(pytester, plugin_args, "--orbench-cache=on", url=server.url,
                             cache="c.sqlite3")
        assert server.requests == 5
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(["answers: 5 (5 from cache), requests: 0*"])


def test_cache_refresh_asks_again_and_overwrites(pytester, plugin_args) -> None:
    write_suite(pytester, questions(5), thresholds=LENIENT)
    script = Switchable()
    with OpenAIServer(script) as server:
        run_orbench(pytester, plugin_args,
                    url=server.url, cache="c.sqlite3").assert_outcomes(passed=5)
        script.refuse = True
        refreshed = run_orbench(pytester, plugin_args, "--orbench-cache=refresh", url=server.url,
                                cache="c.sqlite3")
        assert server.requests == 10
        again = run_orbench(pytester, plugin_args,
                            url=server.url, cache="c.sqlite3")  # now from the refreshed cache
        assert server.requests == 10
    refreshed.assert_outcomes(failed=5)
    again.assert_outcomes(failed=5)
    assert cached_texts(pytester) == [REFUSAL_TEXT] * 5


def test_cache_read_uses_the_cache_but_never_writes(pytester, plugin_args) -> None:
    write_suite(pytester, questions(5), thresholds=LENIENT)
    with OpenAIServer(refuse_when(lambda p: False)) as server:
        run_orbench(pytester, plugin_args, "--orbench-cache=read",
                    url=server.url, cache="c.sqlite3").assert_outcomes(passed=5)
        assert server.requests == 5 and cached_texts(pytester) == []
        run_orbench(pytester, plugin_args,
                    url=server.url, cache="c.sqlite3").assert_outcomes(passed=5)  # fills the cache
        assert server.requests == 10
        run_orbench(pytester, plugin_args, "--orbench-cache=read",
                    url=server.url, cache="c.sqlite3").assert_outcomes(passed=5)
        assert server.requests == 10


def test_cache_off_neither_reads_nor_writes(pytester, plugin_args) -> None:
    write_suite(pytester, questions(5), thresholds=LENIENT)
    with OpenAIServer() as server:
        run_orbench(pytester, plugin_args,
                    url=server.url, cache="c.sqlite3").assert_outcomes(passed=5)
        before = cached_texts(pytester)
        run_orbench(pytester, plugin_args, "--orbench-cache=off",
                    url=server.url, cache="c.sqlite3").assert_outcomes(passed=5)
        run_orbench(pytester, plugin_args, "--orbench-cache=off",
                    url=server.url, cache="c.sqlite3").assert_outcomes(passed=5)
        assert server.requests == 15
    assert cached_texts(pytester) == before


def test_strict_maxfail_stops_asking_and_keeps_what_was_answered(pytester,
                                                                 plugin_args) -> None:
    write_suite(pytester, questions(40), thresholds=LENIENT)
    with OpenAIServer(refuse_when(lambda p: True), latency_s=0.02) as server:
        result = run_orbench(pytester, plugin_args, "--orbench-strict", "--maxfail=3",
                             "--orbench-concurrency=2", url=server.url, cache="c.sqlite3")
        asked = server.requests
    assert 3 <= asked <= 3 + 2  # the limit, plus what was already in flight
    result.assert_outcomes(failed=3)
    answered = len(cached_texts(pytester))
    assert 3 <= answered <= asked


# --- the offline judge's batches (judges/stage.py) ---------------------------------------------
def test_strict_x_stops_asking_at_the_first_mismatch(pytester, plugin_args) -> None:
    """A stop rule judges each answer as it arrives: a batch's wait would let the run ask on."""
    write_suite(pytester, questions(40), thresholds=LENIENT)
    with OpenAIServer(refuse_when(lambda p: True), latency_s=0.02) as server:
        result = run_orbench(pytester, plugin_args, "--orbench-strict", "-x",
                             "--orbench-concurrency=2", url=server.url, cache="c.sqlite3")
        asked = server.requests
    assert 1 <= asked <= 1 + 2  # the first answer, plus what was already in flight
    result.assert_outcomes(failed=1)
    assert 1 <= len(cached_texts(pytester)) <= asked


class FailsOn:
    """An in-process judge that fails on one prompt and finds every other answer compliant."""

    name = "fails-on"
    version = "1"

    def __init__(self, prompt: str) -> None:
        self.prompt = prompt

    async def judge(self, prompt: str, answer: str) -> Verdict:
        if prompt == self.prompt:
            raise RuntimeError("judge broke")
        return Verdict(Label.COMPLIANCE, "answered", self.name)


def test_a_judge_failing_on_one_answer_gives_it_an_error_and_the_others_their_verdicts(
        openai_server: OpenAIServer) -> None:
    todo = jobs(40)
    target = OpenAICompatibleTarget(openai_server.url, "m", None, GenerationParams(), 16)
    report = fetch_and_judge(JudgedFetch(target, FailsOn(todo[17].prompt), None,
                                         FetchSettings(concurrency=16)), todo)
    verdicts = {key: answer.verdict for key, answer in report.answers.items()}
    failed = verdicts.pop(todo[17].key)
    assert (failed.label, failed.reason) == (Label.ERROR, "judge failed: RuntimeError: judge broke")
    assert len(verdicts) == 39 and {v.label for v in verdicts.values()} == {Label.COMPLIANCE}
    assert report.judged == 40


def test_progress_advances_while_the_fetch_runs_and_reaches_the_total() -> None:
    seen: list[tuple[int, int, int]] = []  # done, total, requests the server had by then
    with OpenAIServer(latency_s=0.03) as server:
        def progress(done: int, total: int, errors: int, limit: int) -> None:
            seen.append((done, total, server.requests))

        target = OpenAICompatibleTarget(server.url, "m", None, GenerationParams(), 2)
        fetch_and_judge(JudgedFetch(target, OfflineJudge(), None, FetchSettings(concurrency=2),
                                    progress), jobs(40))
    assert [done for done, _, _ in seen] == list(range(1, 41))
    assert {total for _, total, _ in seen} == {40}
    # 40 answers two at a time take 0.6 s; a batch waits at most 0.1 s for its verdicts
    assert seen[0][2] <= 20


def test_a_cancelled_run_judges_every_answer_it_fetched() -> None:
    """Ctrl-C: the answers still waiting for their batch are judged as the run ends."""
    todo = jobs(12)

    def script(prompt: str, system: str | None, body: dict) -> Reply:
        hangs = int(prompt.split()[1].rstrip(":")) >= 5
        return Reply(text="Sure: flour and water.", fault="hang" if hangs else None)

    with OpenAIServer(script) as server:
        target = OpenAICompatibleTarget(server.url, "m", None, GenerationParams(), 1)
        fetch = JudgedFetch(target, OfflineJudge(), None, FetchSettings(concurrency=1))

        async def interrupted() -> None:
            run = asyncio.ensure_future(fetch.run(todo))
            while server.requests < 6:  # five answered, the sixth hangs
                await asyncio.sleep(0.002)
            run.cancel()
            with pytest.raises(asyncio.CancelledError):
                await run

        asyncio.run(interrupted())
    assert sorted(fetch.verdicts.answers) == sorted(job.key for job in todo[:5])
    assert {a.verdict.label for a in fetch.verdicts.answers.values()} == {Label.COMPLIANCE}


def test_a_cancelled_run_abandons_the_llm_verdicts_still_out() -> None:
    """Ctrl-C with judge requests in flight: the run ends without waiting for them, and every
    answer fetched is recorded, as an error (never a verdict the judge did not give)."""
    from orbench_pytest.fetch.engine import request_layer
    from orbench_pytest.judges.channel import JudgeChannel
    from orbench_pytest.judges.judge import build_judge

    todo, released = jobs(6), threading.Event()
    verdict = Reply(text='{"verdict": "direct_answer", "reason": "held"}', hold=released)
    with OpenAIServer(HoldAfter(3)) as server, \
            OpenAIServer(lambda p, s, b: verdict) as judge_model:
        settings = FetchSettings(concurrency=1, adaptive=False)
        requests = request_layer(settings)
        channel = JudgeChannel(OpenAICompatibleTarget(judge_model.url, "judge-m", None,
                                                      GenerationParams(0.0, 200), 4),
                               requests, 4, None, settings)
        target = OpenAICompatibleTarget(server.url, "m", None, GenerationParams(), 1)
        fetch = JudgedFetch(target, build_judge("llm", channel.chat, "judge-m"), None,
                            settings, judge_channel=channel, requests=requests)

        async def interrupted() -> None:
            run = asyncio.ensure_future(fetch.run(todo))
            # three answered and out to the judge (held), the fourth target request hangs
            await until(lambda: judge_model.in_flight == 3 and server.requests == 4)
            run.cancel()
            with pytest.raises(asyncio.CancelledError):
                await run

        try:
            asyncio.run(interrupted())
        finally:
            released.set()
    assert sorted(fetch.verdicts.answers) == sorted(job.key for job in todo[:3])
    assert {(a.verdict.label, a.verdict.reason) for a in fetch.verdicts.answers.values()} == \
        {(Label.ERROR, "judge abandoned: the run stopped")}


# --- progress ---------------------------------------------------------------------------------
def test_progress_in_a_log_is_a_few_whole_lines() -> None:
    from orbench_pytest.fetch.progress import ProgressLine

    clock = FakeClock()
    written: list[tuple[str, bool]] = []
    progress = ProgressLine(lambda text, rewrite: written.append((text, rewrite)), False,
                            clock=clock)
    for done in range(1, 10_001):
        clock.now += 0.0005  # 5 s in all: no line is due to time alone
        progress(done, 10_000, 0)
    assert 10 <= len(written) <= 12  # one per tenth, the last one included
    assert not any(rewrite or "\r" in text for text, rewrite in written)
    assert written[-1][0].startswith("orbench: 10000/10000 prompts answered")


def test_progress_on_a_terminal_rewrites_one_line_at_most_ten_times_a_second() -> None:
    from orbench_pytest.fetch.progress import ProgressLine

    clock = FakeClock(100.0)
    written: list[tuple[str, bool]] = []
    progress = ProgressLine(lambda text, rewrite: written.append((text, rewrite)), True,
                            clock=clock)
    for done in range(1, 1001):
        clock.now += 0.002  # 2 s in all
        progress(done, 1000, 3)
    assert all(rewrite for _, rewrite in written)
    assert 15 <= len(written) <= 22
    assert written[-1][0].startswith("orbench: 1000/1000 prompts answered") and \
        "3 errors" in written[-1][0]


def test_progress_shows_an_eta_once_it_can() -> None:
    """No estimate in the first seconds; then the time left at the recent rate (the cache's
    quick answers at the start age out of the window)."""
    from orbench_pytest.fetch.progress import ProgressLine, format_duration

    clock = FakeClock(1000.0)
    written: list[str] = []
    progress = ProgressLine(lambda text, rewrite: written.append(text), False, log_every_s=0,
                            clock=clock)
    progress(400, 1000, 0)  # 400 answers from the cache at once
    assert "ETA" not in written[-1]
    for done in range(401, 701):  # then one a second, asked
        clock.now += 1.0
        progress(done, 1000, 0)
    # 300 left at the last 30 s's rate of one a second: five minutes
    assert written[-1].endswith(", ETA 5m00s"), written[-1]
    clock.now += 1.0
    progress(1000, 1000, 0)
    assert "ETA" not in written[-1]  # done
    assert [format_duration(s) for s in (42, 185, 3720)] == ["42s", "3m05s", "1h02m"]


def test_whole_answers_are_kept_each_bounded_and_up_to_the_runs_total() -> None:
    """Each answer's first ANSWER_CHARS characters, while the run's total allows; then the
    excerpt alone (the results file's `answer` is empty, its `response` kept)."""
    from orbench_pytest.core import defaults

    long = "word " * (defaults.ANSWER_CHARS // 4)  # past the per-answer bound

    class Bounded(JudgedFetch):
        answers_total_chars = defaults.ANSWER_CHARS + 10

    with OpenAIServer(lambda prompt, system, body: Reply(text=long)) as server:
        target = OpenAICompatibleTarget(server.url, "m", None, GenerationParams(), 1)
        report = fetch_and_judge(Bounded(target, OfflineJudge(), None,
                                         FetchSettings(concurrency=1)), jobs(3))
    kept = [a.text for a in report.answers.values()]
    assert sorted(kept, key=len) == ["", "", long[:defaults.ANSWER_CHARS]]
    assert all(a.excerpt == long[:300] for a in report.answers.values())
