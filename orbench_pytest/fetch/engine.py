"""The fetch engine: plans, fetches, caches and hands on each (job, response); it never judges.

One event loop, one pooled client, every request through the run's RequestLayer
(requests.py: concurrency, rate window, retries, stop). Each answer is written to the
cache the moment it arrives (`CacheWriter`), so an interrupted run resumes; cached answers are
handed on first, in one batch. What becomes of a response is the `AnswerSink`'s business: the
pytest run's judging stage (judges/stage.py), or `orbench generate`'s collector of answers.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from orbench_pytest.core import defaults
from orbench_pytest.core.redact import redact
from orbench_pytest.core.types import History, Response, strip_reasoning
from orbench_pytest.core.untrusted import redacted_repr
from orbench_pytest.fetch.cache import CacheWriteError, ResponseCache
from orbench_pytest.fetch.concurrency import AdaptiveLimiter
from orbench_pytest.fetch.costs import BACKEND_CHECK, PROMPTS, Spending
from orbench_pytest.fetch.freshness import probe_key, stale_keys, within_age
from orbench_pytest.fetch.requests import RequestLayer
from orbench_pytest.fetch.retry import Clock, RetrySettings, Sleep, stall_bound
from orbench_pytest.fetch.targets import Target


@redacted_repr
@dataclass(frozen=True, slots=True)
class Job:
    """One answer to fetch: its cache key and what to send."""

    key: str
    prompt: str
    system_prompt: str | None
    history: History = ()  # the conversation before the prompt, sent with it


ESTIMATED_OUTPUT_TOKENS = 256  # an answer's tokens for the tpm limit, when max_tokens is unset
# Answers are committed at most this often: those arriving within it share one commit. A commit
# costs the CPU of a few dozen rows (20,000 instant answers: ~950 commits and 0.50 s of writing
# at one a loop turn, ~150 and 0.3 s at this), and a kill loses at most this much of answers.
ANSWERS_COMMIT_EVERY_S = 0.05


@dataclass(frozen=True)
class FetchSettings:
    """How the engine fetches: concurrency, rate limits, retries, the cache."""

    concurrency: int = defaults.CONCURRENCY  # adaptive: the ceiling; fixed: requests in flight
    adaptive: bool = True  # False: --orbench-fixed-concurrency, the embedded model's slots
    rpm: int | None = None
    tpm: int | None = None
    est_output_tokens: int = ESTIMATED_OUTPUT_TOKENS
    retry: RetrySettings = field(default_factory=RetrySettings)
    empty_is_refusal: bool = False  # --orbench-empty=refusal
    read_cache: bool = True
    cache_max_age_s: float | None = None  # older cached answers are asked again
    # Ask one cached answer again to see whether the provider's system_fingerprint changed.
    revalidate: bool = False

    @classmethod
    def of(cls, *, concurrency: int, rpm: int | None, tpm: int | None,
           max_tokens: int | None, max_retries: int, backoff_s: float,
           max_duration_s: float | None = None, empty_is_refusal: bool = False,
           read_cache: bool = True, cache_max_age_s: float | None = None,
           revalidate: bool = False, adaptive: bool = True,
           timeout_s: float | None = None) -> FetchSettings:
        """The engine's settings from a user's (the pytest run's or `orbench generate`'s): the
        one place that maps max_tokens to the token estimate and retries to the policy."""
        return cls(concurrency=concurrency, adaptive=adaptive, rpm=rpm, tpm=tpm,
                   est_output_tokens=max_tokens or ESTIMATED_OUTPUT_TOKENS,
                   retry=RetrySettings(max_retries=max_retries, backoff_base_s=backoff_s,
                                       max_duration_s=max_duration_s,
                                       stall_s=stall_bound(timeout_s)),
                   empty_is_refusal=empty_is_refusal, read_cache=read_cache,
                   cache_max_age_s=cache_max_age_s, revalidate=revalidate)


@dataclass
class FetchReport:
    """The fetch's report, no verdict in it (judges/verdicts.py has those): the requests'
    fields are the RequestLayer's (the LLM judge's requests included), the rest the
    engine's."""

    requests: int = 0
    retries: int = 0
    cache_hits: int = 0
    retry_reasons: dict[str, int] = field(default_factory=dict)  # e.g. {"HTTP 429": 12}
    stopped_reason: str | None = None
    config_error: str | None = None
    wall_s: float = 0.0
    expired: int = 0  # cached answers older than the max age, asked again
    stale: int = 0  # cached answers asked again because the system_fingerprint changed
    concurrency_peak: int = 0  # the highest concurrency limit reached
    concurrency_cuts: int = 0  # times a 429 / 5xx cut it
    # Requests by kind, with the tokens of the answers asked this run (the layer counts the
    # requests, the engine and the judge's channel the tokens)
    spent: Spending = field(default_factory=Spending)


