"""core/statistics.py, every formula: a published value (with its source) or a value computed
by hand, and Hypothesis properties. scipy is not a test dependency: the published values
below are the ones scipy's and the papers' own examples print."""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orbench_pytest.core.statistics import (
    EXACT_LIMIT,
    clustered_rate,
    cohen_kappa,
    mcnemar,
    mid_ranks,
    newcombe_difference,
    paired_difference,
    signed_rank,
    spearman,
    wilson_cc_low,
    wilson_interval,
    z_of,
)

confidences = st.sampled_from([0.8, 0.9, 0.95, 0.99])


# --- z ------------------------------------------------------------------------------------
def test_z_is_the_two_sided_normal_quantile() -> None:
    # Abramowitz & Stegun (1964), table 26.5: 1.959964 (97.5%), 2.575829 (99.5%).
    assert z_of(0.95) == pytest.approx(1.959964, abs=1e-6)
    assert z_of(0.99) == pytest.approx(2.575829, abs=1e-6)


# --- Wilson ------------------------------------------------------------------------------
@pytest.mark.parametrize(("k", "n", "wilson", "low_cc"), [
    (81, 263, (0.2553, 0.3662), 0.2535),
    (15, 148, (0.0624, 0.1605), 0.0598),
    (0, 20, (0.0, 0.1611), 0.0),
    (1, 29, (0.0061, 0.1718), 0.0018),
])
def test_wilson_matches_newcombe_1998_table(k: int, n: int, wilson: tuple[float, float],
                                            low_cc: float) -> None:
    """Newcombe, "Two-sided confidence intervals for the single proportion: comparison of
    seven methods", Stat Med 17:857-872 (1998), Table I: method 3 (Wilson's score interval)
    and the lower limit of method 4 (with continuity correction), at 95%."""
    low, high = wilson_interval(k, n)
    assert (round(low, 4), round(high, 4)) == wilson
    corrected_low, corrected_high = wilson_cc_low(k, n)
    assert round(corrected_low, 4) == low_cc
    assert corrected_high == pytest.approx(high)  # only the lower limit is corrected


def test_wilson_matches_a_textbook_value() -> None:
    # 3 of 20 at 95%: the textbook Wilson interval is 0.0524–0.3604.
    low, high = wilson_interval(3, 20, 0.95)
    assert round(low, 4) == 0.0524 and round(high, 4) == 0.3604


@given(st.integers(0, 500).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))),
       confidences)
def test_wilson_contains_point_estimate(kn: tuple[int, int], confidence: float) -> None:
    k, n = kn
    low, high = wilson_interval(k, n, confidence)
    assert 0.0 <= low <= high <= 1.0
    if n:
        assert low <= k / n <= high
        # k successes are n − k failures: the interval mirrors about 1/2
        mirror_low, mirror_high = wilson_interval(n - k, n, confidence)
        assert (low, high) == pytest.approx((1 - mirror_high, 1 - mirror_low), abs=1e-12)


@given(st.floats(0.0, 1.0), st.integers(1, 200))
def test_wilson_narrows_as_n_grows(p: float, n: int) -> None:
    k_small, k_large = round(p * n), round(p * n * 4)
    low_s, high_s = wilson_interval(k_small, n)
    low_l, high_l = wilson_interval(k_large, n * 4)
    assert high_l - low_l <= high_s - low_s + 1e-9


@given(st.integers(1, 300).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_the_continuity_correction_only_lowers_the_lower_limit(kn: tuple[int, int]) -> None:
    low, _ = wilson_interval(*kn)
    corrected, _ = wilson_cc_low(*kn)
    assert 0.0 <= corrected <= low + 1e-12


def test_no_trials_is_the_whole_unit_interval() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)


# --- the clustered rate (--orbench-samples) ----------------------------------------------
@given(st.lists(st.booleans(), min_size=1, max_size=200), confidences)
def test_one_sample_per_prompt_is_exactly_wilson(outcomes: list[bool],
                                                 confidence: float) -> None:
    rate = clustered_rate([float(o) for o in outcomes], len(outcomes), confidence)
    low, high = wilson_interval(sum(outcomes), len(outcomes), confidence)
    assert rate.n_effective == len(outcomes)
    assert (rate.low, rate.high) == pytest.approx((low, high), abs=1e-12)


