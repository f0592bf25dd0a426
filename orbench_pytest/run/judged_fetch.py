"""One run's fetch and judging: the three parts put together.

`JudgedFetch` wires one run's request layer (fetch/requests.py: concurrency, rate window,
retries, stop), its fetch engine (fetch/engine.py: plans, fetches, caches; its `FetchReport`)
and its judging stage (judges/stage.py: settle, stored verdicts, the judge; its `Verdicts`). An
LLM judge's channel (judges/channel.py) is built beforehand with the same request layer, which
the caller makes (fetch/engine.py: request_layer) and hands to both. `fetch_and_judge` runs it
from sync code.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import ClassVar

from orbench_pytest.core import defaults
from orbench_pytest.core.types import Response
from orbench_pytest.fetch.cache import ResponseCache
from orbench_pytest.fetch.engine import (
    FetchEngine,
    FetchReport,
    FetchSettings,
    Job,
    Progress,
    request_layer,
)
from orbench_pytest.fetch.engine import run_in_new_loop as _run_in_new_loop
from orbench_pytest.fetch.requests import RequestLayer
from orbench_pytest.fetch.retry import Clock, Sleep
from orbench_pytest.fetch.targets import Target
from orbench_pytest.judges.channel import JudgeChannel
from orbench_pytest.judges.judge import Judge
from orbench_pytest.judges.stage import EXCERPT_CHARS, JudgingStage
from orbench_pytest.judges.verdicts import JUDGMENTS_PER_WRITE, Answer, Verdicts


class JudgedFetch:
    """One run's fetch and judging, its parts made when it runs. `requests`: the run's request
    layer, the one `judge_channel` was built with (else one is made here). `clock` and `sleep`
    drive rate limits, backoff and --orbench-max-duration; tests pass fakes. The default sleep
    ends early when the run stops."""

    judgments_per_write: ClassVar[int] = JUDGMENTS_PER_WRITE
    answers_total_chars: ClassVar[int] = defaults.ANSWERS_TOTAL_CHARS  # whole answers kept

    def __init__(self, target: Target, judge: Judge, cache: ResponseCache | None,
                 settings: FetchSettings, progress: Progress | None = None,
                 should_stop: Callable[[str, Answer], bool] | None = None, *,
                 judge_channel: JudgeChannel | None = None,
                 requests: RequestLayer[FetchReport] | None = None,
                 clock: Clock = time.monotonic, sleep: Sleep | None = None,
                 excerpt_chars: int = EXCERPT_CHARS) -> None:
        self.target = target
        self.judge = judge
        self.cache = cache
        self.settings = settings
        self.progress = progress
        self.should_stop = should_stop
        self.judge_channel = judge_channel
        self.requests = requests or request_layer(settings, clock, sleep)
        self.excerpt_chars = excerpt_chars  # of each answer, kept in the report
        self.report = self.requests.tally  # the fetch's
        self.verdicts = Verdicts()  # the judging stage's, once it ran

    async def run(self, jobs: Iterable[Job],
                  cached: dict[str, Response] | None = None) -> Verdicts:
        """`cached`: the caller's own lookup of these keys, so the cache is not read twice."""
        settings, requests = self.settings, self.requests
        engine = FetchEngine.build(self.target, self.cache, settings, requests)
        judging = JudgingStage(
            self.judge, self.cache, empty_is_refusal=settings.empty_is_refusal,
            read_cache=settings.read_cache, judge_channel=self.judge_channel,
            progress=self.progress, should_stop=self.should_stop, stop=requests.stop,
            stopping=lambda: requests.stopping, within_time=requests.within_time,
            failed=requests.stop_run, limit_now=lambda: engine.concurrency.limit,
            excerpt_chars=self.excerpt_chars, answers_total_chars=self.answers_total_chars,
            judgments_per_write=self.judgments_per_write)
        self.verdicts = judging.verdicts
        await engine.run(jobs, judging, cached)
        return self.verdicts


def fetch_and_judge(judged: JudgedFetch, jobs: Iterable[Job],
                    cached: dict[str, Response] | None = None) -> Verdicts:
    """The one sync → async bridge; never called from inside a running loop. The verdicts;
    the fetch's report is `judged.report`."""
    _run_in_new_loop(lambda: judged.run(jobs, cached))
    return judged.verdicts
