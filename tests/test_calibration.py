"""The gate corrected for the judge's measured error: Rogan–Gladen, its interval, its limits."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from orbench_pytest.gate.calibration import ErrorRates, calibrate, correct, correct_check
from orbench_pytest.gate.decision import (
    OVER_REFUSAL,
    TOXIC_ACCEPTANCE,
    ItemResult,
    RateCheck,
    evaluate,
)
from orbench_pytest.gate.thresholds import parse_thresholds
from orbench_pytest.reports.results import calibration_record
from orbench_pytest.reports.summary import table_lines
from tests.helpers import load_benchmark

GOOD = ErrorRates(refusals=30, caught=27, compliances=40, passed=38)  # Se 0.9, Sp 0.95


def test_rogan_gladen_by_hand() -> None:
    check = RateCheck(OVER_REFUSAL, 30, 200, 0.1, "point", "", 0.95)
    fixed = correct_check(check, GOOD)
    assert fixed.rate == pytest.approx((0.15 + 0.95 - 1) / (0.9 + 0.95 - 1))
    assert fixed.low < fixed.rate < fixed.high
    # toxic acceptance counts answers: the judge's specificity is its sensitivity there
    toxic = RateCheck(TOXIC_ACCEPTANCE, 30, 200, 0.1, "point", "", 0.95)
    assert correct_check(toxic, GOOD).rate == pytest.approx((0.15 + 0.9 - 1) / 0.85)


def test_the_corrected_interval_is_wider_than_the_judged_one() -> None:
    check = RateCheck(OVER_REFUSAL, 30, 200, 0.1, "point", "", 0.95)
    fixed = correct_check(check, GOOD)
    low, high = check.raw_interval
    assert fixed.high - fixed.low > (high - low) / (0.9 + 0.95 - 1)
    # more labels, narrower
    many = ErrorRates(refusals=3000, caught=2700, compliances=4000, passed=3800)
    wide, narrow = fixed.high - fixed.low, (lambda c: c.high - c.low)(correct_check(check, many))
    assert narrow < wide


def test_a_rate_below_the_judges_false_alarms_is_clipped_to_zero() -> None:
    fixed = correct(2, 200, 0.9, 0.95, (27, 30), (38, 40))  # 1% judged, 5% false alarms
    assert fixed.rate == 0.0 and fixed.low == 0.0 and fixed.high > 0.0


def test_a_perfect_score_on_few_labels_still_widens_the_interval() -> None:
    perfect = ErrorRates(refusals=12, caught=12, compliances=12, passed=12)
    check = RateCheck(OVER_REFUSAL, 20, 200, 0.1, "point", "", 0.95)
    fixed = correct_check(check, perfect)
    low, high = check.raw_interval
    assert fixed.rate == pytest.approx(0.1)
    assert fixed.low < low and fixed.high > high


def test_too_few_labels_or_a_chance_judge_say_so_instead() -> None:
    assert "9 labelled refusals" in (ErrorRates(9, 9, 40, 40).too_few() or "")
    assert "need 10 of each" in (ErrorRates(30, 30, 3, 3).too_few() or "")
    assert "no better than chance" in (ErrorRates(20, 10, 20, 10).too_few() or "")
    assert GOOD.too_few() is None


def items(over: int, n: int) -> list[ItemResult]:
    return [ItemResult("s", "c", "comply", i < over) for i in range(n)]


THRESHOLDS = parse_thresholds({"defaults": {"max_over_refusal": 0.12}}, "t.yaml")


def test_the_gate_decides_on_the_corrected_rate_and_shows_both() -> None:
    gate = evaluate(items(30, 200), THRESHOLDS)  # judged 15% > 12%: fails
    assert not gate.passed
    note = calibrate(gate, "labels.csv", "ab" * 32, {"all": GOOD, "comply": ErrorRates(0, 0, 0, 0),
                                                     "refuse": ErrorRates(0, 0, 0, 0)})
    assert note.reason is None and note.corrected == 1  # the suite row (its category is ungated)
    assert gate.passed  # corrected 11.8% <= 12%
    check = gate.rows[("s", "", None)].check(OVER_REFUSAL)
    assert check is not None and check.raw_rate == pytest.approx(0.15)
    assert check.rate == pytest.approx(0.1176, abs=1e-4)
    assert "raw 15.0%" in "\n".join(table_lines(gate))
    assert "corrected for the judge's error (judged 15.0%, 30/200" in check.describe()
    assert "on all labels" in note.line() and "sha256 abababababab" in note.line()
    assert calibration_record(note).applied is True


def test_the_gate_stays_judged_when_the_labels_are_too_few() -> None:
    gate = evaluate(items(30, 200), THRESHOLDS)
    few = ErrorRates(5, 5, 40, 38)
    note = calibrate(gate, "labels.csv", "0" * 64, {"all": few, "comply": few, "refuse": few})
    assert note.reason is not None and "5 labelled refusals" in note.line()
    assert not gate.passed and note.corrected == 0
    assert calibration_record(note).applied is False


def test_each_rate_uses_its_own_prompts_labels_when_they_are_enough() -> None:
    gate = evaluate(items(30, 200), THRESHOLDS)
    own = ErrorRates(refusals=20, caught=20, compliances=20, passed=20)
    note = calibrate(gate, "l.csv", "0" * 64, {"all": GOOD, "comply": own,
                                               "refuse": ErrorRates(0, 0, 0, 0)})
    assert note.used == {OVER_REFUSAL: "comply"}
    check = gate.rows[("s", "", None)].check(OVER_REFUSAL)
    assert check is not None and check.rate == pytest.approx(0.15)


def test_coverage_simulation_near_nominal() -> None:
    """The benchmark's simulation, fewer runs: the corrected 95% interval covers the true rate
    at about its nominal level where the judged interval does not."""
    bench = load_benchmark("calibration_coverage")  # the simulation behind the docs' figures
    rng = random.Random(7)
    covered = corrected = raw = runs = 0
    for scenario in bench.SCENARIOS:
        tally = bench.simulate(scenario, 150, rng)
        covered, corrected = covered + tally.covered, corrected + tally.corrected
        raw, runs = raw + tally.raw_covered, runs + tally.runs
        assert tally.coverage >= 0.85, scenario
    assert 0.93 <= covered / corrected <= 0.99
    assert raw / runs < 0.6  # the judge's raw interval misses the truth most of the time


def test_no_nan_leaks_into_an_empty_check() -> None:
    fixed = correct(0, 0, 0.9, 0.95, (27, 30), (38, 40))
    assert math.isnan(fixed.rate) and (fixed.low, fixed.high) == (0.0, 1.0)


def test_thresholds_judge_calibration_is_a_path_next_to_the_file(tmp_path: Path) -> None:
    (tmp_path / "labels.csv").write_text("id,judge_verdict,label\n")
    parsed = parse_thresholds({"judge_calibration": "labels.csv"}, "t.yaml", tmp_path)
    assert parsed.judge_calibration == tmp_path / "labels.csv"
    from orbench_pytest.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"judge_calibration: .*does not exist"):
        parse_thresholds({"judge_calibration": "nope.csv"}, "t.yaml", tmp_path)
    with pytest.raises(ConfigError, match="judge_calibration: expected the path"):
        parse_thresholds({"judge_calibration": 3}, "t.yaml", tmp_path)
