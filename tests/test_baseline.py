"""Baseline comparison: pairing, the gate's regression check, the plugin (McNemar's test:
test_statistics.py)."""

from __future__ import annotations

import json

import pytest

from orbench_pytest.gate.baseline import Baseline, Pairing, compare
from orbench_pytest.gate.decision import ItemResult, Outcome, evaluate
from orbench_pytest.gate.thresholds import parse_thresholds
from tests.helpers import SAFE, TOXIC, mini_suite, refusing, run_orbench, write_thresholds

# --- pairing ----------------------------------------------------------------------------------
BASE = Baseline("old.json", {("s", "", "a"): True, ("s", "", "b"): False,
                             ("s", "", "c"): True, ("s", "", "d"): False,
                             ("s", "", "e"): None})


@pytest.mark.parametrize(("case", "mismatch", "expected"), [
    ("a", True, Pairing.KNOWN),
    ("b", True, Pairing.REGRESSION),
    ("c", False, Pairing.FIXED),
    ("d", False, Pairing.SAME),
    ("e", True, Pairing.UNPAIRED),  # no answer in the baseline
    ("b", None, Pairing.UNPAIRED),  # no answer now
    ("new", True, Pairing.UNPAIRED),  # not in the baseline
])
def test_pairing_of_an_item(case: str, mismatch: bool | None, expected: Pairing) -> None:
    assert BASE.pairing(("s", "", case), mismatch) is expected


def test_variants_pair_with_a_baseline_run_without_variants() -> None:
    assert BASE.pairing(("s", "strict", "b"), True) is Pairing.REGRESSION
    with_variants = Baseline("v.json", {("s", "x", "b"): False})
    assert with_variants.pairing(("s", "x", "b"), True) is Pairing.REGRESSION
    assert with_variants.pairing(("s", "y", "b"), True) is Pairing.UNPAIRED


def test_comparison_counts_only_paired_items() -> None:
    current = [(("s", "", "a"), True), (("s", "", "b"), True), (("s", "", "c"), False),
               (("s", "", "d"), False), (("s", "", "e"), False), (("s", "", "z"), True)]
    comparison = compare(current, BASE)
    assert comparison.paired == 4 and comparison.unpaired == 2
    assert comparison.known == [("s", "", "a")]
    assert comparison.regressions == [("s", "", "b")]
    assert comparison.fixed == [("s", "", "c")]
    assert "4 items paired (2 unpaired)" in comparison.describe()


# --- the gate with a baseline -------------------------------------------------------------------
def _items(regressions: int, fixed: int, known: int, same: int) -> list[ItemResult]:
    items = [ItemResult("s", "cat", "comply", True, "", Pairing.REGRESSION)] * regressions
    items += [ItemResult("s", "cat", "comply", False, "", Pairing.FIXED)] * fixed
    items += [ItemResult("s", "cat", "comply", True, "", Pairing.KNOWN)] * known
    items += [ItemResult("s", "cat", "comply", False, "", Pairing.SAME)] * same
    return items


def _gate(items: list[ItemResult], suite_limits: dict,
          baseline_rate: float | None = None) -> tuple:
    thresholds = parse_thresholds({"suites": {"s": suite_limits}}, "thresholds.yaml")
    rates = ({("s", "", None): {"over-refusal": baseline_rate}} if baseline_rate is not None
             else None)
    gate = evaluate(items, thresholds, baseline_source="old.json", baseline_rates=rates)
    return gate, {pairing: gate.outcome(item) for item in items
                  for pairing in [item.baseline]}


def test_known_mismatch_xfails_and_new_one_fails_as_regression() -> None:
    gate, outcomes = _gate(_items(1, 0, 2, 20), {"max_over_refusal": 0.5, "max_regressions": 0})
    assert outcomes[Pairing.KNOWN][0] is Outcome.TOLERATED
    assert outcomes[Pairing.KNOWN][1].startswith("known: mismatched in the baseline too")
    assert outcomes[Pairing.REGRESSION][0] is Outcome.FAILED
    assert outcomes[Pairing.REGRESSION][1].startswith("regression:")
    assert not gate.passed
    assert any("regressions 1" in line for line in gate.failures())


def test_max_regressions_unset_is_no_count_limit_under_either_decision() -> None:
    """Issue 31: unset max_regressions was 0 under `point` and unset under `significant`;
    it is now no count limit under both (one flip no longer fails a better change)."""
    for decision in ("point", "significant"):
        # 2 worse, 4 better: p = 0.891, the change is better overall
        gate, outcomes = _gate(_items(2, 4, 0, 20),
                               {"max_over_refusal": 0.5, "decision": decision})
        assert outcomes[Pairing.REGRESSION][0] is Outcome.TOLERATED and gate.passed, decision
        row = gate.rows[("s", "", None)]
        assert row.regression is not None and "no count limit" in row.regression.describe()


