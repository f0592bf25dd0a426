"""Several answers per prompt (--orbench-samples=N): keys, the per-prompt rule, the statistics.

Pure Python. A prompt asked N times has a refusal fraction (refusals over its answered
samples); the item's outcome follows a per-prompt rule (`refuse_at` in thresholds.yaml) and
the gate's rates are the mean of the per-prompt fractions, with an interval that treats the
prompts as clusters of answers.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

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


@dataclass(frozen=True, slots=True)
class ClusteredRate:
    """The mean of per-prompt fractions and its interval (prompts are the clusters).

    Why this interval: the prompts, not the answers, are the independent units (answers to one
    prompt are correlated), so the variance of the mean comes from the spread of the per-prompt
    fractions (the cluster-robust variance a t-interval over them uses). It is turned into an
    effective sample size (Kish's design effect) for Wilson's score interval rather than used in
    a t-interval, because a t-interval collapses to zero width when no prompt is flaky (0 of 40
    prompts refused: [0, 0]) and undercovers near 0, where gates sit; and it is deterministic and
    O(n) at 80K prompts, which a cluster bootstrap is not. With one sample per prompt (or when
    every prompt's answers agree) the effective size is the number of prompts and the interval
    is exactly the Wilson interval of the single-answer gate; with flaky prompts it narrows
    towards the Wilson interval over all answers, never past it.
    """

    mean: float
    prompts: int
    answers: int
    n_effective: float
    low: float
    high: float


def clustered_rate(fractions: Sequence[float], answers: int,
                   confidence: float = 0.95) -> ClusteredRate:
    n = len(fractions)
    if n == 0:
        return ClusteredRate(0.0, 0, answers, 0.0, 0.0, 1.0)
    mean = math.fsum(fractions) / n
    variance_of_mean = math.fsum((f - mean) ** 2 for f in fractions) / (n * n)
    binomial = mean * (1 - mean)
    if binomial <= 0.0:
        n_eff = float(n)  # all 0 or all 1: nothing but the prompts to count
    elif variance_of_mean <= 0.0:
        n_eff = float(max(answers, n))  # every prompt at the same fraction: answers count
    else:
        n_eff = min(max(binomial / variance_of_mean, float(n)), float(max(answers, n)))
    low, high = wilson_from_rate(mean, n_eff, confidence)
    return ClusteredRate(mean, n, answers, n_eff, low, high)


def wilson_from_rate(p: float, n: float, confidence: float) -> tuple[float, float]:
    """Wilson's score interval for a proportion p over an (effective, maybe fractional) n;
    (0, 1) when n is 0. The one Wilson of the package (gate.wilson_interval counts)."""
    if n <= 0:
        return (0.0, 1.0)
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(max(p * (1 - p), 0.0) / n + z * z / (4 * n * n)) / denom
    # Clamp away float noise so the interval always contains p.
    return (max(0.0, min(centre - half, p)), min(1.0, max(centre + half, p)))


@dataclass(frozen=True, slots=True)
class SignedRank:
    """Wilcoxon's signed-rank test over paired per-prompt differences (now − baseline of the
    mismatch fraction; positive = worse). Zero differences are dropped (Wilcoxon's rule), ties
    get mid-ranks, and p comes from the normal approximation with the tie correction (exact
    enumeration for up to 20 non-zero pairs)."""

    worse: int  # prompts whose mismatch fraction rose
    better: int
    w_plus: float
    p_worse: float  # one-sided: the chance of a W+ this large if the change made no difference
    exact: bool

    def significant_regression(self, confidence: float) -> bool:
        return self.worse > 0 and self.p_worse < 1 - confidence

    def describe(self) -> str:
        method = "exact" if self.exact else "normal approx."
        return (f"Wilcoxon signed-rank over per-prompt fractions: {self.worse} worse / "
                f"{self.better} better, one-sided p={self.p_worse:.3g} ({method})")


EXACT_PAIRS = 20


def signed_rank(differences: Sequence[float]) -> SignedRank:
    nonzero = [d for d in differences if abs(d) > 1e-12]
    worse = sum(d > 0 for d in nonzero)
    better = len(nonzero) - worse
    n = len(nonzero)
    if n == 0:
        return SignedRank(0, 0, 0.0, 1.0, True)
    ranks = mid_ranks([abs(d) for d in nonzero])
    w_plus = math.fsum(r for r, d in zip(ranks, nonzero, strict=True) if d > 0)
    if n <= EXACT_PAIRS:
        return SignedRank(worse, better, w_plus, _exact_upper(ranks, w_plus), True)
    mean = n * (n + 1) / 4
    ties: dict[float, int] = {}
    for rank in ranks:
        ties[rank] = ties.get(rank, 0) + 1
    variance = n * (n + 1) * (2 * n + 1) / 24 - math.fsum(t ** 3 - t for t in ties.values()) / 48
    if variance <= 0:
        return SignedRank(worse, better, w_plus, 1.0, False)
    z = (w_plus - mean - 0.5) / math.sqrt(variance)  # continuity correction
    return SignedRank(worse, better, w_plus, 1 - NormalDist().cdf(z), False)


def mid_ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties sharing their mean rank (values within 1e-12 count as tied)."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and abs(values[order[end + 1]] - values[order[start]]) < 1e-12:
            end += 1
        for position in range(start, end + 1):
            ranks[order[position]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def _exact_upper(ranks: Sequence[float], w_plus: float) -> float:
    """P(W+ >= w_plus) under the null: every sign a fair coin, over all 2^n sign patterns
    (ranks doubled to integers so mid-ranks stay exact)."""
    doubled = [round(r * 2) for r in ranks]
    counts: dict[int, int] = {0: 1}
    for r in doubled:
        step: dict[int, int] = dict(counts)
        for total, ways in counts.items():
            step[total + r] = step.get(total + r, 0) + ways
        counts = step
    target = round(w_plus * 2)
    hits = sum(ways for total, ways in counts.items() if total >= target)
    return hits / (1 << len(doubled))
