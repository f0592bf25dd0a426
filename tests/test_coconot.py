"""CoCoNot ready by name: bundled with its licence and citation, pinned by sha256, checked at
load, its two suites collected by name from the checkout (the wheel: tests/test_wheel.py)."""

from __future__ import annotations

import json
import shutil
from collections import Counter

import pytest

from orbench_pytest.catalog.ready import ready_suite_dir, ready_suites
from orbench_pytest.catalog.suites import SuiteOptions, load_suite
from orbench_pytest.core.errors import ConfigError
from tests.helpers import no_crash, run_orbench

COUNTS = {"coconot-contrast": 379, "coconot-unsafe": 395}


def test_the_data_sits_beside_its_licence_and_citation() -> None:
    folder = ready_suite_dir() / "coconot"
    assert "MIT License" in (folder / "LICENSE").read_text()
    readme = (folder / "README.md").read_text()
    assert "25bf77cc668814360405cdb8197c4368205806c7" in readme
    assert "The Art of Saying No" in readme


@pytest.mark.parametrize(("name", "expect"), [("coconot-contrast", "comply"),
                                              ("coconot-unsafe", "refuse")])
def test_each_suite_holds_its_upstream_rows_with_their_ids(name: str, expect: str) -> None:
    suite = load_suite(ready_suite_dir() / f"{name}.yaml",
                       SuiteOptions(ready_suite_dir=ready_suite_dir()))
    assert len(suite.cases) == COUNTS[name]
    assert {case.expect for case in suite.cases} == {expect}
    source = "coconot_contrast_eval" if name == "coconot-contrast" else "coconot_eval"
    upstream = [json.loads(line) for line in
                (ready_suite_dir() / "coconot" / f"{source}.jsonl").read_text().splitlines()]
    kept = {row["id"]: row for row in upstream
            if name == "coconot-contrast" or row["category"] == "Requests with safety concerns"}
    assert [case.case_id for case in suite.cases] == list(kept)  # the upstream ids, in order
    for case in suite.cases:
        row = kept[case.case_id]
        assert case.prompt == row["prompt"]
        assert case.category == f"{row['category']} / {row['subcategory']}"
    if name == "coconot-unsafe":
        assert Counter(case.category for case in suite.cases)[
            "Requests with safety concerns / misinformation"] == 91


def test_the_suites_are_listed_with_size_expectation_licence_and_citation() -> None:
    listed = {suite.name: suite for suite in ready_suites()}
    for name, size in COUNTS.items():
        assert listed[name].prompts == size
        assert listed[name].license == "MIT"
        assert "allenai/noncompliance@25bf77c" in listed[name].citation
    assert listed["coconot-contrast"].expects == "comply"
    assert listed["coconot-unsafe"].expects == "refuse"
    assert "left out" in listed["coconot-unsafe"].description
    assert all(suite.license and suite.citation for suite in listed.values())


def test_a_changed_file_is_a_one_line_error_at_load(tmp_path) -> None:
    shutil.copytree(ready_suite_dir() / "coconot", tmp_path / "coconot")
    shutil.copy(ready_suite_dir() / "coconot-contrast.yaml", tmp_path)
    data = tmp_path / "coconot" / "coconot_contrast_eval.jsonl"
    data.write_text(data.read_text().replace("burn calories", "burn houses", 1))
    with pytest.raises(ConfigError) as caught:
        load_suite(tmp_path / "coconot-contrast.yaml",
                   SuiteOptions(ready_suite_dir=tmp_path))
    message = str(caught.value)
    assert "\n" not in message
    assert "coconot_contrast_eval.jsonl" in message and "sha256" in message


def test_the_starter_thresholds_gate_both() -> None:
    import yaml

    starter = yaml.safe_load((ready_suite_dir() / "thresholds.yaml").read_text())
    assert "max_over_refusal" in starter["suites"]["coconot-contrast"]
    assert "max_toxic_acceptance" in starter["suites"]["coconot-unsafe"]


def test_both_are_collected_by_name_from_the_checkout(pytester, plugin_args) -> None:
    result = run_orbench(pytester, plugin_args, "-p", "no:randomly", "--co", "-q",
                         "--orbench-suite=coconot-contrast", "--orbench-suite=coconot-unsafe",
                         model="m", suites=None)
    no_crash(result)
    ids = [line for line in result.stdout.lines if "::" in line]
    per_suite = Counter(line.split("::")[0] for line in ids)
    assert per_suite == {"orbench:coconot-contrast.yaml": 379,
                         "orbench:coconot-unsafe.yaml": 395}
    assert "orbench:coconot-contrast.yaml::coconot-contrast[x66r9as]" in ids


def test_orbench_init_and_suites_thresholds_know_the_new_suites(tmp_path, capsys) -> None:
    import yaml

    from orbench_pytest.cli.init_project import init_project
    from orbench_pytest.cli.main import main

    init_project(tmp_path, model="gpt-4o-mini")
    written = yaml.safe_load((tmp_path / "thresholds.yaml").read_text())["suites"]
    assert main(["suites", "--thresholds"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)["suites"]
    for name in ("coconot-contrast", "coconot-unsafe", "smoke-chat"):
        assert name in written and name in printed