Progress = Callable[[int, int, int, int], None]  # done, total, errors, concurrency limit now


def has_answer(response: Response) -> bool:
    """Whether a response says something a judge can read, or is a provider's block.

    Every "no answer" shape (null, whitespace, only reasoning, only a <think> block) fails
    this, so none is ever cached: the next run asks again.
    """
    if response.error is not None:
        return False
    return (response.content_filter or bool(response.refusal)
            or bool(strip_reasoning(response.text or "")))


def usable(cached: dict[str, Response]) -> dict[str, Response]:
    """Cached responses worth reusing: an empty one (stored by an older version) is asked
    again."""
    return {key: r for key, r in cached.items() if has_answer(r)}


def cached_answers(cache: ResponseCache | None, keys: Iterable[str], fetch: FetchSettings
                   ) -> tuple[dict[str, Response], int]:
    """The cached answers young enough to reuse, and how many were too old (empty answers
    stored by an older version are asked again, and not counted as expired)."""
    if cache is None or not fetch.read_cache:
        return {}, 0
    found = usable(cache.get_many(keys, usage=False))  # a run counts the tokens it asks
    young = within_age(found, fetch.cache_max_age_s, time.time())
    return young, len(found) - len(young)


def cached_answer(cache: ResponseCache | None, key: str, fetch: FetchSettings
                  ) -> Response | None:
    """One usable cached response within the max age (the LLM judge's replies)."""
    if cache is None or not fetch.read_cache:
        return None
    return within_age(usable(cache.get_many([key])), fetch.cache_max_age_s,
                      time.time()).get(key)


def request_layer(settings: FetchSettings, clock: Clock = time.monotonic,
                  sleep: Sleep | None = None) -> RequestLayer[FetchReport]:
    """A run's request layer, tallying into a report of its own."""
    return RequestLayer(FetchReport(), rpm=settings.rpm, tpm=settings.tpm,
                        retry=settings.retry, adaptive=settings.adaptive, clock=clock,
                        sleep=sleep)


class CacheWriter:
    """Answers written through to the cache.

    Answers are written at the end of the event-loop turn they arrive in, or, when the last
    write was less than `commit_every_s` ago, at the end of that interval: answers that arrive
    together share one commit (one commit per answer costs as much CPU as the request), and
    nothing awaits the network before the commit, so a kill loses no more than what was still
    in flight and the answers of the last interval. Empty answers are never stored: the next
    run asks again. A failed write stops the run (the answers in hand still reach the report):
    an answer must never be lost without a word.
    """

    def __init__(self, cache: ResponseCache | None, requests: RequestLayer[Any],
                 commit_every_s: float = ANSWERS_COMMIT_EVERY_S) -> None:
        self.cache = cache
        self.commit_every_s = commit_every_s
        self._requests = requests
        self._unsaved: list[tuple[str, Response]] = []
        self._scheduled: asyncio.Handle | None = None  # the flush to come
        self._last_write = -math.inf  # when answers were last written (the loop's clock)

    def store(self, key: str, response: Response) -> None:
        if self.cache is None or not has_answer(response):
            return
        self._flush_soon()
        self._unsaved.append((key, response))

    def _flush_soon(self) -> None:
        """A flush at the end of this loop turn, or of the interval since the last write."""
        loop = asyncio.get_running_loop()
        wait = self._last_write + self.commit_every_s - loop.time()
        if self._scheduled is not None:
            if wait > 0 or not isinstance(self._scheduled, asyncio.TimerHandle):
                return  # already planned, early enough
            self._scheduled.cancel()  # planned for later, needed now
        self._scheduled = (loop.call_later(wait, self.flush) if wait > 0
                           else loop.call_soon(self.flush))

    def flush(self, *, final: bool = False) -> None:
        """Write the answers in hand; `final`: the run's end, which waits for another
        process's lock on the cache."""
        if self._scheduled is not None:
            self._scheduled.cancel()  # a final flush before the planned one: nothing left
            self._scheduled = None
        if self.cache is None:
            return
        unsaved, self._unsaved = self._unsaved, []
        try:
            if unsaved or (final and self.cache.pending):  # not final: never blocks the
                # loop on another process's lock (the rows wait in the cache)
                self.cache.put_many(unsaved, wait=final)
                self._last_write = asyncio.get_running_loop().time()
        except CacheWriteError as exc:
            self._requests.tally.stopped_reason = redact(str(exc))
            self._requests.stop()


