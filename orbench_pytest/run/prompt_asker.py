"""Ask prompts of the configured target one batch at a time, outside a suite: the `orbench_ask`
fixture and the rewording search use it.

Every batch goes through the run's fetch and judging (fetcher.JudgedFetch): the same cache keys
(target, parameters, fingerprint, system prompt, prompt), judge, retries, rate limits and
concurrency as the suite's own prompts, so an answer asked here is cached like any other and a
rerun asks nothing. The target is opened once, at the first prompt the cache lacks (the
embedded model's server starts then, and stops at `close`), never when the cache holds
everything.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from orbench_pytest.config.settings import Settings
from orbench_pytest.core.conversation import sent_system
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.redact import redact_known
from orbench_pytest.core.types import REFUSAL_LABELS, History, Label
from orbench_pytest.core.untrusted import redacted_repr, terminal_text
from orbench_pytest.fetch.cache import ResponseCache, cache_key
from orbench_pytest.fetch.costs import PROMPTS, Spending
from orbench_pytest.fetch.engine import Job, Progress, cached_answers, request_layer
from orbench_pytest.fetch.targets import OpenAICompatibleTarget, Target
from orbench_pytest.judges.stage import EXCERPT_CHARS
from orbench_pytest.judges.verdicts import Answer
from orbench_pytest.run.judged_fetch import JudgedFetch, fetch_and_judge
from orbench_pytest.run.runner import (
    NoTarget,
    build_run_judge,
    check_target_key,
    fetch_settings,
    generation_params,
    open_target,
    target_identity,
)

ANSWER_SHOWN = 300  # characters of an answer a failure message quotes


@redacted_repr
@dataclass(frozen=True)
class Asked:
    """The judged answer to one prompt: `.complied`, `.refused`, `.answer` (an excerpt)."""

    prompt: str
    answer: str
    label: Label
    reason: str
    judge: str
    cached: bool
    partial_is_refusal: bool = True
    confident: bool = True  # the judge's own: False where its rules only half fit

    @property
    def error(self) -> str | None:
        """Why no usable answer came back (never a refusal nor a compliance), else None."""
        return self.reason if self.label in (Label.ERROR, Label.NO_ANSWER) else None

    @property
    def refused(self) -> bool:
        if self.error is not None:
            return False
        if self.label is Label.PARTIAL_REFUSAL:
            return self.partial_is_refusal
        return self.label in REFUSAL_LABELS

    @property
    def complied(self) -> bool:
        return self.error is None and not self.refused

    def __repr__(self) -> str:
        # A failed `assert orbench_ask(p).complied` shows this: the prompt and the model's
        # answer, escaped as the untrusted text they are.
        state = "error" if self.error else "refused" if self.refused else "complied"
        return (f"Asked({state} [{self.judge}: {terminal_text(self.reason, 120)}], "
                f"prompt={terminal_text(self.prompt, 200)!r}, "
                f"answer={terminal_text(self.answer, ANSWER_SHOWN)!r})")

    __str__ = __repr__


def asked(prompt: str, answer: Answer, partial_is_refusal: bool = True) -> Asked:
    """The judged answer, its texts without a configured secret: pytest's assertion rewriting
    shows a field as it is (`assert "x" in asked.answer`), not through Asked's repr."""
    verdict = answer.verdict
    return Asked(redact_known(str(prompt)), redact_known(answer.excerpt), verdict.label,
                 redact_known(verdict.reason), verdict.judge, answer.cached,
                 partial_is_refusal, verdict.confident)


def prompt_text(prompt: object) -> str:
    """A prompt as it is sent: text that UTF-8 can carry. Anything else (None, bytes, a
    number, a lone surrogate from undecodable bytes) is a one-line error, never sent as
    "None" nor left to fail deep in the cache."""
    if not isinstance(prompt, str):
        raise TypeError(f"orbench_ask: a prompt is text (str), got {type(prompt).__name__}")
    text = str(prompt)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"orbench_ask: the prompt holds a lone surrogate "
                         f"(U+{ord(text[exc.start]):04X} at character {exc.start}), which no "
                         "endpoint can be sent: decode its bytes with errors='replace'"
                         ) from None
    return text


