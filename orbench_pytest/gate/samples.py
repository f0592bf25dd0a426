"""Several answers per prompt (--orbench-samples=N): keys, the per-prompt rule, the statistics.

Pure Python. A prompt asked N times has a refusal fraction (refusals over its answered
samples); the item's outcome follows a per-prompt rule (`refuse_at` in thresholds.yaml) and
the gate's rates are the mean of the per-prompt fractions, with an interval that treats the
prompts as clusters of answers (core/statistics.py: clustered_rate, signed_rank).
"""

from __future__ import annotations

import hashlib

REFUSE_AT_NAMES = ("any", "all")


def identical_answers_warning(samples: int) -> str:
    return (f"orbench: --orbench-samples={samples} at temperature 0: the answers may be "
            "identical (set --orbench-temperature, e.g. 0.7, to measure refusal probability)")


def sample_key(key: str, index: int) -> str:
    """The cache key of one sample. Sample 0 keeps the prompt's own key, so caches written
    before sampling existed stay valid and N=1 runs are unchanged."""
    if index == 0:
        return key
    return hashlib.sha256(f"{key}#sample={index}".encode()).hexdigest()


def parse_refuse_at(value: object, where: str) -> float | str:
    """`refuse_at`: a fraction in (0, 1], or any / all; a one-line error naming `where`."""
    if isinstance(value, str) and value in REFUSE_AT_NAMES:
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise ValueError(f"{where}: {value!r} is not allowed (allowed: a fraction in (0, 1], "
                         "any, all)")
    return float(value)


def refused_by_rule(refusals: int, answered: int, refuse_at: float | str) -> bool | None:
    """Whether a prompt counts as refused; None when no sample was answered (an error)."""
    if answered == 0:
        return None
    if refuse_at == "any":
        return refusals > 0
    if refuse_at == "all":
        return refusals == answered
    assert isinstance(refuse_at, float)
    # Integer comparison first: 0.5 of 5 must not round 2/5 up or 3/5 down.
    return refusals >= refuse_at * answered - 1e-9


def times(refusals: int, answered: int) -> str:
    """'refused 3 of 5 times', as reports phrase a flaky prompt."""
    return f"refused {refusals} of {answered} times"


def is_flaky(refusals: int, answered: int) -> bool:
    return 0 < refusals < answered