class AnswerSink(Protocol):
    """Where the engine hands each prompt's response."""

    def expect(self, total: int) -> None:
        """The number of distinct prompts of the run, before any response."""

    async def take_cached(self, pairs: list[tuple[Job, Response]]) -> None:
        """The cached responses, all at once, before any request."""

    async def take(self, job: Job, response: Response) -> None:
        """One response: fetched (already written to the cache), or an error for a prompt the
        run could not send."""

    async def aclose(self) -> None:
        """The run is over."""


class Unjudged:
    """The sink of a fetch that judges nothing (`orbench generate`): the answers stay in the
    cache; it keeps which prompts got none, and why, and shows progress."""

    def __init__(self, progress: Progress | None = None,
                 limit_now: Callable[[], int] = lambda: 0) -> None:
        self.errors: dict[str, str] = {}  # key -> why no answer ("not sent: …" included)
        self._progress = progress
        self._limit_now = limit_now
        self._done = 0
        self._total = 0

    def expect(self, total: int) -> None:
        self._total = total

    async def take_cached(self, pairs: list[tuple[Job, Response]]) -> None:
        for job, response in pairs:
            await self.take(job, response)

    async def take(self, job: Job, response: Response) -> None:
        if response.error is not None:
            self.errors[job.key] = response.error
        self._done += 1
        if self._progress is not None:
            self._progress(self._done, self._total, len(self.errors), self._limit_now())

    async def aclose(self) -> None:
        pass