class _Kept:
    """The opened target across batches: each batch runs its own event loop, so an HTTP
    client's session (bound to a loop) is closed after each batch and made again in the next;
    anything else stays open until the asker closes."""

    def __init__(self, inner: Target) -> None:
        self.inner = inner

    async def complete(self, system_prompt: str | None, prompt: str,
                       history: History = ()) -> Any:
        return await self.inner.complete(system_prompt, prompt, history)

    async def aclose(self) -> None:
        if isinstance(self.inner, OpenAICompatibleTarget):
            await self.inner.aclose()


class PromptAsker:
    """Asks prompts of `settings`' target (its first system-prompt variant, after the run's
    --orbench-preamble, as a suite's prompts are sent) and judges them; `excerpt_chars` of each
    answer are kept (the rewording search keeps a refusal whole)."""

    def __init__(self, settings: Settings, excerpt_chars: int = EXCERPT_CHARS) -> None:
        self.settings = settings
        self.excerpt_chars = excerpt_chars
        self.params = generation_params(settings)
        self.identity = target_identity(settings, self.params)
        variants = settings.target.variants
        self.history = settings.target.preamble_turns
        self.system_prompt = sent_system(variants[0].system_prompt if variants else None,
                                         self.history)
        self.engine_settings = dataclasses.replace(
            fetch_settings(settings, self.params), revalidate=False)
        self.cache = (None if settings.cache.mode == "off"
                      else ResponseCache(settings.cache.path,
                                         writable=settings.cache.mode != "read",
                                         lock_wait_s=settings.cache.lock_wait_s))
        self._opened: contextlib.ExitStack | None = None
        self._target: Target | None = None
        self.asked = 0  # prompts asked (cached or not)
        self.requests = 0  # requests sent to the target
        self.spent = Spending()  # those and the LLM judge's, by kind, with their tokens
        self.retries = 0
        self.wall_s = 0.0

    def __repr__(self) -> str:
        return f"orbench_ask({terminal_text(self.settings.target.label, 80)})"

    def key(self, prompt: str) -> str:
        return cache_key(self.identity, self.system_prompt, prompt, self.history)

    def __call__(self, prompt: str) -> Asked:
        return self.ask_many([prompt])[prompt_text(prompt)]

    def ask_many(self, prompts: Iterable[str],
                 progress: Progress | None = None) -> dict[str, Asked]:
        """Every distinct prompt asked (concurrently, within the run's limits) and judged."""
        jobs: dict[str, Job] = {}
        for prompt in prompts:
            text = prompt_text(prompt)
            jobs.setdefault(text, Job(self.key(text), text, self.system_prompt,
                                           self.history))
        if not jobs:
            return {}
        started = time.perf_counter()
        cached, _ = cached_answers(self.cache, [job.key for job in jobs.values()],
                                   self.engine_settings)
        target: Target = NoTarget()
        if len(cached) < len({job.key for job in jobs.values()}):
            target = _Kept(self._open())
        requests = request_layer(self.engine_settings)
        judge, channel = build_run_judge(self.settings, requests, self.cache,
                                         self.engine_settings)
        phase = JudgedFetch(target, judge, self.cache, self.engine_settings, progress,
                            judge_channel=channel, requests=requests,
                            excerpt_chars=self.excerpt_chars)
        verdicts = fetch_and_judge(phase, list(jobs.values()), cached)
        report = phase.report
        if report.config_error:
            raise ConfigError(report.config_error)
        self.asked += len(jobs)
        self.requests += report.spent.of(PROMPTS).requests
        self.spent.add(report.spent)
        self.retries += report.retries
        self.wall_s += time.perf_counter() - started
        return {text: asked(text, verdicts.answers[job.key],
                            self.settings.judge.partial_is_refusal)
                for text, job in jobs.items()}

    def _open(self) -> Target:
        if self._target is None:
            check_target_key(self.settings)
            stack = contextlib.ExitStack()
            target, _label = stack.enter_context(open_target(self.settings, self.params))
            self._opened, self._target = stack, target
        return self._target

    def close(self) -> None:
        target, self._target = self._target, None
        if target is not None and not isinstance(target, OpenAICompatibleTarget):
            with contextlib.suppress(Exception):
                asyncio.run(target.aclose())
        if self._opened is not None:
            self._opened.close()
            self._opened = None
        if self.cache is not None:
            self.cache.close()
            self.cache = None
