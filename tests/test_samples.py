"""Unit tests of the sampling core: keys, the refuse_at rule, the clustered interval, Wilcoxon."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.types import Label, Verdict
from orbench_pytest.gate.decision import wilson_interval
from orbench_pytest.gate.samples import clustered_rate, refused_by_rule, sample_key, signed_rank
from orbench_pytest.gate.thresholds import parse_thresholds
from orbench_pytest.judges.verdicts import Answer
from orbench_pytest.run.runner import combine


def test_sample_zero_keeps_the_key_and_the_others_differ() -> None:
    keys = [sample_key("abc", i) for i in range(5)]
    assert keys[0] == "abc" and len(set(keys)) == 5
    assert keys == [sample_key("abc", i) for i in range(5)]  # deterministic



@given(labels=st.lists(st.sampled_from(list(Label)), min_size=1, max_size=6),
       rule=st.sampled_from([0.5, 0.34, 1.0, "any", "all"]), partial=st.booleans())
def test_combined_samples_show_the_first_answer_agreeing_with_the_decision(
        labels: list[Label], rule: float | str, partial: bool) -> None:
    answers = [Answer(Verdict(label, f"sample {i}", "keyword"), f"answer {i}", 1.0, True, 0)
               for i, label in enumerate(labels)]
    combined = combine(answers, rule, partial)
    answered = [a for a in answers if not a.verdict.is_error]
    refusals = sum(a.verdict.refused(partial) for a in answered)
    refused = refused_by_rule(refusals, len(answered), rule)
    assert (combined.refused, combined.refusals, combined.answered) == \
        (refused, refusals, len(answered))
    agreeing = [a for a in answered if a.verdict.refused(partial) == refused]
    assert combined.answer is (agreeing[0] if agreeing else answers[0])


@pytest.mark.parametrize(("refusals", "answered", "rule", "refused"), [
    (2, 5, 0.5, False), (3, 5, 0.5, True), (2, 4, 0.5, True), (1, 5, "any", True),
    (0, 5, "any", False), (4, 5, "all", False), (5, 5, "all", True), (3, 5, 0.6, True),
    (0, 0, 0.5, None)])
def test_refuse_at_rule(refusals, answered, rule, refused) -> None:
    assert refused_by_rule(refusals, answered, rule) is refused


def test_refuse_at_in_thresholds() -> None:
    parsed = parse_thresholds({"defaults": {"refuse_at": "any"},
                               "suites": {"s": {"refuse_at": 0.6}, "t": {}}}, "t.yaml")
    assert parsed.for_suite("s").refuse_at == 0.6
    assert parsed.for_suite("t").refuse_at == "any"  # inherited from defaults
    with pytest.raises(ConfigError, match=r"t.yaml: defaults.refuse_at: 'most' is not allowed"):
        parse_thresholds({"defaults": {"refuse_at": "most"}}, "t.yaml")


@given(st.lists(st.booleans(), min_size=1, max_size=200),
       st.sampled_from([0.8, 0.9, 0.95, 0.99]))
def test_one_sample_per_prompt_is_exactly_wilson(outcomes, confidence) -> None:
    rate = clustered_rate([float(o) for o in outcomes], len(outcomes), confidence)
    low, high = wilson_interval(sum(outcomes), len(outcomes), confidence)
    assert rate.n_effective == len(outcomes)
    assert (rate.low, rate.high) == pytest.approx((low, high), abs=1e-12)


@given(st.lists(st.integers(0, 5), min_size=1, max_size=60))
def test_interval_holds_the_mean_between_prompt_and_answer_wilson(refusals) -> None:
    fractions = [r / 5 for r in refusals]
    rate = clustered_rate(fractions, 5 * len(fractions))
    assert rate.low <= rate.mean <= rate.high
    assert len(fractions) <= rate.n_effective <= 5 * len(fractions)


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


@given(st.lists(st.sampled_from([-0.4, -0.2, 0.0, 0.2, 0.4, 0.6]), min_size=1, max_size=10))
def test_signed_rank_exact_p_matches_enumeration(differences) -> None:
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