class FetchEngine:
    """Plans (one request per distinct key, the cached ones aside, a revalidation), fetches
    through the request layer and caches; hands every response to its sink."""

    def __init__(self, target: Target, cache: ResponseCache | None, settings: FetchSettings,
                 requests: RequestLayer[FetchReport], writer: CacheWriter) -> None:
        self.target = target
        self.cache = cache
        self.settings = settings
        self.requests = requests
        self.writer = writer
        self.report = requests.tally
        # Target requests only: the judge's endpoint is another server with its own bound.
        self.concurrency = requests.limit(settings.concurrency)
        self._slots = AdaptiveLimiter(self.concurrency)
        self._delivered: set[str] = set()  # keys whose response the sink has taken

    @classmethod
    def build(cls, target: Target, cache: ResponseCache | None, settings: FetchSettings,
              requests: RequestLayer[FetchReport]) -> FetchEngine:
        """An engine with a cache writer of its own."""
        return cls(target, cache, settings, requests, CacheWriter(cache, requests))

    async def run(self, jobs: Iterable[Job], sink: AnswerSink,
                  cached: dict[str, Response] | None = None) -> FetchReport:
        """`cached`: the caller's own lookup of these keys, so the cache is not read twice."""
        started = time.perf_counter()
        unique = {job.key: job for job in jobs}  # one request per distinct key
        sink.expect(len(unique))
        self.requests.start()
        if cached is None:
            cached, _ = cached_answers(self.cache, unique, self.settings)
        if self.settings.revalidate:
            cached = await self._revalidate(unique, cached, sink)
        todo: list[Job] = []
        settled: list[tuple[Job, Response]] = []
        for key, job in unique.items():
            if key in self._delivered:  # the revalidation's fresh answer
                continue
            if key in cached:
                self.report.cache_hits += 1
                settled.append((job, cached[key]))
            else:
                todo.append(job)
        try:
            await sink.take_cached(settled)
            if todo:
                await self._fetch_all(todo, sink)
        except BaseException:
            self.requests.stop()  # Ctrl-C or a crash: nothing more is sent, a judge's requests
            raise  # included (the sink finishing below gets errors for them, never verdicts)
        finally:
            # Ctrl-C, -x or a crash: what was answered stays answered. The answers in hand are
            # written now, before the sink finishes what it held back.
            self.writer.flush()
            try:
                await self.target.aclose()
                await sink.aclose()
            finally:
                self.writer.flush(final=True)
            self.report.wall_s = time.perf_counter() - started
            self.report.concurrency_peak = self.concurrency.peak
            self.report.concurrency_cuts = self.concurrency.cuts
        return self.report

    async def _deliver(self, sink: AnswerSink, job: Job, response: Response,
                       kind: str = PROMPTS) -> None:
        await sink.take(job, response)
        self._delivered.add(job.key)
        if not response.cached and response.error is None:  # an answer asked this run
            self.report.spent.of(kind).tokens.add(
                response.usage, (job.system_prompt or "") + job.prompt
                + "".join(content for _, content in job.history), response.text or "")

    async def _revalidate(self, unique: dict[str, Job], cached: dict[str, Response],
                          sink: AnswerSink) -> dict[str, Response]:
        """Ask one cached prompt again; drop the cached answers its system_fingerprint makes
        stale (freshness.stale_keys). An attempt that fails changes nothing."""
        key = probe_key(cached)
        if key is None:
            return cached
        response = await self._ask(unique[key], BACKEND_CHECK)
        if response is None or response.error is not None:
            return cached
        self.writer.store(key, response)
        await self._deliver(sink, unique[key], response, BACKEND_CHECK)
        stale = stale_keys(cached, response.system_fingerprint) - {key}
        self.report.stale = len(stale)
        return {k: r for k, r in cached.items() if k != key and k not in stale}

    async def _fetch_all(self, todo: list[Job], sink: AnswerSink) -> None:
        queue = iter(todo)
        requests = self.requests

        async def worker() -> None:
            # Workers share one iterator, one per slot the ceiling allows; each attempt then
            # waits for a slot of the adaptive limit (RequestLayer._send_once).
            for job in queue:
                if requests.stopping:
                    return
                response = await self._ask(job)
                if response is None:  # stopped while this one waited
                    return
                self.writer.store(job.key, response)
                await self._deliver(sink, job, response)

        workers = [asyncio.ensure_future(worker())
                   for _ in range(min(self.settings.concurrency, len(todo)))]
        await requests.within_time(workers)
        # Whatever was never asked is an error of this run, never an answer.
        for job in todo:
            if job.key not in self._delivered:
                reason = requests.why_stopped("not sent")
                await self._deliver(sink, job, Response(text=None, error=f"not sent: {reason}"))

    async def _ask(self, job: Job, kind: str = PROMPTS) -> Response | None:
        return await self.requests.attempts(
            lambda: self.target.complete(job.system_prompt, job.prompt, job.history),
            (len(job.prompt) + sum(len(content) for _, content in job.history)) // 4
            + self.settings.est_output_tokens, gated=True,
            slots=self._slots, kind=kind)


def run_in_new_loop(phase: Callable[[], Awaitable[object]]) -> None:
    """The one sync → async bridge; never called from inside a running loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError("orbench: the fetch phase cannot run inside a running event loop")

    async def main() -> None:
        # Returns nothing: when asyncio.run restores Ctrl-C's handler it writes out the main
        # task, its result in full (the report of 80K answers: 0.4 s and 44 MB of text).
        await phase()

    asyncio.run(main())
