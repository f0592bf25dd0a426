"""The fetch-and-judge phase: every selected prompt sent concurrently, judged, cached.

One event loop, one pooled client, a semaphore for the concurrency bound, optional rpm/tpm
limits, retries with backoff, and a budget that ends the phase when the endpoint is down.
Each answer is written to the cache the moment it arrives, so an interrupted run resumes.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from .cache import ResponseCache, cache_key
from .freshness import probe_key, stale_keys, within_age
from .judges import Chat, Judge, decide
from .redact import redact
from .targets import ConfigFault, OpenAICompatibleTarget, Target, TransientFault
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


@dataclass(frozen=True)
class FetchSettings:
    concurrency: int = 16
    max_retries: int = 6
    rpm: int | None = None
    tpm: int | None = None
    est_output_tokens: int = 256
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    # Consecutive failed attempts (not rate limits) after which the endpoint counts as down.
    max_consecutive_failures: int = 20
    empty_is_refusal: bool = False  # --orbench-empty=refusal
    read_cache: bool = True
    replay_only: bool = False  # xdist workers: never touch the network; a miss is an error
    cache_max_age_s: float | None = None  # older cached answers are asked again
    # Ask one cached answer again to see whether the provider's system_fingerprint changed.
    revalidate: bool = False


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

    @property
    def errors(self) -> dict[str, str]:
        return {k: a.verdict.reason for k, a in self.answers.items()
                if a.verdict.label is Label.ERROR}


Progress = Callable[[int, int, int], None]  # done, total, errors


class RateLimiter:
    """Requests and (estimated) tokens per minute over a sliding 60 s window."""

    def __init__(self, rpm: int | None, tpm: int | None) -> None:
        self.rpm = rpm
        self.tpm = tpm
        self._sent: deque[tuple[float, int]] = deque()
        self._lock = asyncio.Lock()

    async def acquire(self, tokens: int) -> None:
        if self.rpm is None and self.tpm is None:
            return
        async with self._lock:
            while True:
                now = time.monotonic()
                while self._sent and now - self._sent[0][0] >= 60.0:
                    self._sent.popleft()
                used = sum(t for _, t in self._sent)
                rpm_ok = self.rpm is None or len(self._sent) < self.rpm
                tpm_ok = self.tpm is None or used + tokens <= self.tpm or not self._sent
                if rpm_ok and tpm_ok:
                    self._sent.append((now, tokens))
                    return
                await asyncio.sleep(max(0.01, 60.0 - (now - self._sent[0][0])))


class _Stop(Exception):
    pass


class FetchEngine:
    def __init__(self, target: Target, judge: Judge, cache: ResponseCache | None,
                 settings: FetchSettings, progress: Progress | None = None,
                 should_stop: Callable[[str, Answer], bool] | None = None) -> None:
        self.target = target
        self.judge = judge
        self.cache = cache
        self.settings = settings
        self.progress = progress
        self.should_stop = should_stop
        self.report = FetchReport()
        self._consecutive_failures = 0
        # The first request goes out alone: a wrong key or model stops the run after one
        # request, not after `concurrency` of them.
        self._first_exchange: asyncio.Event | None = None
        self._probe_sent = False
        self._done = 0
        self._errors = 0
        self._total = 0
        self._stop_event: asyncio.Event | None = None
        self._limiter = RateLimiter(settings.rpm, settings.tpm)
        self._unsaved: list[tuple[str, Response]] = []
        self._judge_targets: list[OpenAICompatibleTarget] = []

    async def run(self, jobs: Iterable[Job],
                  cached: dict[str, Response] | None = None) -> FetchReport:
        """`cached`: the caller's own lookup of these keys, so the cache is not read twice."""
        started = time.perf_counter()
        unique = {job.key: job for job in jobs}  # one request per distinct key
        self._total = len(unique)
        self._stop_event = asyncio.Event()
        self._first_exchange = asyncio.Event()
        if cached is None:
            cached = {}
            if self.cache is not None and self.settings.read_cache:
                cached = within_age(self.cache.get_many(unique), self.settings.cache_max_age_s,
                                    time.time())
        if self.settings.revalidate and not self.settings.replay_only:
            cached = await self._revalidate(unique, cached)
        todo: list[Job] = []
        settled: list[tuple[Job, Response]] = []
        for key, job in unique.items():
            if key in self.report.answers:  # the revalidation's fresh answer
                continue
            if key in cached:
                self.report.cache_hits += 1
                settled.append((job, cached[key]))
            elif self.settings.replay_only:
                settled.append((job, Response(text=None, error="not in the response cache")))
            else:
                todo.append(job)
        try:
            if self._judge_targets:  # an LLM judge: judge the cached answers concurrently
                await asyncio.gather(*(self._finish(job, r) for job, r in settled))
            else:  # offline judge: a plain loop is cheapest at 80K items
                for job, response in settled:
                    await self._finish(job, response)
            if todo:
                await self._fetch_all(todo)
        finally:
            self._flush()  # Ctrl-C, -x or a crash: what was answered stays answered
            await self.target.aclose()
            for judge_target in self._judge_targets:
                await judge_target.aclose()
            self.report.wall_s = time.perf_counter() - started
        return self.report

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
        semaphore = asyncio.Semaphore(self.settings.concurrency)
        queue = iter(todo)
        stop = self._stop_event
        assert stop is not None

        async def worker() -> None:
            for job in queue:  # workers share one iterator: at most `concurrency` in flight
                if stop.is_set():
                    return
                async with semaphore:
                    response = await self._ask(job)
                if response is None:  # stopped while this one waited
                    return
                self._store(job.key, response)
                await self._finish(job, response)

        workers = [asyncio.ensure_future(worker())
                   for _ in range(min(self.settings.concurrency, len(todo)))]
        try:
            await asyncio.gather(*workers)
        finally:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
        # Whatever was never asked is an error of this run, never a verdict.
        for job in todo:
            if job.key not in self.report.answers:
                reason = self.report.stopped_reason or self.report.config_error or "not sent"
                await self._finish(job, Response(text=None, error=f"not sent: {reason}"))

    async def _ask(self, job: Job) -> Response | None:
        return await self._attempts(
            lambda: self.target.complete(job.system_prompt, job.prompt),
            len(job.prompt) // 4 + self.settings.est_output_tokens, gated=True)

    async def _attempts(self, send: Callable[[], Awaitable[Response]], tokens: int, *,
                        gated: bool) -> Response | None:
        """One request with its retries; None when the run was stopped meanwhile.

        `gated`: a target request, held until the first one (the probe) has come back.
        """
        settings = self.settings
        stop = self._stop_event
        assert stop is not None
        last_reason = ""
        first = self._first_exchange
        assert first is not None
        for attempt in range(settings.max_retries + 1):
            probe = gated and not self._probe_sent
            self._probe_sent = self._probe_sent or gated
            if gated and not probe:
                await first.wait()
            if stop.is_set():
                return None
            await self._limiter.acquire(tokens)
            self.report.requests += 1
            try:
                try:
                    response = await send()
                finally:
                    # Whatever came back (the handlers below run before any waiter wakes,
                    # so a ConfigFault's stop is already set when they look).
                    if probe:
                        first.set()
            except ConfigFault as fault:
                self.report.config_error = redact(str(fault))
                stop.set()
                return None
            except TransientFault as fault:
                last_reason = fault.reason
                kind = _fault_kind(fault.reason)
                self.report.retry_reasons[kind] = self.report.retry_reasons.get(kind, 0) + 1
                if kind != "HTTP 429":
                    self._consecutive_failures += 1
                    if self._consecutive_failures >= settings.max_consecutive_failures:
                        self.report.stopped_reason = (
                            f"endpoint unavailable: {settings.max_consecutive_failures} failed "
                            f"attempts in a row, the last: {redact(fault.reason)}")
                        stop.set()
                        return None
                if attempt == settings.max_retries:
                    break
                self.report.retries += 1
                await self._sleep(self._backoff(attempt, fault.retry_after))
                continue
            self._consecutive_failures = 0
            response.attempts = attempt + 1
            return response
        return Response(text=None, error=redact(
            f"no answer after {settings.max_retries + 1} attempts: {last_reason}"))

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            # The server's word, plus a little jitter so the waiting requests do not return
            # in one burst; capped so a huge Retry-After cannot stall the run for hours.
            wait = retry_after + random.uniform(0, min(1.0, retry_after * 0.1))
            return min(wait, self.settings.backoff_max_s * 2)
        ceiling = min(self.settings.backoff_max_s, self.settings.backoff_base_s * 2 ** attempt)
        return ceiling / 2 + random.uniform(0, ceiling / 2)  # equal jitter: spread the herd

    async def _sleep(self, seconds: float) -> None:
        stop = self._stop_event
        assert stop is not None
        try:
            await asyncio.wait_for(stop.wait(), timeout=seconds)
        except asyncio.TimeoutError:
            pass

    def judge_chat(self, judge_target: OpenAICompatibleTarget) -> Chat:
        """The LLM judge's way out: through this engine's cache, retries, rate limits and stop,
        with its own concurrency bound (the judge is usually another endpoint)."""
        self._judge_targets.append(judge_target)
        identity = {"judge": judge_target.identity()}
        bound: list[asyncio.Semaphore] = []  # made inside the running loop

        async def chat(messages: list[dict[str, str]]) -> Response:
            key = cache_key(identity, None, json.dumps(messages, ensure_ascii=False))
            if self.cache is not None and self.settings.read_cache:
                hit = within_age(self.cache.get_many([key]), self.settings.cache_max_age_s,
                                 time.time()).get(key)
                if hit is not None:
                    return hit
            if self.settings.replay_only:
                return Response(text=None, error="judge reply not in the response cache")
            if not bound:
                bound.append(asyncio.Semaphore(self.settings.concurrency))
            body = {"model": judge_target.model, "messages": messages,
                    **judge_target.params.body_fields()}
            async with bound[0]:
                response = await self._attempts(
                    lambda: judge_target.chat(body),
                    sum(len(m["content"]) for m in messages) // 4 + 100, gated=False)
            if response is None:
                reason = self.report.stopped_reason or self.report.config_error or "stopped"
                return Response(text=None, error=f"judge not asked: {reason}")
            self._store(key, response)
            return response

        return chat

    def _store(self, key: str, response: Response) -> None:
        """Write through to the cache at the end of this event-loop turn: answers that arrive
        together share one commit (one commit per answer costs as much CPU as the request),
        and nothing awaits the network before the commit, so a kill loses no more than
        what was still in flight."""
        if self.cache is None or response.error is not None:
            return
        if not self._unsaved:
            asyncio.get_running_loop().call_soon(self._flush)
        self._unsaved.append((key, response))

    def _flush(self) -> None:
        if self.cache is not None and self._unsaved:
            unsaved, self._unsaved = self._unsaved, []
            self.cache.put_many(unsaved)

    async def _finish(self, job: Job, response: Response) -> None:
        try:
            verdict = await decide(job.prompt, response, self.judge,
                                   empty_is_refusal=self.settings.empty_is_refusal)
        except Exception as exc:  # a judge that fails yields an error, never a refusal
            verdict = Verdict(Label.ERROR, redact(f"judge failed: {type(exc).__name__}: {exc}"),
                              self.judge.name)
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
            self.progress(self._done, self._total, self._errors)
        if self.should_stop is not None and self.should_stop(job.key, answer):
            assert self._stop_event is not None
            self._stop_event.set()


def _fault_kind(reason: str) -> str:
    """A short class of a TransientFault's reason for the tally ("HTTP 503", "timed out")."""
    if reason.startswith("HTTP "):
        return reason[:8]
    return re.split(r" \(|: | to | after ", reason, maxsplit=1)[0]


def run_phase(engine: FetchEngine, jobs: Iterable[Job],
              cached: dict[str, Response] | None = None) -> FetchReport:
    """The one sync → async bridge; never called from inside a running loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(engine.run(jobs, cached))
    raise RuntimeError("orbench: the fetch phase cannot run inside a running event loop")
