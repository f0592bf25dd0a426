"""The judging stage: each response the fetch engine hands on, settled, judged, recorded.

settle (errors, provider blocks, empty answers: no judge) → the judge's memo (judge.py) →
the cache's judgments table (a persistent judge's verdicts, read back in one batch for cached
answers and written many to a write, so a re-run over cached answers judges nothing again) →
the judge → the run's `Verdicts` (verdicts.py: the answers, the judge's counts and CPU), progress
and the stop rule.

The offline judge reads fetched answers in batches, not each one between two requests: the
judge's and the HTTP client's working sets evict each other (20,000 answers judged in batches
cost about 1 s less CPU than judged as they arrive; docs/design/throughput.md, fourth pass). A
batch is judged once it holds BATCH_ANSWERS or its oldest answer has waited BATCH_WAIT_S, so
progress lags by at most that, and at the run's end (a cancelled run's included). A run with a
stop rule (-x / --maxfail: a verdict as each answer arrives, before the next is asked) judges
each answer as it arrives. Otherwise the LLM judge judges each answer beside the fetch, in a
task of its own: the fetch never waits for a verdict (unless BATCH_ANSWERS of them are
pending), the judge's requests bounded by its channel (channel.py), not by the target's
concurrency. A run that stops abandons the verdicts still out: each such answer is an error.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence

from orbench_pytest.core import defaults
from orbench_pytest.core.redact import redact
from orbench_pytest.core.types import Label, Response, Verdict
from orbench_pytest.fetch.cache import ResponseCache, judgment_keys
from orbench_pytest.fetch.engine import Job, Progress
from orbench_pytest.judges.channel import JudgeChannel
from orbench_pytest.judges.judge import Judge, persists, settle
from orbench_pytest.judges.verdicts import JUDGMENTS_PER_WRITE, Answer, Verdicts, VerdictWriter

# The request layer's `within_time`: the tasks awaited until --orbench-max-duration.
WithinTime = Callable[[Sequence["asyncio.Future[None]"]], Awaitable[None]]


async def _all_of(tasks: Sequence[asyncio.Future[None]]) -> None:
    await asyncio.gather(*tasks)

EXCERPT_CHARS = 300
BATCH_ANSWERS = 1024  # bounds the responses held, full text and all
BATCH_WAIT_S = 0.1  # an answer waits at most this long for its verdict and its progress


class JudgingStage:
    """The fetch engine's sink in a pytest run (fetch/engine.py: AnswerSink)."""

    def __init__(self, judge: Judge, cache: ResponseCache | None, *,
                 empty_is_refusal: bool, read_cache: bool,
                 judge_channel: JudgeChannel | None = None,
                 progress: Progress | None = None,
                 should_stop: Callable[[str, Answer], bool] | None = None,
                 stop: Callable[[], None] = lambda: None,
                 stopping: Callable[[], bool] = lambda: False,
                 within_time: WithinTime | None = None,
                 failed: Callable[[str], None] = lambda reason: None,
                 limit_now: Callable[[], int] = lambda: 0,
                 excerpt_chars: int = EXCERPT_CHARS,
                 answers_total_chars: int = defaults.ANSWERS_TOTAL_CHARS,
                 judgments_per_write: int = JUDGMENTS_PER_WRITE) -> None:
        self.judge = judge
        self.verdicts = Verdicts()
        # A persistent judge's verdicts, kept in the cache; `failed`: a write failed
        self.writer = (VerdictWriter(cache, failed, judgments_per_write)
                       if cache is not None and persists(judge) else None)
        self.empty_is_refusal = empty_is_refusal
        self.read_cache = read_cache
        self.judge_channel = judge_channel
        self.progress = progress
        self.should_stop = should_stop
        self._stop = stop
        self._stopping = stopping
        # The verdicts still out at the fetch's end, awaited within --orbench-max-duration
        self._within_time = within_time or _all_of
        self._limit_now = limit_now  # the target's concurrency limit, for the progress line
        self._excerpt_chars = excerpt_chars
        self._key_of = judgment_keys(judge.name, judge.version)  # (prompt, answer) -> its key
        # job key -> the judgment key of its cached answer, left by the lookup of stored
        # verdicts for the answers it did not find: hashing an answer again would be wasted
        self._judgment_keys: dict[str, str] = {}
        self._done = 0
        self._text_left = answers_total_chars  # whole answers kept, in all
        self._errors = 0
        self._total = 0
        self._batches = judge_channel is None and should_stop is None
        self._beside = judge_channel is not None and should_stop is None
        # fetched, not judged yet, each with the concurrency limit it arrived at
        self._waiting: deque[tuple[Job, Response, int]] = deque()
        self._timer: asyncio.Future[None] | None = None  # judges the batch BATCH_WAIT_S on
        # An LLM judge's verdicts to come, each in a task; at most BATCH_ANSWERS at once
        self._judging: set[asyncio.Future[None]] = set()
        self._room = asyncio.Semaphore(BATCH_ANSWERS)

    def expect(self, total: int) -> None:
        self._total = total

    async def take_cached(self, pairs: list[tuple[Job, Response]]) -> None:
        if self._beside:
            for job, response in pairs:
                await self.take(job, response)
            return
        known = self._stored_judgments(pairs)  # offline judge: a plain loop is cheapest
        for job, response in pairs:
            verdict = known.get(job.key)
            if verdict is None:
                await self._finish(job, response)
            else:  # a stored verdict: recorded at once, no coroutine made and awaited
                self.verdicts.judgments_cached += 1
                self._record(job, response, verdict)

    async def take(self, job: Job, response: Response) -> None:
        if self._beside:
            await self._room.acquire()
            task = asyncio.ensure_future(self._finish_beside(job, response))
            self._judging.add(task)
            task.add_done_callback(self._judged)
            return
        if not self._batches:
            await self._finish(job, response)
            return
        self._waiting.append((job, response, self._limit_now()))  # the limit it came in at
        if len(self._waiting) >= BATCH_ANSWERS:
            await self._judge_waiting()
        elif self._timer is None or self._timer.done():
            if self._timer is not None:
                self._timer.result()  # the last timed batch's failure, never swallowed
            self._timer = asyncio.ensure_future(self._judge_after(BATCH_WAIT_S))

    async def _finish_beside(self, job: Job, response: Response) -> None:
        try:
            await self._finish(job, response)
        except asyncio.CancelledError:  # the run stopped (aclose): no verdict, an error
            self._record(job, response, Verdict(Label.ERROR, "judge abandoned: the run stopped",
                                                self.judge.name))

    def _judged(self, task: asyncio.Future[None]) -> None:
        self._room.release()
        if task.cancelled() or task.exception() is None:
            self._judging.discard(task)  # a failure stays, for aclose to raise

    async def _judge_after(self, delay_s: float) -> None:
        await asyncio.sleep(delay_s)
        await self._judge_waiting()

    async def _judge_waiting(self) -> None:
        waiting = self._waiting
        while waiting:  # one at a time: a cancelled batch leaves the rest waiting
            job, response, limit = waiting.popleft()
            await self._finish(job, response, limit=limit)

    async def aclose(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            if timer.done():
                timer.result()
            else:
                timer.cancel()
        try:
            await self._judge_waiting()  # the run's end, Ctrl-C and time limits included
            if self._stopping():
                for task in self._judging:
                    task.cancel()
            # Past the time limit a verdict still out is abandoned (an error), not waited for.
            await self._within_time(list(self._judging))
        finally:
            if self.judge_channel is not None:
                await self.judge_channel.aclose()
            if self.writer is not None:
                started = time.thread_time()  # writing verdicts counts as judging
                self.writer.flush()
                self.verdicts.judge_cpu_s += time.thread_time() - started

    def _stored_judgments(self, settled: list[tuple[Job, Response]]) -> dict[str, Verdict]:
        """Job key -> the verdict this judge already gave the cached answer (one batched read).
        Answers `settle` decides (blocks, empty answers) never reach a judge and are not
        looked up."""
        if self.writer is None or not self.read_cache or not settled:
            return {}
        cache = self.writer.cache
        started = time.thread_time()
        key_of, empty_is_refusal = self._key_of, self.empty_is_refusal
        by_judgment: dict[str, str] = {}
        for job, response in settled:
            answer = settle(response, empty_is_refusal=empty_is_refusal)
            if isinstance(answer, str):
                by_judgment[key_of(job.prompt, answer)] = job.key
        stored = cache.get_judgments(by_judgment)
        if len(stored) < len(by_judgment):
            self._judgment_keys = {job_key: key for key, job_key in by_judgment.items()
                                   if key not in stored}
        self.verdicts.judge_cpu_s += time.thread_time() - started
        return {by_judgment[key]: verdict for key, verdict in stored.items()}

    def _judgment_key(self, job: Job, answer: str) -> str:
        """`answer` is the job's cached answer whenever the lookup left its key."""
        known = self._judgment_keys.pop(job.key, None)
        return known or self._key_of(job.prompt, answer)

    async def _judge(self, job: Job, response: Response) -> Verdict:
        """`settle` first; then the judge, whose verdict a persistent judge's run stores."""
        settled = settle(response, empty_is_refusal=self.empty_is_refusal)
        if isinstance(settled, Verdict):
            return settled
        started = time.thread_time()
        self.verdicts.judged += 1
        try:
            verdict = await self.judge.judge(job.prompt, settled)
        except Exception as exc:  # a judge that fails yields an error, never a refusal
            return Verdict(Label.ERROR, redact(f"judge failed: {type(exc).__name__}: {exc}"),
                           self.judge.name)
        else:
            # A persistent judge's verdict is kept for the cache (an error never is); its
            # key's hashing counts as judging.
            if self.writer is not None and verdict.label is not Label.ERROR:
                self.writer.keep(self._judgment_key(job, settled), verdict)
        finally:
            self.verdicts.judge_cpu_s += time.thread_time() - started
        return verdict

    async def _finish(self, job: Job, response: Response, *, limit: int | None = None) -> None:
        """Judge one answer and record it; `limit`: the concurrency limit when it arrived, for
        the progress line (else now's)."""
        self._record(job, response, await self._judge(job, response), limit)

    def _record(self, job: Job, response: Response, verdict: Verdict,
                limit: int | None = None) -> None:
        age = (time.time() - response.created
               if response.cached and response.created is not None else None)
        # Positional: a frozen dataclass's keywords cost half again (80K answers: 40 ms).
        whole = response.text or ""
        text = whole[:defaults.ANSWER_CHARS]
        if len(text) > self._text_left:
            text = ""  # the budget is spent: the excerpt alone
        self._text_left -= len(text)
        answer = Answer(verdict, whole[:self._excerpt_chars], round(response.latency_ms, 1),
                        response.cached, response.attempts, age, response.system_fingerprint,
                        text)
        self.verdicts.answers[job.key] = answer
        self._done += 1
        self._errors += verdict.label is Label.ERROR
        if self.progress is not None:
            self.progress(self._done, self._total, self._errors,
                          self._limit_now() if limit is None else limit)
        if self.should_stop is not None and self.should_stop(job.key, answer):
            self._stop()