@given(st.lists(st.integers(0, 5), min_size=1, max_size=60))
def test_interval_holds_the_mean_between_prompt_and_answer_wilson(refusals: list[int]) -> None:
    fractions = [r / 5 for r in refusals]
    rate = clustered_rate(fractions, 5 * len(fractions))
    assert rate.low <= rate.mean <= rate.high
    assert len(fractions) <= rate.n_effective <= 5 * len(fractions)


def test_the_design_effect_by_hand() -> None:
    # Kish (1965), Survey Sampling: n_eff = p(1 − p) / var(mean). Four prompts at 0, 0, 1/2,
    # 1/2: mean 1/4, var(mean) = Σ(f − 1/4)² / n² = 0.25 / 16, so n_eff = 0.1875 / 0.015625.
    rate = clustered_rate([0.0, 0.0, 0.5, 0.5], 20)  # of five answers each
    assert rate.n_effective == pytest.approx(12.0)
    assert (rate.low, rate.high) == pytest.approx(wilson_interval(3, 12))  # 0.25 of 12
    assert clustered_rate([0.0, 0.0, 0.5, 0.5], 8).n_effective == 8  # never past the answers


def test_the_interval_covers_the_true_rate_about_95_percent() -> None:
    """Prompts with their own refusal probabilities (clusters), five answers each."""
    rng = random.Random(17)
    covered = 0
    runs = 400
    for _ in range(runs):
        probabilities = [rng.choice([0.0, 0.05, 0.3, 0.6, 1.0]) for _ in range(30)]
        fractions = [sum(rng.random() < p for _ in range(5)) / 5 for p in probabilities]
        rate = clustered_rate(fractions, 150)
        # The target is the mean over the prompt population these were drawn from.
        population = (0.0 + 0.05 + 0.3 + 0.6 + 1.0) / 5
        covered += rate.low <= population <= rate.high
    assert 0.90 <= covered / runs <= 0.99


# --- McNemar -----------------------------------------------------------------------------
@pytest.mark.parametrize(("b", "c", "p_worse", "p_two"), [
    (0, 0, Fraction(1), Fraction(1)),
    (1, 0, Fraction(1, 2), Fraction(1)),
    (5, 0, Fraction(1, 32), Fraction(1, 16)),  # all 5 discordant pairs got worse
    (8, 2, Fraction(45 + 10 + 1, 1024), Fraction(2 * 56, 1024)),  # C(10,8)+C(10,9)+C(10,10)
    (2, 8, Fraction(1024 - 1 - 10, 1024), Fraction(2 * 56, 1024)),
    (3, 3, Fraction(1 + 6 + 15 + 20, 64), Fraction(1)),
])
def test_mcnemar_matches_hand_computed_binomial_tails(b: int, c: int, p_worse: Fraction,
                                                      p_two: Fraction) -> None:
    """The exact test is a binomial test of b in b + c at 1/2 (as scipy.stats.binomtest)."""
    test = mcnemar(b, c)
    assert test.exact
    assert test.p_worse == pytest.approx(float(p_worse), abs=1e-12)
    assert test.p_two_sided == pytest.approx(float(p_two), abs=1e-12)


def test_mcnemar_significance_needs_more_regressions_than_fixes() -> None:
    assert mcnemar(5, 0).significant_regression(0.95)  # p = 1/32 < 0.05
    assert not mcnemar(8, 2).significant_regression(0.95)  # p = 0.0547
    assert mcnemar(8, 2).significant_regression(0.90)
    assert not mcnemar(0, 9).significant_regression(0.95)


def test_normal_approximation_is_close_to_the_exact_tail_beyond_the_limit() -> None:
    b, c = 1100, EXACT_LIMIT + 1 - 1100
    n = b + c
    exact = sum(math.comb(n, i) for i in range(b, n + 1)) / 2**n
    approx = mcnemar(b, c)
    assert not approx.exact
    assert approx.p_worse == pytest.approx(exact, abs=1e-3)


@given(st.integers(0, 60), st.integers(0, 60))
def test_mcnemar_p_values_are_probabilities_and_symmetric(b: int, c: int) -> None:
    forward, backward = mcnemar(b, c), mcnemar(c, b)
    assert 0 <= forward.p_worse <= 1 and 0 <= forward.p_two_sided <= 1
    assert forward.p_two_sided == pytest.approx(backward.p_two_sided)
    if b + c:
        # P(X >= b) + P(X >= c) = 1 + P(X = b) for b + c = n trials of a fair coin.
        point = math.comb(b + c, b) / 2 ** (b + c)
        assert forward.p_worse + backward.p_worse == pytest.approx(1 + point)


