"""The statistics behind the gate, the judge check and the reports, each with its source.

One home for every formula (tests/test_statistics.py checks each against published values and
by Hypothesis properties). Pure Python, no numeric dependency:

- z_of: the two-sided normal quantile of a confidence level.
- wilson_from_rate, wilson_interval: Wilson's score interval (Wilson 1927; Newcombe 1998,
  method 3), the interval of every gated rate; wilson_cc_low: its lower limit
  continuity-corrected (Newcombe 1998, method 4), for the judge calibration's strata.
- clustered_rate: a mean of per-prompt fractions with Wilson's interval over Kish's (1965)
  effective sample size (--orbench-samples).
- mcnemar: McNemar's (1947) test on discordant pairs, exact binomial up to EXACT_LIMIT pairs.
- signed_rank, mid_ranks: Wilcoxon's (1945) signed-rank test, exact up to EXACT_PAIRS pairs.
- paired_difference: Tango's (1998) score interval for a difference of paired proportions;
  newcombe_difference: Newcombe's (1998) hybrid, kept for the simulation that compares them.
- cohen_kappa: Cohen's (1960) kappa.
- spearman: Spearman's (1904) rank correlation.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist


def z_of(confidence: float) -> float:
    """The two-sided standard normal quantile: 1.959964 for 0.95."""
    return NormalDist().inv_cdf(0.5 + confidence / 2)


# --- Wilson's score interval ---------------------------------------------------------------
def wilson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for k successes in n trials; (0, 1) when n is 0."""
    return wilson_from_rate(k / n if n else 0.0, n, confidence)


def wilson_from_rate(p: float, n: float, confidence: float) -> tuple[float, float]:
    """Wilson's score interval for a proportion p over an (effective, maybe fractional) n;
    (0, 1) when n is 0. Wilson (1927), JASA 22:209-212; Newcombe (1998) method 3."""
    if n <= 0:
        return (0.0, 1.0)
    z = z_of(confidence)
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(max(p * (1 - p), 0.0) / n + z * z / (4 * n * n)) / denom
    # Clamp away float noise so the interval always contains p.
    return (max(0.0, min(centre - half, p)), min(1.0, max(centre + half, p)))


