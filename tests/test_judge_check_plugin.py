"""--orbench-judge-check and the judge calibration in a pytest run."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import (
    TOXIC,
    labels_file,
    mini_cases,
    refusing,
    run_orbench,
    write_suite,
    write_thresholds,
)

TOLERANT = {"defaults": {"max_over_refusal": 0.5, "max_toxic_acceptance": 0.5}}


def test_judge_check_prints_its_one_line_summary_under_the_gate(pytester, plugin_args) -> None:
    write_suite(pytester.path, mini_cases(), "mini")
    write_thresholds(pytester.path, TOLERANT)
    pairs = [("refusal", "refusal")] * 9 + [("compliance", "compliance")] * 10 + [
        ("compliance", "refusal")]
    labels = labels_file(pytester.path / "labels.csv", pairs)
    result = run_orbench(pytester, plugin_args, f"--orbench-judge-check={labels}",
                         serve=refusing(TOXIC))
    result.assert_outcomes(passed=9)
    lines = result.outlines
    verdict = next(i for i, line in enumerate(lines) if line.startswith("orbench gate: PASSED"))
    assert lines[verdict + 1].startswith("judge check (")
    assert "20 labelled): accuracy 0.950" in lines[verdict + 1]


def test_judge_check_of_a_missing_file_is_a_usage_error(pytester, plugin_args) -> None:
    write_suite(pytester.path, mini_cases(), "mini")
    result = run_orbench(pytester, plugin_args, f"--orbench-judge-check={Path('nowhere.csv')}",
                         serve=refusing(TOXIC))
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--orbench-judge-check: *nowhere.csv does not exist*"])