def test_max_regressions_tolerates_a_few_new_mismatches() -> None:
    gate, outcomes = _gate(_items(2, 0, 0, 20), {"max_over_refusal": 0.5, "max_regressions": 2})
    assert outcomes[Pairing.REGRESSION][0] is Outcome.TOLERATED
    assert gate.passed
    gate, outcomes = _gate(_items(3, 0, 0, 20), {"max_over_refusal": 0.5, "max_regressions": 2})
    assert outcomes[Pairing.REGRESSION][0] is Outcome.FAILED


def test_significant_decision_fails_only_a_significant_regression() -> None:
    # 3 worse, 1 better: p = 5/16, noise.
    gate, outcomes = _gate(_items(3, 1, 0, 20),
                           {"max_over_refusal": 0.5, "decision": "significant"})
    assert outcomes[Pairing.REGRESSION][0] is Outcome.TOLERATED and gate.passed
    # 6 worse, 0 better: p = 1/64 < 0.05.
    gate, outcomes = _gate(_items(6, 0, 0, 20),
                           {"max_over_refusal": 0.5, "decision": "significant"})
    assert outcomes[Pairing.REGRESSION][0] is Outcome.FAILED and not gate.passed
    assert "McNemar 6 worse / 0 better" in outcomes[Pairing.REGRESSION][1]


def test_rate_over_its_limit_fails_with_a_baseline_unless_the_suite_ratchets() -> None:
    """Issue 31: a known mismatch never hides an absolute limit; `baseline: ratchet` allows a
    rate over its limit while it is not above the baseline's, and says so."""
    gate, outcomes = _gate(_items(0, 0, 5, 5), {"max_over_refusal": 0.1}, baseline_rate=0.5)
    assert outcomes[Pairing.KNOWN][0] is Outcome.FAILED
    assert "known: mismatched in the baseline too" in outcomes[Pairing.KNOWN][1]
    assert "over-refusal 50.0% (5/10" in outcomes[Pairing.KNOWN][1]
    assert not gate.passed
    ratchet = {"max_over_refusal": 0.1, "baseline": "ratchet"}
    gate, outcomes = _gate(_items(0, 0, 5, 5), ratchet, baseline_rate=0.5)
    assert outcomes[Pairing.KNOWN][0] is Outcome.TOLERATED
    assert outcomes[Pairing.KNOWN][1].endswith(
        "over-refusal over its limit (50.0% > 10.0%), allowed by ratchet: the baseline was 50.0%")
    assert gate.passed and gate.rows[("s", "", None)].verdict == "ratchet"
    # Above the baseline's rate the ratchet no longer allows it, and the rate is named.
    gate, outcomes = _gate(_items(1, 0, 5, 5), {**ratchet, "max_regressions": 3},
                           baseline_rate=0.5)
    assert outcomes[Pairing.REGRESSION][0] is Outcome.FAILED
    assert "above the baseline's 50.0% (ratchet)" in outcomes[Pairing.REGRESSION][1]
    assert not gate.passed
    # A ratchet without a baseline row (a suite the baseline did not run) is absolute.
    gate, _ = _gate(_items(0, 0, 5, 5), ratchet)
    assert not gate.passed


# --- the plugin ---------------------------------------------------------------------------------
def test_baseline_run_marks_known_regressions_and_fixes(pytester, plugin_args) -> None:
    mini_suite(pytester.path, {"defaults": {"max_over_refusal": 0.5,
                                            "max_toxic_acceptance": 0.5,
                                            "max_regressions": 0}})
    # Baseline: over-refuses SAFE[0] and SAFE[1].
    run_orbench(pytester, plugin_args, "--orbench-results=base.json", "--orbench-cache=off",
                serve=refusing([SAFE[0], SAFE[1], *TOXIC]))
    # Now: SAFE[0] still (known), SAFE[1] fixed, SAFE[2] new (regression).
    result = run_orbench(pytester, plugin_args, "--orbench-baseline=base.json",
                         "--orbench-results=new.json", "--orbench-cache=off", "-rxf",
                         serve=refusing([SAFE[0], SAFE[2], *TOXIC]))
    result.assert_outcomes(passed=7, xfailed=1, failed=1)
    result.stdout.fnmatch_lines([
        "baseline base.json: 9 items paired (0 unpaired): 1 regressions, 1 fixed, 1 known",
        "  mini: regressions 1 (fixed 1, of 9 paired; McNemar 1 worse / 1 better, "
        "one-sided p=0.75 (exact)) > 0 — FAIL",
        "  regressions (1): mini[[]violence-0002[]]",
        "  fixed (1): mini[[]privacy-0001[]]",
        "XFAIL*mini[[]violence-0000[]] - known: mismatched in the baseline too (base.json)",
        "FAILED*mini[[]violence-0002[]]*",
    ])
    assert "regression: not in the baseline's mismatches" in result.stdout.str()
    assert result.ret == 1
    data = json.loads((pytester.path / "new.json").read_text())
    assert data["baseline"]["regressions"] == ["mini[violence-0002]"]
    assert data["baseline"]["fixed"] == ["mini[privacy-0001]"]
    assert (data["baseline"]["paired"], data["baseline"]["known"]) == (9, 1)
    (group,) = data["baseline"]["groups"]
    assert (group["suite"], group["regressions"], group["fixed"]) == ("mini", 1, 1)
    assert group["mcnemar"]["p_worse"] == pytest.approx(0.75)  # P(X >= 1), X ~ Bin(2, 1/2)
    by_id = {item["id"]: item["baseline"] for item in data["items"]}
    assert by_id["mini[violence-0000]"] == "known" and by_id["mini[privacy-0003]"] == "same"


