"""Unit tests of the sampling core: keys, the refuse_at rule (the clustered interval and
Wilcoxon's test: test_statistics.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.types import Label, Verdict
from orbench_pytest.gate.samples import refused_by_rule, sample_key
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


