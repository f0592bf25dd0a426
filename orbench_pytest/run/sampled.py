"""--orbench-samples=N in the run: one fetch job per sample, and a prompt's samples combined.

Each sample is its own job with its own cache key (samples.sample_key), so the fetch engine's
concurrency, retries, progress and resume apply to every answer alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from orbench_pytest.fetch.engine import Answer, Job
from orbench_pytest.gate.samples import refused_by_rule, sample_key


def sample_keys(key: str, samples: int) -> list[str]:
    return [sample_key(key, index) for index in range(samples)]


def sample_jobs(key: str, prompt: str, system_prompt: str | None, samples: int) -> list[Job]:
    return [Job(k, prompt, system_prompt) for k in sample_keys(key, samples)]


@dataclass(frozen=True, slots=True)
class Combined:
    """A prompt's samples as one item: the answer it shows, and what its answers did."""

    answer: Answer  # the first answer that agrees with the item's decision (else sample 0)
    refused: bool | None  # by the refuse_at rule; None when no sample was answered
    refusals: int  # among the answered samples
    answered: int  # samples with a usable answer: an errored sample is neither


def combine(answers: Sequence[Answer], refuse_at: float | str,
            partial_is_refusal: bool) -> Combined:
    answered = [a for a in answers if not a.verdict.is_error]
    decisions = [a.verdict.refused(partial_is_refusal) for a in answered]
    refusals = sum(decisions)
    refused = refused_by_rule(refusals, len(answered), refuse_at)
    shown = next((a for a, d in zip(answered, decisions, strict=True) if d == refused),
                 answers[0])
    return Combined(shown, refused, refusals, len(answered))