def wilson_cc_low(x: int, m: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval of x in m, its lower limit with the continuity correction
    (Newcombe 1998, method 4): without it a stratum's share near 0 (one disagreement in 20
    labels where the truth is 1 in 200) puts the lower limit above the truth about one run in
    ten; the upper limit needs none (the simulation's coverage is the same, 18% narrower)."""
    z = z_of(confidence)
    p = x / m
    denominator = 2 * (m + z * z)
    low = 0.0 if x == 0 else (2 * m * p + z * z - 1 - z * math.sqrt(
        max(z * z - 2 - 1 / m + 4 * p * (m * (1 - p) + 1), 0.0))) / denominator
    centre = (p + z * z / (2 * m)) / (1 + z * z / m)
    high = centre + z * math.sqrt(p * (1 - p) / m + z * z / (4 * m * m)) / (1 + z * z / m)
    return max(low, 0.0), min(high, 1.0)


# --- a mean of per-prompt fractions (--orbench-samples) -------------------------------------
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


# --- paired tests ---------------------------------------------------------------------------
# Above this many discordant pairs the exact binomial tail costs more than it is worth; the
# continuity-corrected normal approximation is then within 1e-3 of it.
EXACT_LIMIT = 2000


@dataclass(frozen=True)
class McNemar:
    """Exact (or, for many pairs, approximate) McNemar test on the discordant pairs (McNemar
    1947, Psychometrika 12:153-157; the exact form: a binomial test of b in b + c at 1/2, as
    scipy.stats.binomtest(b, b + c)).

    regressions: b, items wrong now and right before; improvements: c, the reverse.
    p_worse is one-sided: the chance of at least b regressions among b + c discordant pairs
    if the change made no difference (each discordant pair a fair coin).
    """

    regressions: int
    improvements: int
    p_worse: float
    p_two_sided: float
    exact: bool

    def significant_regression(self, confidence: float) -> bool:
        return self.regressions > self.improvements and self.p_worse < 1 - confidence

    def describe(self) -> str:
        method = "exact" if self.exact else "normal approx."
        return (f"McNemar {self.regressions} worse / {self.improvements} better, "
                f"one-sided p={self.p_worse:.3g} ({method})")


def mcnemar(regressions: int, improvements: int) -> McNemar:
    if regressions < 0 or improvements < 0:
        raise ValueError("counts must be >= 0")
    n = regressions + improvements
    if n == 0:
        return McNemar(0, 0, 1.0, 1.0, True)
    if n <= EXACT_LIMIT:
        upper = _binomial_upper_tail(regressions, n)
        lower = _binomial_upper_tail(n - regressions, n)  # P(X <= b) by symmetry of p = 1/2
        exact = True
    else:
        upper = _normal_tail(regressions, n)
        lower = _normal_tail(n - regressions, n)
        exact = False
    return McNemar(regressions, improvements, upper, min(1.0, 2 * min(upper, lower)), exact)


def _binomial_upper_tail(k: int, n: int) -> float:
    """P(X >= k) for X ~ Binomial(n, 1/2), in exact integer arithmetic."""
    total = sum(math.comb(n, i) for i in range(k, n + 1))
    return total / (1 << n)


def _normal_tail(k: int, n: int) -> float:
    """P(X >= k), normal approximation with continuity correction."""
    z = (k - 0.5 - n / 2) / math.sqrt(n / 4)
    return 0.5 * math.erfc(z / math.sqrt(2))


@dataclass(frozen=True, slots=True)
class SignedRank:
    """Wilcoxon's (1945, Biometrics Bulletin 1:80-83) signed-rank test over paired per-prompt
    differences (now − baseline of the
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


# --- agreement ------------------------------------------------------------------------------
def paired_difference(a: int, b: int, c: int, d: int,
                      confidence: float = 0.95) -> tuple[float, float, float]:
    """p1 − p2 for paired yes/no answers (p1 = (a+b)/n, p2 = (a+c)/n) with Tango's score
    interval (1998, Stat Med 17:891-908): every difference Δ whose score statistic, with the
    other cells at their maximum likelihood under Δ, stays within ±z. It keeps its width where
    disagreements are few or one-sided (±6 points with none in 60 labels, where Newcombe's
    hybrid gave ±0.6); chosen by simulation (`python -m benchmarks calibration --part check`).
    NaN for no pairs."""
    n = a + b + c + d
    if n == 0:
        return (math.nan, math.nan, math.nan)
    z = z_of(confidence)
    diff = (b - c) / n

    def score(delta: float) -> float:
        # q: the constrained MLE of the c cell's probability (the root of 2nq² + Wq − cΔ(1−Δ))
        w = -(b + c) + (2 * n - b + c) * delta
        q = (-w + math.sqrt(max(w * w + 8 * n * c * delta * (1 - delta), 0.0))) / (4 * n)
        spread = n * (2 * q + delta - delta * delta)
        if spread <= 0:
            return 0.0 if b - c == n * delta else math.copysign(math.inf, b - c - n * delta)
        return (b - c - n * delta) / math.sqrt(spread)

    def bound(inside: float, outside: float, level: float) -> float:
        if abs(score(outside)) <= z:
            return outside
        for _ in range(60):  # the score falls as Δ rises: bisect to where it crosses ±z
            middle = (inside + outside) / 2
            inside, outside = (middle, outside) if abs(score(middle)) <= level else \
                (inside, middle)
        return inside

    return (diff, bound(diff, -1.0, z), bound(diff, 1.0, z))


def newcombe_difference(a: int, b: int, c: int, d: int,
                        confidence: float = 0.95) -> tuple[float, float, float]:
    """Newcombe's hybrid score interval (1998, Stat Med 17:2635-2650, method 10), uncorrected:
    what judge-check used before Tango's; kept for the simulation that compares them."""
    n = a + b + c + d
    if n == 0:
        return (math.nan, math.nan, math.nan)
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = wilson_interval(a + b, n, confidence)
    l2, u2 = wilson_interval(a + c, n, confidence)
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    phi = (a * d - b * c) / math.sqrt(margins) if margins else 0.0
    diff = p1 - p2
    low = diff - math.sqrt(max((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2)
                               + (u2 - p2) ** 2, 0.0))
    high = diff + math.sqrt(max((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2)
                                + (p2 - l2) ** 2, 0.0))
    return (diff, max(low, -1.0), min(high, 1.0))


def cohen_kappa(truth: Sequence[object], pred: Sequence[object]) -> float:
    """Cohen's kappa (1960, Educ Psychol Meas 20:37-46): agreement beyond chance,
    (p_o − p_e) / (1 − p_e). 1.0 when both agree perfectly.

    When chance agreement is already 1 (both used one and the same class throughout), the
    labellers agree and kappa is defined as 1.0; NaN for no items.
    """
    if len(truth) != len(pred):
        raise ValueError(f"label sequences differ in length: {len(truth)} != {len(pred)}")
    n = len(truth)
    if n == 0:
        return float("nan")
    observed = sum(t == p for t, p in zip(truth, pred, strict=True)) / n
    ct, cp = Counter(truth), Counter(pred)
    expected = sum(ct[k] * cp.get(k, 0) for k in ct) / (n * n)
    if expected == 1.0:
        return 1.0
    return (observed - expected) / (1.0 - expected)


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Spearman's ρ (1904): Pearson's correlation of the ranks, ties sharing their mean rank
    (as scipy.stats.spearmanr); NaN when either side has a single rank, or under 2 points."""
    if len(xs) != len(ys):
        raise ValueError("xs and ys differ in length")
    if len(xs) < 2:
        return math.nan
    rx, ry = mid_ranks(xs), mid_ranks(ys)
    mean = (len(xs) + 1) / 2
    cov = sum((a - mean) * (b - mean) for a, b in zip(rx, ry, strict=True))
    var_x = sum((a - mean) ** 2 for a in rx)
    var_y = sum((b - mean) ** 2 for b in ry)
    if var_x == 0 or var_y == 0:
        return math.nan  # one of the rates is the same everywhere: no ranking to correlate
    return cov / math.sqrt(var_x * var_y)
