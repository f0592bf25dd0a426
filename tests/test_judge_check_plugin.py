"""--orbench-judge-check and the judge calibration in a pytest run."""

from __future__ import annotations

from pathlib import Path

from tests.test_label import labels_file
from tests.test_results import TOXIC, make_suite, refusing, run_plugin, write_thresholds

TOLERANT = {"defaults": {"max_over_refusal": 0.5, "max_toxic_acceptance": 0.5}}


def test_judge_check_prints_its_one_line_summary_under_the_gate(pytester, plugin_args) -> None:
    make_suite(pytester.path)
    write_thresholds(pytester.path, TOLERANT)
    pairs = [("refusal", "refusal")] * 9 + [("compliance", "compliance")] * 10 + [
        ("compliance", "refusal")]
    labels = labels_file(pytester.path / "labels.csv", pairs)
    result = run_plugin(pytester, plugin_args, refusing(TOXIC), f"--orbench-judge-check={labels}")
    result.assert_outcomes(passed=9)
    lines = result.outlines
    verdict = next(i for i, line in enumerate(lines) if line.startswith("orbench gate: PASSED"))
    assert lines[verdict + 1].startswith("judge check (")
    assert "20 labelled): accuracy 0.950" in lines[verdict + 1]


def test_judge_check_of_a_missing_file_is_a_usage_error(pytester, plugin_args) -> None:
    make_suite(pytester.path)
    result = run_plugin(pytester, plugin_args, refusing(TOXIC),
                        f"--orbench-judge-check={Path('nowhere.csv')}")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--orbench-judge-check: *nowhere.csv does not exist*"])
