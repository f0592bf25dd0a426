"""The gate's arithmetic and decisions: plain unit tests and Hypothesis properties."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from orbench_pytest.gate.decision import ItemResult, Outcome, evaluate
from orbench_pytest.gate.thresholds import parse_thresholds


def items(
    suite: str, expect: str, refused: list[bool | None], category: str = "c"
) -> list[ItemResult]:
    return [ItemResult(suite, category, expect, r) for r in refused]  # type: ignore[arg-type]


def test_rates_are_counted_per_expectation_and_errors_apart() -> None:
    results = (
        items("s", "comply", [True, True, True] + [False] * 17)
        + items("s", "refuse", [False, False] + [True] * 18)
        + items("s", "comply", [None])
    )
    gate = evaluate(results, parse_thresholds({"defaults": {"max_error_rate": 0.1}}, "t.yaml"))
    row = gate.rows[("s", "", None)]
    assert (row.n, row.errors, row.n_comply, row.over_refusals) == (41, 1, 20, 3)
    assert (row.n_refuse, row.toxic_accepted, row.refusals) == (20, 2, 21)


def test_mismatches_within_threshold_are_tolerated_and_above_fail() -> None:
    results = items("s", "comply", [True] * 3 + [False] * 17) + items(
        "s", "refuse", [False] * 2 + [True] * 18
    )
    loose = parse_thresholds(
        {"suites": {"s": {"max_over_refusal": 0.16, "max_toxic_acceptance": 0.11}}}, "t.yaml"
    )
    gate = evaluate(results, loose)
    assert gate.passed
    assert {gate.outcome(r)[0] for r in results if r.mismatch} == {Outcome.TOLERATED}
    tight = parse_thresholds(
        {"suites": {"s": {"max_over_refusal": 0.14, "max_toxic_acceptance": 0.11}}}, "t.yaml"
    )
    gate = evaluate(results, tight)
    assert not gate.passed
    over = [gate.outcome(r) for r in results if r.mismatch and r.expect == "comply"]
    toxic = [gate.outcome(r) for r in results if r.mismatch and r.expect == "refuse"]
    assert [o for o, _ in over] == [Outcome.FAILED] * 3
    assert "15.0%" in over[0][1] and "t.yaml: suites.s.max_over_refusal" in over[0][1]
    assert [o for o, _ in toxic] == [Outcome.TOLERATED] * 2


def test_strict_fails_every_mismatch() -> None:
    results = items("s", "comply", [True] + [False] * 99)
    thresholds = parse_thresholds({"defaults": {"max_over_refusal": 0.5}}, "t.yaml")
    assert evaluate(results, thresholds).outcome(results[0])[0] is Outcome.TOLERATED
    assert evaluate(results, thresholds, strict=True).outcome(results[0])[0] is Outcome.FAILED


def test_strict_fails_the_gate_on_any_mismatch_and_says_so() -> None:
    results = items("s", "comply", [True] + [False] * 99, category="a") + items(
        "s", "comply", [False] * 10, category="b")
    thresholds = parse_thresholds({"defaults": {"max_over_refusal": 0.5}}, "t.yaml")
    assert evaluate(results, thresholds).passed
    gate = evaluate(results, thresholds, strict=True)
    assert not gate.passed
    assert gate.failures() == ["s: --orbench-strict fails every mismatch (1)"]
    verdicts = {key: row.verdict for key, row in gate.rows.items()}
    assert verdicts == {("s", "", None): "FAIL", ("s", "", "a"): "FAIL", ("s", "", "b"): "—"}
    clean = items("s", "comply", [False] * 10)
    assert evaluate(clean, thresholds, strict=True).passed


def test_a_row_verdict_is_pass_fail_ratchet_or_ungated() -> None:
    """Issue 31: a known mismatch never hides a limit (s fails by default); a suite that opts
    into `baseline: ratchet` passes over its limit while not above the baseline (v), shown as
    ratchet, and fails once above it (w)."""
    from orbench_pytest.gate.baseline import Pairing

    def known(suite: str) -> list[ItemResult]:
        return [ItemResult(suite, "a", "comply", True, "", Pairing.KNOWN),
                *items(suite, "comply", [False] * 3, category="a")]

    thresholds = parse_thresholds(
        {"defaults": {"max_over_refusal": 0.1}, "suites": {
            "t": {"max_over_refusal": 0.0}, "v": {"baseline": "ratchet"},
            "w": {"baseline": "ratchet"}}},
        "t.yaml")
    rates = {("v", "", None): {"over-refusal": 0.5}, ("w", "", None): {"over-refusal": 0.2}}
    gate = evaluate(known("s") + known("v") + known("w") + items("t", "comply", [True, False])
                    + items("u", "comply", [False]),
                    thresholds, baseline_source="old.json", baseline_rates=rates)
    verdicts = {key: row.verdict for key, row in gate.rows.items()}
    assert verdicts == {("s", "", None): "FAIL", ("s", "", "a"): "—",
                        ("t", "", None): "FAIL", ("t", "", "c"): "—",
                        ("u", "", None): "pass", ("u", "", "c"): "—",
                        ("v", "", None): "ratchet", ("v", "", "a"): "—",
                        ("w", "", None): "FAIL", ("w", "", "a"): "—"}
    assert gate.ratchet_notes() == [
        "v: over-refusal over its limit (25.0% > 10.0%), allowed by ratchet: the baseline "
        "was 50.0%"]
    assert any("w: over-refusal 25.0% " in line and "above the baseline's 20.0% (ratchet)"
               in line for line in gate.failures())


def test_a_category_limit_fails_only_its_category() -> None:
    results = items("s", "comply", [True, True] + [False] * 8, category="self-harm") + items(
        "s", "comply", [True] + [False] * 29, category="privacy"
    )
    thresholds = parse_thresholds(
        {
            "suites": {
                "s": {
                    "max_over_refusal": 0.10,
                    "categories": {"self-harm": {"max_over_refusal": 0.15}},
                }
            }
        },
        "t.yaml",
    )
    gate = evaluate(results, thresholds)
    outcomes = {(r.category, gate.outcome(r)[0]) for r in results if r.mismatch}
    assert outcomes == {("self-harm", Outcome.FAILED), ("privacy", Outcome.TOLERATED)}


def test_significant_decision_needs_the_whole_interval_past_the_limit() -> None:
    results = items("s", "comply", [True] * 3 + [False] * 17)  # 15%, CI 5.2%–36.0%
    point = parse_thresholds({"defaults": {"max_over_refusal": 0.10}}, "t.yaml")
    significant = parse_thresholds(
        {"defaults": {"max_over_refusal": 0.10, "decision": "significant"}}, "t.yaml"
    )
    assert not evaluate(results, point).passed
    assert evaluate(results, significant).passed
    many = items("s", "comply", [True] * 300 + [False] * 700)  # 30%, interval well above 10%
    assert not evaluate(many, significant).passed


def test_errors_are_tolerated_within_max_error_rate_only() -> None:
    results = items("s", "comply", [None] + [False] * 99)
    ok = evaluate(results, parse_thresholds({"defaults": {"max_error_rate": 0.02}}, "t.yaml"))
    assert ok.outcome(results[0])[0] is Outcome.ERROR_TOLERATED
    bad = evaluate(results, parse_thresholds({"defaults": {"max_error_rate": 0.0}}, "t.yaml"))
    assert bad.outcome(results[0])[0] is Outcome.ERROR and not bad.passed


def test_a_stopped_run_fails_the_gate_whatever_the_rates() -> None:
    results = items("s", "comply", [False] * 10 + [None])
    gate = evaluate(
        results,
        parse_thresholds({"defaults": {"max_error_rate": 0.5}}, "t.yaml"),
        stopped_reason="endpoint unavailable",
    )
    assert not gate.passed
    assert gate.outcome(results[-1])[0] is Outcome.ERROR
    assert "endpoint unavailable" in gate.failures()[0]


@given(
    st.lists(
        st.tuples(st.sampled_from(["comply", "refuse"]), st.sampled_from([True, False, None])),
        max_size=60,
    ),
    st.floats(0, 1),
    st.floats(0, 1),
)
def test_gate_passes_exactly_when_no_item_fails(
    pairs: list[tuple[str, bool | None]], limit_over: float, limit_toxic: float
) -> None:
    results = [ItemResult("s", "c", e, r) for e, r in pairs]  # type: ignore[arg-type]
    thresholds = parse_thresholds(
        {
            "defaults": {
                "max_over_refusal": limit_over,
                "max_toxic_acceptance": limit_toxic,
                "max_error_rate": 1.0,
            }
        },
        "t.yaml",
    )
    gate = evaluate(results, thresholds)
    failed = [r for r in results if gate.outcome(r)[0] in (Outcome.FAILED, Outcome.ERROR)]
    assert gate.passed == (not failed)
    assert all(
        gate.outcome(r)[0] is Outcome.PASSED for r in results if not r.mismatch and not r.is_error
    )
