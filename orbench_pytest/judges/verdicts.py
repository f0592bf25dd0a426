"""The judging stage's records: each prompt's verdict (`Answer`), the run's `Verdicts` with the
judge's counters, and the `VerdictWriter` that keeps a persistent judge's verdicts in the
cache's judgments table."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from orbench_pytest.core.redact import redact
from orbench_pytest.core.types import Label, Verdict
from orbench_pytest.core.untrusted import redacted_repr
from orbench_pytest.fetch.cache import CacheWriteError, ResponseCache

# Verdicts are written apart from the answers, many to a write: a kill loses only judging, and
# 80K verdicts written a few dozen at a time cost the run 2.4 s against 0.6 s in writes of this
# size (SQLite rewrites the index's pages at every checkpoint).
JUDGMENTS_PER_WRITE = 16_384


@redacted_repr
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
    # The whole answer up to defaults.ANSWER_CHARS; "" once the run's defaults.
    # ANSWERS_TOTAL_CHARS are spent (the excerpt is then all that is kept).
    text: str = ""


@dataclass
class Verdicts:
    """A run's verdicts, by job key, and what judging them took."""

    answers: dict[str, Answer] = field(default_factory=dict)
    judged: int = 0  # answers the judge read in this run
    judgments_cached: int = 0  # verdicts read from the cache's judgments table instead
    judge_cpu_s: float = 0.0  # CPU seconds judging took, reading and writing verdicts included

    @property
    def errors(self) -> dict[str, str]:
        """Prompts without an answer (an endpoint error, never sent, a judge that failed)."""
        return {k: a.verdict.reason for k, a in self.answers.items()
                if a.verdict.label is Label.ERROR}


class VerdictWriter:
    """A persistent judge's verdicts written to the cache, `per_write` to a write and at the
    end (`flush`): a kill loses only judging. A failed write stops the run through `failed`: a
    verdict is never lost without a word."""

    def __init__(self, cache: ResponseCache, failed: Callable[[str], None],
                 per_write: int = JUDGMENTS_PER_WRITE) -> None:
        self.cache = cache
        self._failed = failed
        self._per_write = per_write
        self._unsaved: list[tuple[str, Verdict]] = []

    def keep(self, key: str, verdict: Verdict) -> None:
        self._unsaved.append((key, verdict))
        if len(self._unsaved) >= self._per_write:
            self.flush(final=False)

    def flush(self, *, final: bool = True) -> None:
        """`final`: may wait for another process's lock on the cache (the run's end)."""
        unsaved, self._unsaved = self._unsaved, []
        if not unsaved:
            return
        try:
            self.cache.put_many((), unsaved, wait=final)
        except CacheWriteError as exc:
            self._failed(redact(str(exc)))
