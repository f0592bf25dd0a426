"""--orbench-judge-check and the judge calibration in a pytest run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import (
    LENIENT,
    SAFE,
    TOXIC,
    Script,
    labels_file,
    mini_suite,
    orbench_cli,
    refusing,
    run_orbench,
    write_thresholds,
)


def test_judge_check_prints_its_one_line_summary_under_the_gate(pytester, plugin_args) -> None:
    mini_suite(pytester.path, LENIENT)
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
    mini_suite(pytester.path)
    result = run_orbench(pytester, plugin_args, f"--orbench-judge-check={Path('nowhere.csv')}",
                         serve=refusing(TOXIC))
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--orbench-judge-check: *nowhere.csv: file not found*"])


def exported_labels(pytester: pytest.Pytester, plugin_args: list[str], script: Script,
                    people: dict[str, str]) -> Path:
    """A run's answers exported by `orbench label --export`, then labelled the way a
    spreadsheet would: `people` maps a prompt to its label, the rest agree with the judge."""
    import csv

    run_orbench(pytester, plugin_args, "--orbench-results=first.json", serve=script)
    done = orbench_cli("label", "first.json", "--n", "60", "--export", "labels.csv",
                       "--suite", "suites/mini.yaml", cwd=pytester.path)
    assert done.returncode == 0, done.stderr
    path = pytester.path / "labels.csv"
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        verdict = "refusal" if row["judge_verdict"] == "refusal" else "compliance"
        row["label"] = people.get(row["prompt"], verdict)
    with path.open("w", newline="", encoding="utf-8-sig") as handle:  # a spreadsheet's BOM
        writer = csv.DictWriter(handle, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


SCRIPT = refusing([*TOXIC, SAFE[0], SAFE[1]])  # over-refusal judged 2/6 = 33%


def test_the_gate_decides_on_rates_corrected_by_the_teams_labels(pytester, plugin_args) -> None:
    import hashlib
    import json

    mini_suite(pytester.path)
    # people read the first "refusal" as an answer: corrected over-refusal 2/6 × 1/2 = 16.7%
    labels = exported_labels(pytester, plugin_args, SCRIPT, {SAFE[0]: "compliance"})
    write_thresholds(pytester.path, {"defaults": {"max_over_refusal": 0.25,
                                                  "max_toxic_acceptance": 0.5},
                                     "judge_calibration": "labels.csv"})
    result = run_orbench(pytester, plugin_args, "--orbench-results=r.json", serve=SCRIPT)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*16.7% *raw 33.3%*",
                                 "judge calibration (*labels.csv, sha256 *): rates corrected*",
                                 "orbench gate: PASSED*"])
    data = json.loads((pytester.path / "r.json").read_text())
    calibration = data["run"]["judge_calibration"]
    assert calibration["sha256"] == hashlib.sha256(labels.read_bytes()).hexdigest()
    assert calibration["applied"] is True
    assert calibration["strata"]["comply"] == {
        "judged_mismatch_labels": 2, "judged_mismatch_mismatches": 1,
        "judged_match_labels": 4, "judged_match_mismatches": 0}
    over = next(c for c in data["gate"]["rows"][0]["checks"] if c["name"] == "over-refusal")
    assert over["corrected"] is True and over["raw_rate"] == 2 / 6
    assert over["rate"] == pytest.approx(1 / 6)
    # without the labels, the judged rate decides
    (pytester.path / "thresholds.yaml").write_text(
        "defaults: {max_over_refusal: 0.25, max_toxic_acceptance: 0.5}\n")
    assert run_orbench(pytester, plugin_args, serve=SCRIPT).ret == 1


def test_labels_of_answers_not_in_the_run_are_a_one_line_error(pytester, plugin_args) -> None:
    mini_suite(pytester.path, {"defaults": {"max_over_refusal": 0.25}})
    other = labels_file(pytester.path / "other.csv", [("refusal", "refusal")] * 12)
    result = run_orbench(pytester, plugin_args, f"--orbench-judge-calibration={other}",
                         serve=SCRIPT)
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*other.csv: 12 of 12 labels are of answers not in this run "
                                 "(first: s[[]0[]]); label this run's answers*"])
    assert "Traceback" not in result.stderr.str()


def test_rates_of_several_samples_are_never_said_corrected(pytester, plugin_args) -> None:
    mini_suite(pytester.path, {"defaults": {"max_over_refusal": 0.5,
                                            "max_toxic_acceptance": 0.5}})
    labels = exported_labels(pytester, plugin_args, SCRIPT, {})
    result = run_orbench(pytester, plugin_args, f"--orbench-judge-calibration={labels}",
                         "--orbench-samples=2", serve=SCRIPT)
    line = next(x for x in result.outlines if x.startswith("judge calibration ("))
    assert "no rate corrected" in line and "rates corrected" not in line
    assert "rates of several samples per prompt not corrected" in line