def test_mcnemar_refuses_negative_counts() -> None:
    with pytest.raises(ValueError, match=">= 0"):
        mcnemar(-1, 2)


# --- Wilcoxon's signed rank ----------------------------------------------------------------
def test_signed_rank_matches_darwins_plants() -> None:
    """Fisher (1935), The Design of Experiments, §17: Darwin's 15 paired differences in
    plant height; scipy.stats.wilcoxon(d, alternative="greater") gives W+ = 96 and the exact
    p = 0.0206298828125 (scipy's documented example)."""
    d = [6, 8, 14, 16, 23, 24, 28, 29, 41, -48, 49, 56, 60, -67, 75]
    test = signed_rank(d)
    assert test.exact and (test.worse, test.better) == (13, 2)
    assert test.w_plus == 96
    assert test.p_worse == pytest.approx(0.0206298828125, abs=1e-12)


@given(st.lists(st.sampled_from([-0.4, -0.2, 0.0, 0.2, 0.4, 0.6]), min_size=1, max_size=10))
def test_signed_rank_exact_p_matches_enumeration(differences: list[float]) -> None:
    test = signed_rank(differences)
    nonzero = [d for d in differences if d != 0]
    if not nonzero:
        assert test.p_worse == 1.0
        return
    ranks = sorted(abs(d) for d in nonzero)

    def rank(value: float) -> float:
        positions = [i + 1 for i, r in enumerate(ranks) if r == value]
        return sum(positions) / len(positions)

    observed = sum(rank(abs(d)) for d in nonzero if d > 0)
    hits = sum(sum(rank(abs(d)) for d, sign in zip(nonzero, signs, strict=True) if sign)
               >= observed - 1e-9
               for signs in itertools.product([False, True], repeat=len(nonzero)))
    assert test.p_worse == pytest.approx(hits / 2 ** len(nonzero))


def test_signed_rank_normal_approximation_is_close_to_exact_at_the_switch() -> None:
    rng = random.Random(3)
    differences = [rng.choice([-0.4, -0.2, 0.2, 0.4, 0.6]) for _ in range(21)]
    approx = signed_rank(differences)
    exact = signed_rank(differences[:20])
    assert not approx.exact and exact.exact
    assert abs(approx.p_worse - exact.p_worse) < 0.15


@given(st.lists(st.integers(-5, 5), max_size=40))
def test_mid_ranks_sum_to_the_ranks_and_ties_share_them(values: list[int]) -> None:
    ranks = mid_ranks([float(v) for v in values])
    n = len(values)
    assert sum(ranks) == pytest.approx(n * (n + 1) / 2)
    for (a, ra), (b, rb) in itertools.combinations(zip(values, ranks, strict=True), 2):
        assert (ra == rb) if a == b else ((ra < rb) == (a < b))


# --- paired proportions (judge-check) -------------------------------------------------------
@given(st.integers(0, 40), st.integers(0, 40), st.integers(0, 40), st.integers(0, 40))
def test_paired_difference_interval_holds_the_estimate(a: int, b: int, c: int, d: int) -> None:
    diff, low, high = paired_difference(a, b, c, d)
    if a + b + c + d == 0:
        assert math.isnan(diff)
        return
    assert diff == pytest.approx((b - c) / (a + b + c + d))
    assert -1.0 <= low <= diff + 1e-12 and diff - 1e-12 <= high <= 1.0
    mirrored = paired_difference(a, c, b, d)
    assert mirrored[0] == pytest.approx(-diff)
    assert (mirrored[1], mirrored[2]) == pytest.approx((-high, -low))


@given(st.integers(0, 30), st.integers(0, 30), st.integers(0, 30), st.integers(0, 30))
def test_newcombes_hybrid_holds_the_estimate(a: int, b: int, c: int, d: int) -> None:
    diff, low, high = newcombe_difference(a, b, c, d)
    if a + b + c + d == 0:
        assert math.isnan(diff)
        return
    assert -1.0 <= low <= diff + 1e-12 and diff - 1e-12 <= high <= 1.0


def test_paired_difference_keeps_its_width_without_disagreements() -> None:
    # 60 labels, judge and people agree on every one: Tango's interval is about ±6 points.
    diff, low, high = paired_difference(20, 0, 0, 40)
    assert diff == 0.0 and -0.07 < low < -0.05 and 0.05 < high < 0.07