def test_missing_baseline_file_is_a_usage_error(pytester, plugin_args) -> None:
    mini_suite(pytester.path)
    result = run_orbench(pytester, plugin_args, "--orbench-baseline=nope.json",
                         serve=refusing(TOXIC))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--orbench-baseline:" in result.stderr.str()


def test_baseline_that_is_not_a_results_file_is_a_usage_error(pytester, plugin_args) -> None:
    mini_suite(pytester.path)
    (pytester.path / "old.json").write_text('{"hello": 1}')
    result = run_orbench(pytester, plugin_args, "--orbench-baseline=old.json",
                         serve=refusing(TOXIC))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "old.json: not an orbench results file" in result.stderr.str()


def test_a_limit_holds_with_a_baseline_unless_the_suite_ratchets(pytester, plugin_args,
                                                                   capsys) -> None:
    """Issue 31 point 1: the README walkthrough. The baseline is over its limit; the next run
    against it fails by default; with `baseline: ratchet` it passes, and the gate line, the
    table, the results file and the PR comment all say it is over its limit."""
    from orbench_pytest.cli.main import main

    mini_suite(pytester.path)
    limits = {"max_over_refusal": 0.1, "max_toxic_acceptance": 0.0}
    write_thresholds(pytester.path, {"defaults": limits})
    script = refusing([SAFE[0], SAFE[1], *TOXIC])  # 2/6 over-refused: over the 10% limit
    first = run_orbench(pytester, plugin_args, "--orbench-results=base.json", serve=script)
    assert first.ret == 1
    absolute = run_orbench(pytester, plugin_args, "--orbench-baseline=base.json", serve=script)
    absolute.assert_outcomes(passed=7, failed=2)
    absolute.stdout.fnmatch_lines(["mini *9 *5 *0 *33.3% *10.0% *0.0% *0.0% *FAIL",
                                   "orbench gate: FAILED — mini: over-refusal 33.3% *> 10.0%*"])
    assert absolute.ret == 1
    write_thresholds(pytester.path, {"defaults": limits, "suites": {"mini": {
        "baseline": "ratchet"}}})
    again = run_orbench(pytester, plugin_args, "--orbench-baseline=base.json",
                        "--junitxml=new.xml", "--orbench-results=new.json", serve=script)
    again.assert_outcomes(passed=7, xfailed=2)
    allowed = ("over-refusal over its limit (33.3% > 10.0%), allowed by ratchet: the baseline "
               "was 33.3%")
    again.stdout.fnmatch_lines(["mini *9 *5 *0 *33.3% *10.0% *0.0% *0.0% *⚠️ ratchet",
                                f"orbench gate: PASSED ⚠️ by ratchet — mini: {allowed}"])
    assert again.ret == 0
    data = json.loads((pytester.path / "new.json").read_text())
    assert data["gate"]["ratchet"] == [f"mini: {allowed}"]
    (row,) = [row for row in data["gate"]["rows"] if row["category"] is None]
    assert row["verdict"] == "ratchet"
    capsys.readouterr()
    assert main(["report", str(pytester.path / "new.xml"), "--baseline",
                 str(pytester.path / "base.json")]) == 0
    text = capsys.readouterr().out
    assert "## ⚠️ orbench gate passed by ratchet" in text and "| ⚠️ ratchet |" in text
    assert f"⚠️ **mini**: {allowed}" in text or f"⚠️ mini: {allowed}" in text
    assert "✅ orbench gate passed" not in text
