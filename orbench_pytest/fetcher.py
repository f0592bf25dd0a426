"""The fetch-and-judge phase: every selected prompt sent concurrently, judged, cached.

One event loop, one pooled client, an adaptive concurrency limit (concurrency.py: grows while
answers come back fast and clean, cut on 429 / 5xx, never above --orbench-concurrency),
optional rpm/tpm limits (rate_window.py), and a RetryPolicy (retry.py) that decides backoff,
giving up and stopping the run. Each answer is written to the cache the moment it arrives, so
an interrupted run resumes. The keyword judge's verdicts are written many to a write and read
back in one batch for cached answers, so a re-run over cached answers judges nothing again.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from .cache import CacheWriteError, ResponseCache, cache_key, judgment_key
from .concurrency import DEFAULT_CEILING, AdaptiveLimit, AdaptiveLimiter, AdaptiveSettings
from .freshness import probe_key, stale_keys, within_age
from .judges import Judge, persists, settle, strip_reasoning
from .rate_window import RateLimiter
from .redact import redact
from .retry import Clock, GiveUp, RetryPolicy, RetrySettings, Sleep, StopRun, pushes_back
from .targets import ConfigFault, FaultKind, OpenAICompatibleTarget, Target, TransientFault
from .types import Label, Response, Verdict

EXCERPT_CHARS = 300


@dataclass(frozen=True, slots=True)
class Job:
    key: str
    prompt: str
    system_prompt: str | None


@dataclass(frozen=True, slots=True)
class Answer:
    """What the report phase needs of one prompt: small, no raw body."""

    verdict: Verdict
    excerpt: str
    latency_ms: float
    cached: bool
    attempts: int
    age_s: float | None = None  # of a cached answer: how long ago it was stored
    system_fingerprint: str | None = None


ESTIMATED_OUTPUT_TOKENS = 256  # an answer's tokens for the tpm limit, when max_tokens is unset


@dataclass(frozen=True)
class FetchSettings:
    concurrency: int = DEFAULT_CEILING  # adaptive: the ceiling; fixed: requests in flight
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
           revalidate: bool = False, adaptive: bool = True) -> FetchSettings:
        """The engine's settings from a user's (the pytest run's or `orbench generate`'s): the
        one place that maps max_tokens to the token estimate and retries to the policy."""
        return cls(concurrency=concurrency, adaptive=adaptive, rpm=rpm, tpm=tpm,
                   est_output_tokens=max_tokens or ESTIMATED_OUTPUT_TOKENS,
                   retry=RetrySettings(max_retries=max_retries, backoff_base_s=backoff_s,
                                       max_duration_s=max_duration_s),
                   empty_is_refusal=empty_is_refusal, read_cache=read_cache,
                   cache_max_age_s=cache_max_age_s, revalidate=revalidate)


@dataclass
class FetchReport:
    answers: dict[str, Answer] = field(default_factory=dict)
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
    judged: int = 0  # answers the judge read in this run
    judgments_cached: int = 0  # verdicts read from the cache's judgments table instead
    judge_cpu_s: float = 0.0  # CPU seconds judging took, reading stored verdicts included

    @property
    def errors(self) -> dict[str, str]:
        return {k: a.verdict.reason for k, a in self.answers.items()
                if a.verdict.label is Label.ERROR}


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


class JudgeChannel:
    """The LLM judge's way to its model, made before the judge and the engine.

    The judge is built on `chat`; the engine that runs it then sends each judge request through
    its own cache, retries, rate limits and stop, within a concurrency limit of its own that
    adapts to the judge's endpoint up to the channel's bound (the judge is usually another
    endpoint).
    """

    def __init__(self, target: OpenAICompatibleTarget, concurrency: int) -> None:
        self.target = target
        self.concurrency = concurrency
        self.identity = {"judge": target.identity()}
        self._engine: FetchEngine | None = None

    def serve(self, engine: FetchEngine) -> None:
        if self._engine is not None and self._engine is not engine:
            raise RuntimeError("a judge channel serves one engine")
        self._engine = engine

    async def chat(self, messages: list[dict[str, str]], judge_version: str = "") -> Response:
        if self._engine is None:
            raise RuntimeError("the judge channel is not given to an engine")
        return await self._engine.judge_request(self, messages, judge_version)


class FetchEngine:
    """`clock` and `sleep` drive rate limits, backoff and --orbench-max-duration; tests pass
    fakes. The default sleep ends early when the run stops."""

    # Verdicts are written apart from the answers, many to a write: a kill loses only judging,
    # and 80K verdicts written a few dozen at a time cost the run 2.4 s against 0.6 s in writes
    # of this size (SQLite rewrites the index's pages at every checkpoint).
    judgments_per_write: ClassVar[int] = 16_384

    def __init__(self, target: Target, judge: Judge, cache: ResponseCache | None,
                 settings: FetchSettings, progress: Progress | None = None,
                 should_stop: Callable[[str, Answer], bool] | None = None, *,
                 judge_channel: JudgeChannel | None = None,
                 clock: Clock = time.monotonic, sleep: Sleep | None = None) -> None:
        self.target = target
        self.judge = judge
        self.cache = cache
        self.settings = settings
        self.progress = progress
        self.should_stop = should_stop
        self.report = FetchReport()
        self.policy = RetryPolicy(settings.retry, clock)
        self._sleep_fn = sleep
        # The first request goes out alone: a wrong key or model stops the run after one
        # request, not after `concurrency` of them.
        self._first_exchange: asyncio.Event | None = None
        self._probe_sent = False
        self._done = 0
        self._errors = 0
        self._total = 0
        self._stop_event: asyncio.Event | None = None
        self._limiter = RateLimiter(settings.rpm, settings.tpm, clock, self._sleep)
        # Target requests only: the judge's endpoint is another server with its own bound.
        self.concurrency = self._limit(settings.concurrency, clock)
        self._slots = AdaptiveLimiter(self.concurrency)
        self._unsaved: list[tuple[str, Response]] = []
        self._unsaved_judgments: list[tuple[str, Verdict]] = []
        self._flush_scheduled = False
        self._persist = cache is not None and persists(judge)
        # job key -> the judgment key of its cached answer, left by the lookup of stored
        # verdicts for the answers it did not find: hashing an answer again would be wasted
        self._judgment_keys: dict[str, str] = {}
        self._out_of_time = False
        self._judge_channel = judge_channel
        self._judge_slots: AdaptiveLimiter | None = None
        if judge_channel is not None:
            judge_channel.serve(self)
            self._judge_slots = AdaptiveLimiter(self._limit(judge_channel.concurrency, clock))

    def _limit(self, ceiling: int, clock: Clock) -> AdaptiveLimit:
        return AdaptiveLimit(AdaptiveSettings(ceiling=ceiling) if self.settings.adaptive
                             else AdaptiveSettings.fixed(ceiling), clock)

    async def run(self, jobs: Iterable[Job],
                  cached: dict[str, Response] | None = None) -> FetchReport:
        """`cached`: the caller's own lookup of these keys, so the cache is not read twice."""
        started = time.perf_counter()
        unique = {job.key: job for job in jobs}  # one request per distinct key
        self._total = len(unique)
        self._stop_event = asyncio.Event()
        self._first_exchange = asyncio.Event()
        self.policy.start()
        if cached is None:
            cached = {}
            if self.cache is not None and self.settings.read_cache:
                cached = within_age(usable(self.cache.get_many(unique)),
                                    self.settings.cache_max_age_s, time.time())
        if self.settings.revalidate:
            cached = await self._revalidate(unique, cached)
        todo: list[Job] = []
        settled: list[tuple[Job, Response]] = []
        for key, job in unique.items():
            if key in self.report.answers:  # the revalidation's fresh answer
                continue
            if key in cached:
                self.report.cache_hits += 1
                settled.append((job, cached[key]))
            else:
                todo.append(job)
        try:
            if self._judge_channel is not None:  # an LLM judge: judge cached answers at once
                await asyncio.gather(*(self._finish(job, r) for job, r in settled))
            else:  # offline judge: a plain loop is cheapest at 80K items
                known = self._stored_judgments(settled)
                for job, response in settled:
                    await self._finish(job, response, known.get(job.key))
            if todo:
                await self._fetch_all(todo)
        finally:
            # Ctrl-C, -x or a crash: what was answered stays answered
            self._flush(final=True)
            await self.target.aclose()
            if self._judge_channel is not None:
                await self._judge_channel.target.aclose()
            self.report.wall_s = time.perf_counter() - started
            self.report.concurrency_peak = self.concurrency.peak
            self.report.concurrency_cuts = self.concurrency.cuts
        return self.report

    def _stored_judgments(self, settled: list[tuple[Job, Response]]) -> dict[str, Verdict]:
        """Job key -> the verdict this judge already gave the cached answer (one batched read).
        Answers `settle` decides (blocks, empty answers) never reach a judge and are not
        looked up."""
        if not self._persist or not self.settings.read_cache or not settled:
            return {}
        assert self.cache is not None
        started = time.thread_time()
        by_judgment: dict[str, str] = {}
        for job, response in settled:
            answer = settle(response, empty_is_refusal=self.settings.empty_is_refusal)
            if isinstance(answer, str):
                by_judgment[judgment_key(self.judge.name, self.judge.version, job.prompt,
                                         answer)] = job.key
        stored = self.cache.get_judgments(by_judgment)
        self._judgment_keys = {job_key: key for key, job_key in by_judgment.items()
                               if key not in stored}
        self.report.judge_cpu_s += time.thread_time() - started
        return {by_judgment[key]: verdict for key, verdict in stored.items()}

    def _judgment_key(self, job: Job, answer: str) -> str:
        """`answer` is the job's cached answer whenever the lookup left its key."""
        known = self._judgment_keys.pop(job.key, None)
        return known or judgment_key(self.judge.name, self.judge.version, job.prompt, answer)

    async def _revalidate(self, unique: dict[str, Job],
                          cached: dict[str, Response]) -> dict[str, Response]:
        """Ask one cached prompt again; drop the cached answers its system_fingerprint makes
        stale (freshness.stale_keys). An attempt that fails changes nothing."""
        key = probe_key(cached)
        if key is None:
            return cached
        response = await self._ask(unique[key])
        if response is None or response.error is not None:
            return cached
        self._store(key, response)
        await self._finish(unique[key], response)
        stale = stale_keys(cached, response.system_fingerprint) - {key}
        self.report.stale = len(stale)
        return {k: r for k, r in cached.items() if k != key and k not in stale}

    async def _fetch_all(self, todo: list[Job]) -> None:
        queue = iter(todo)
        stop = self._stop_event
        assert stop is not None

        async def worker() -> None:
            # Workers share one iterator, one per slot the ceiling allows; each attempt then
            # waits for a slot of the adaptive limit (_send_once).
            for job in queue:
                if stop.is_set():
                    return
                response = await self._ask(job)
                if response is None:  # stopped while this one waited
                    return
                self._store(job.key, response)
                await self._finish(job, response)

        workers = [asyncio.ensure_future(worker())
                   for _ in range(min(self.settings.concurrency, len(todo)))]
        watchdog = asyncio.ensure_future(self._watch_the_clock(workers))
        try:
            await asyncio.gather(*workers)
        except asyncio.CancelledError:
            if not self._out_of_time:
                raise  # Ctrl-C from outside, not the run's own time limit
        finally:
            watchdog.cancel()
            for task in workers:
                task.cancel()
            await asyncio.gather(watchdog, *workers, return_exceptions=True)
        # Whatever was never asked is an error of this run, never a verdict.
        for job in todo:
            if job.key not in self.report.answers:
                reason = self.report.stopped_reason or self.report.config_error or "not sent"
                await self._finish(job, Response(text=None, error=f"not sent: {reason}"))

    async def _watch_the_clock(self, workers: Sequence[asyncio.Future[None]]) -> None:
        """--orbench-max-duration: past it, requests in flight are abandoned and the run ends."""
        while True:
            left = self.policy.time_left()
            if left is None:
                return
            if left <= 0:
                break
            await self._sleep(left)
            if self._stop_event is not None and self._stop_event.is_set():
                return
        self._stop_run(self.policy.over_time() or "out of time")
        self._out_of_time = True
        for task in workers:
            task.cancel()

    def _stop_run(self, reason: str) -> None:
        if self.report.stopped_reason is None:
            self.report.stopped_reason = reason
        assert self._stop_event is not None
        self._stop_event.set()

    async def _ask(self, job: Job) -> Response | None:
        return await self._attempts(
            lambda: self.target.complete(job.system_prompt, job.prompt),
            len(job.prompt) // 4 + self.settings.est_output_tokens, gated=True,
            slots=self._slots)

    async def _attempts(self, send: Callable[[], Awaitable[Response]], tokens: int, *,
                        gated: bool, slots: AdaptiveLimiter | None) -> Response | None:
        """One request with its retries; None when the run was stopped meanwhile.

        `gated`: a target request, held until the first one (the probe) has come back.
        `slots`: the concurrency limit each attempt is sent within.
        """
        stop = self._stop_event
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
                    response = await self._send_once(send, tokens, slots, attempt == 0)
                finally:
                    # Whatever came back (the handlers below run before any waiter wakes,
                    # so a ConfigFault's stop is already set when they look).
                    if probe:
                        first.set()
                if response is None:
                    return None
            except ConfigFault as fault:
                self.report.config_error = redact(str(fault))
                stop.set()
                return None
            except TransientFault as fault:
                self.report.retry_reasons[fault.tally] = (
                    self.report.retry_reasons.get(fault.tally, 0) + 1)
                timeouts += fault.kind is FaultKind.TIMEOUT
                decision = self.policy.after_fault(fault, attempt, timeouts)
                if isinstance(decision, StopRun):
                    self._stop_run(decision.reason)
                    return None
                if isinstance(decision, GiveUp):
                    return Response(text=None, error=decision.reason)
                self.report.retries += 1
                attempt += 1
                await self._sleep(decision.wait_s)
                continue
            self.policy.succeeded()
            response.attempts = attempt + 1
            return response

    async def _send_once(self, send: Callable[[], Awaitable[Response]], tokens: int,
                         slots: AdaptiveLimiter | None,
                         first_attempt: bool) -> Response | None:
        """One attempt: a slot of the concurrency limit (target requests), a place in the rate
        window, the request. The slot is held only while the request is out (never during a
        backoff) and is given back with what the attempt says of the endpoint's load: a
        first-attempt answer and its latency, a push-back, or nothing."""
        stop = self._stop_event
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
            self.report.requests += 1
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

    async def _sleep(self, seconds: float) -> None:
        if self._sleep_fn is not None:
            await self._sleep_fn(seconds)
            return
        stop = self._stop_event
        if stop is None:
            await asyncio.sleep(seconds)
            return
        try:  # the default sleep: wakes early when the run stops
            await asyncio.wait_for(stop.wait(), timeout=seconds)
        except asyncio.TimeoutError:
            pass

    async def judge_request(self, channel: JudgeChannel, messages: list[dict[str, str]],
                            judge_version: str = "") -> Response:
        """One LLM-judge exchange: cached, retried, rate limited, stopped like a target's.
        The judge's version is in the key: a changed judge asks again."""
        identity = ({**channel.identity, "judge_version": judge_version} if judge_version
                    else channel.identity)
        key = cache_key(identity, None, json.dumps(messages, ensure_ascii=False))
        if self.cache is not None and self.settings.read_cache:
            hit = within_age(usable(self.cache.get_many([key])),
                              self.settings.cache_max_age_s, time.time()).get(key)
            if hit is not None:
                return hit
        target = channel.target
        body = {"model": target.model, "messages": messages, **target.params.body_fields()}
        response = await self._attempts(
            lambda: target.chat(body), sum(len(m["content"]) for m in messages) // 4 + 100,
            gated=False, slots=self._judge_slots)
        if response is None:
            reason = self.report.stopped_reason or self.report.config_error or "stopped"
            return Response(text=None, error=f"judge not asked: {reason}")
        self._store(key, response)
        return response

    async def _judge(self, job: Job, response: Response) -> Verdict:
        """`settle` first; then the judge, whose verdict a persistent judge's run stores."""
        settled = settle(response, empty_is_refusal=self.settings.empty_is_refusal)
        if isinstance(settled, Verdict):
            return settled
        started = time.thread_time()
        self.report.judged += 1
        try:
            verdict = await self.judge.judge(job.prompt, settled)
        except Exception as exc:  # a judge that fails yields an error, never a refusal
            return Verdict(Label.ERROR, redact(f"judge failed: {type(exc).__name__}: {exc}"),
                           self.judge.name)
        else:
            self._keep_judgment(job, settled, verdict)
        finally:
            self.report.judge_cpu_s += time.thread_time() - started
        return verdict

    def _keep_judgment(self, job: Job, answer: str, verdict: Verdict) -> None:
        """A persistent judge's verdict is kept for the cache (an error never is), written
        judgments_per_write at a time and at the run's end. Its key's hashing counts as
        judging, as does the writing: the caller times it with the judging."""
        if self._persist and verdict.label is not Label.ERROR:
            self._unsaved_judgments.append((self._judgment_key(job, answer), verdict))
            if len(self._unsaved_judgments) >= self.judgments_per_write:
                self._flush_soon()

    def _store(self, key: str, response: Response) -> None:
        """Write through to the cache at the end of this event-loop turn: answers that arrive
        together share one commit (one commit per answer costs as much CPU as the request),
        and nothing awaits the network before the commit, so a kill loses no more than
        what was still in flight. Empty answers are never stored: the next run asks again."""
        if self.cache is None or not has_answer(response):
            return
        self._flush_soon()
        self._unsaved.append((key, response))

    def _flush_soon(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self, *, final: bool = False) -> None:
        """Write the answers in hand, and the verdicts once there are judgments_per_write of
        them or the run ends (`final`). A failed write stops the run (the answers in hand
        still reach the report): an answer must never be lost without a word."""
        self._flush_scheduled = False
        if self.cache is None:
            return
        unsaved, self._unsaved = self._unsaved, []
        judgments: list[tuple[str, Verdict]] = []
        if final or len(self._unsaved_judgments) >= self.judgments_per_write:
            judgments, self._unsaved_judgments = self._unsaved_judgments, []
        try:
            if unsaved:
                self.cache.put_many(unsaved)
            if judgments:
                started = time.thread_time()
                try:
                    self.cache.put_many((), judgments)
                finally:
                    self.report.judge_cpu_s += time.thread_time() - started
        except CacheWriteError as exc:
            self.report.stopped_reason = redact(str(exc))
            if self._stop_event is not None:
                self._stop_event.set()

    async def _finish(self, job: Job, response: Response, known: Verdict | None = None) -> None:
        """Judge one answer and record it; `known`: the verdict the cache already holds."""
        verdict = known
        if verdict is None:
            verdict = await self._judge(job, response)
        else:
            self.report.judgments_cached += 1
        self._record(job, response, verdict)

    def _record(self, job: Job, response: Response, verdict: Verdict) -> None:
        age = (time.time() - response.created
               if response.cached and response.created is not None else None)
        answer = Answer(verdict=verdict, excerpt=(response.text or "")[:EXCERPT_CHARS],
                        latency_ms=round(response.latency_ms, 1), cached=response.cached,
                        attempts=response.attempts, age_s=age,
                        system_fingerprint=response.system_fingerprint)
        self.report.answers[job.key] = answer
        self._done += 1
        self._errors += verdict.label is Label.ERROR
        if self.progress is not None:
            self.progress(self._done, self._total, self._errors, self.concurrency.limit)
        if self.should_stop is not None and self.should_stop(job.key, answer):
            assert self._stop_event is not None
            self._stop_event.set()


def usable(cached: dict[str, Response]) -> dict[str, Response]:
    """Cached responses worth reusing: an empty one (stored by an older version) is asked
    again."""
    return {key: r for key, r in cached.items() if has_answer(r)}


def run_phase(engine: FetchEngine, jobs: Iterable[Job],
              cached: dict[str, Response] | None = None) -> FetchReport:
    """The one sync → async bridge; never called from inside a running loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError("orbench: the fetch phase cannot run inside a running event loop")

    async def phase() -> None:
        # Returns nothing: when asyncio.run restores Ctrl-C's handler it writes out the main
        # task, its result in full (the report of 80K answers: 0.4 s and 44 MB of text).
        await engine.run(jobs, cached)

    asyncio.run(phase())
    return engine.report