def test_paired_difference_covers_the_true_difference_at_about_95_percent() -> None:
    # 60 answers labelled by people and a judge with known joint probabilities
    rng = random.Random(11)
    cells = (0.30, 0.06, 0.10, 0.54)  # both refuse, judge only, people only, neither
    truth = cells[1] - cells[2]
    runs, covered = 600, 0
    for _ in range(runs):
        counts = [0, 0, 0, 0]
        for _ in range(60):
            counts[rng.choices(range(4), cells)[0]] += 1
        _, low, high = paired_difference(*counts)
        covered += low <= truth <= high
    assert 0.92 <= covered / runs <= 0.99


# --- Cohen's kappa -------------------------------------------------------------------------
def test_kappa_textbook_value() -> None:
    # 50 items: yes/yes 20, yes/no 5, no/yes 10, no/no 15 -> po 0.7, pe 0.5, kappa 0.4
    # (the worked example of Cohen's kappa in Wikipedia and most textbooks)
    truth = ["y"] * 25 + ["n"] * 25
    pred = ["y"] * 20 + ["n"] * 5 + ["y"] * 10 + ["n"] * 15
    assert cohen_kappa(truth, pred) == pytest.approx(0.4)


def test_kappa_of_opposite_binary_labels_is_minus_one() -> None:
    assert cohen_kappa([True, False] * 5, [False, True] * 5) == pytest.approx(-1.0)


def test_kappa_of_no_items_is_nan_and_of_unequal_lengths_an_error() -> None:
    assert math.isnan(cohen_kappa([], []))
    with pytest.raises(ValueError, match="length"):
        cohen_kappa(["c"], ["c", "r"])


@given(st.lists(st.sampled_from(["c", "r", "p"]), min_size=1, max_size=60))
def test_kappa_of_identical_labels_is_one(xs: list[str]) -> None:
    assert cohen_kappa(xs, xs) == pytest.approx(1.0)


@given(st.lists(st.tuples(st.sampled_from("crp"), st.sampled_from("crp")), min_size=1))
def test_kappa_is_symmetric_and_at_most_one(pairs: list[tuple[str, str]]) -> None:
    a, b = [x for x, _ in pairs], [y for _, y in pairs]
    assert cohen_kappa(a, b) == pytest.approx(cohen_kappa(b, a))
    assert cohen_kappa(a, b) <= 1.0 + 1e-12


# --- Spearman ------------------------------------------------------------------------------
def test_spearman_matches_a_published_example() -> None:
    # IQ against hours of television a week, ten people: ρ = −29/165 (the worked example of
    # Spearman's rank correlation coefficient in Wikipedia; scipy.stats.spearmanr agrees).
    iq = [106, 100, 86, 101, 99, 103, 97, 113, 112, 110]
    tv = [7, 27, 2, 50, 28, 29, 20, 12, 6, 17]
    assert spearman(iq, tv) == pytest.approx(-29 / 165)


def test_spearman_by_hand() -> None:
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # Ranks x: 1 2 3 4, y: 1 3 2 4 → d² = 0 1 1 0 → ρ = 1 − 6·2 / (4·15) = 0.8
    assert spearman([1, 2, 3, 4], [5, 7, 6, 8]) == pytest.approx(0.8)
    # Ties share their mean rank: y ranks 1.5 1.5 3 → Pearson of (1,2,3) and (1.5,1.5,3).
    assert spearman([1, 2, 3], [7, 7, 9]) == pytest.approx(0.8660254, abs=1e-6)
    assert math.isnan(spearman([1, 2, 3], [5, 5, 5]))  # no ranking on one side
    assert math.isnan(spearman([1.0], [2.0]))


@given(st.lists(st.integers(-1000, 1000), min_size=3, max_size=30, unique=True))
def test_spearman_is_one_for_any_increasing_map(xs: list[int]) -> None:
    assert spearman(xs, [2 * x + 1 for x in xs]) == pytest.approx(1.0)
    assert spearman(xs, [-x for x in xs]) == pytest.approx(-1.0)


@given(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9)), min_size=2, max_size=30))
def test_spearman_is_a_symmetric_correlation(pairs: list[tuple[int, int]]) -> None:
    xs, ys = [float(x) for x, _ in pairs], [float(y) for _, y in pairs]
    rho = spearman(xs, ys)
    if not math.isnan(rho):
        assert -1.0 - 1e-12 <= rho <= 1.0 + 1e-12
        assert spearman(ys, xs) == pytest.approx(rho)
