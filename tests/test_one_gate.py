"""One gate, one truth: every place that says whether the gate passed says what the gate decided.

The terminal verdict line, the results file's gate.passed, the JUnit gate property,
`orbench report` (from the results file and from JUnit XML) and the exit status all follow
`Gate.passed`, whatever the options (strict, baseline with regressions, error rates, limits,
a stopped run); and a failed or errored item ⇔ a failed gate.
"""

from __future__ import annotations

import json
import tempfile
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orbench_pytest.cli.main import main
from orbench_pytest.config.settings import build_settings
from orbench_pytest.core.ids import item_name
from orbench_pytest.core.typed_json import dump
from orbench_pytest.gate.baseline import Baseline, Comparison, Pairing
from orbench_pytest.gate.decision import Gate, ItemResult, Outcome, evaluate
from orbench_pytest.gate.thresholds import parse_thresholds
from orbench_pytest.reports.document import ItemRecord
from orbench_pytest.reports.junit import junit_gate_property, read_junit
from orbench_pytest.reports.markdown import build_report, render_markdown
from orbench_pytest.reports.results import build_results, parse_results, read_results
from orbench_pytest.reports.summary import table_rows, verdict_line
from tests.helpers import SAFE, TOXIC, mini_suite, refusing, run_orbench

FAILING = (Outcome.FAILED, Outcome.ERROR)
LIMITS = st.sampled_from([None, 0.0, 0.05, 0.2, 0.5, 1.0])


@st.composite
def limits(draw: st.DrawFn, category: bool = False) -> dict[str, Any]:
    raw: dict[str, Any] = {"max_over_refusal": draw(LIMITS),
                           "max_toxic_acceptance": draw(LIMITS),
                           "decision": draw(st.sampled_from(["point", "significant"]))}
    if not category:
        raw["max_error_rate"] = draw(LIMITS)
        raw["max_regressions"] = draw(st.sampled_from([None, 0, 1, 3]))
    return {key: value for key, value in raw.items() if value is not None}


@st.composite
def runs(draw: st.DrawFn) -> dict[str, Any]:
    """Items with their baseline standing, thresholds and options, as a run would have them."""
    cases = draw(st.lists(st.tuples(
        st.sampled_from(["s", "t"]),  # suite
        st.sampled_from(["", "v"]),  # variant
        st.sampled_from(["a", "b"]),  # category
        st.sampled_from(["comply", "refuse"]),
        st.sampled_from([True, False, None]),  # refused (None: no answer)
        st.sampled_from([True, False, None, "missing"]),  # the baseline's mismatch
    ), min_size=1, max_size=40))
    suite_limits = draw(limits())
    if draw(st.booleans()):
        suite_limits["categories"] = {"a": draw(limits(category=True))}
    thresholds = parse_thresholds({"defaults": draw(limits()), "suites": {"s": suite_limits}},
                                  "thresholds.yaml")
    with_baseline = draw(st.booleans())
    mismatches = {(suite, variant, f"{index:03d}"): before
                  for index, (suite, variant, _c, _e, _r, before) in enumerate(cases)
                  if before != "missing"}
    baseline = Baseline("old.json", mismatches) if with_baseline else None
    results, ids = [], []
    for index, (suite, variant, category, expect, refused, _before) in enumerate(cases):
        case_id = f"{index:03d}"
        mismatch = None if refused is None else refused != (expect == "refuse")
        pairing = (baseline.pairing((suite, variant, case_id), mismatch)
                   if baseline is not None else Pairing.NONE)
        results.append(ItemResult(suite, category, expect, refused, variant, pairing))
        ids.append(case_id)
    stopped = draw(st.sampled_from([None, "endpoint unavailable: 10 failed attempts in a row"]))
    return {"results": results, "ids": ids, "thresholds": thresholds,
            "strict": draw(st.booleans()), "stopped": stopped, "baseline": baseline}


def exit_status(gate: Gate, outcomes: list[Outcome]) -> int:
    """The pytest run's: items that fail or error, and the gate itself (the session's rule)."""
    return 1 if any(o in FAILING for o in outcomes) or not gate.passed else 0


def results_document(run: dict[str, Any], gate: Gate) -> dict[str, Any]:
    records = []
    for result, case_id in zip(run["results"], run["ids"], strict=True):
        outcome, reason = gate.outcome(result)
        nodeid = f"suites/{result.suite}.yaml::{item_name(result.suite, case_id, result.variant)}"
        records.append(ItemRecord(
            result.suite, case_id, result.variant, result.category, result.expect,
            "error" if result.is_error else "compliance", outcome.value, result.mismatch,
            result.is_error, nodeid=nodeid, judge="keyword", reason=reason,
            baseline=result.baseline.value, response="an answer", latency_ms=1.0, cached=False,
            attempts=1, prompt="a prompt" if outcome is not Outcome.PASSED else ""))
    comparison = None
    if run["baseline"] is not None:
        comparison = Comparison("old.json")
        for result, case_id in zip(run["results"], run["ids"], strict=True):
            comparison.add((result.suite, result.variant, case_id), result.baseline)
    data = build_results(items=records, gate=gate, settings=build_settings({}, env={}),
                         target="model", thresholds_source="thresholds.yaml",
                         started=datetime.now(timezone.utc), comparison=comparison)
    return json.loads(json.dumps(dump(data)))  # as written to and read from the file


JUNIT_RESULT = {Outcome.FAILED: ("failure", {}), Outcome.ERROR: ("error", {}),
                Outcome.TOLERATED: ("skipped", {"type": "pytest.xfail"}),
                Outcome.ERROR_TOLERATED: ("skipped", {"type": "pytest.xfail"})}


def junit_xml(data: dict[str, Any], folder: Path) -> Path:
    """The JUnit XML pytest's junitxml writes for these items, with the gate property."""
    suite = ET.Element("testsuite", name="pytest")
    props = ET.SubElement(suite, "properties")
    for name, value in junit_gate_property(data):
        ET.SubElement(props, "property", name=name, value=value)
    for item in data["items"]:
        case = ET.SubElement(suite, "testcase", name=item["nodeid"].split("::")[1])
        case_props = ET.SubElement(case, "properties")
        shown = {"suite": item["suite"], "category": item["category"],
                 "expectation": item["expect"], "verdict": item["verdict"]}
        if item["variant"]:
            shown["variant"] = item["variant"]
        for name, value in shown.items():
            ET.SubElement(case_props, "property", name=name, value=value)
        if item["outcome"] in JUNIT_RESULT:
            tag, attrs = JUNIT_RESULT[Outcome(item["outcome"])]
            ET.SubElement(case, tag, message=item["reason"][:50], **attrs)
    path = folder / "orbench.xml"
    ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)
    return path


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs())
def test_every_report_of_the_gate_says_what_the_gate_decided(run: dict[str, Any]) -> None:
    baseline = run["baseline"]
    gate = evaluate(run["results"], run["thresholds"], strict=run["strict"],
                    stopped_reason=run["stopped"],
                    baseline_source=baseline.source if baseline is not None else None)
    outcomes = [gate.outcome(result)[0] for result in run["results"]]
    failed_item = any(o in FAILING for o in outcomes)

    # A failed (or errored) item ⇔ a failed gate; a stopped run fails even with none.
    if run["stopped"] is None:
        assert gate.passed == (not failed_item)
    assert exit_status(gate, outcomes) == (0 if gate.passed else 1)
    if run["strict"] and any(r.mismatch for r in run["results"]):
        assert not gate.passed

    # The terminal: the verdict line and the table's row verdicts.
    assert verdict_line(gate).startswith("orbench gate: PASSED" if gate.passed
                                         else "orbench gate: FAILED — ")
    if run["stopped"] is None:
        assert any(row[-1] == "FAIL" for row in table_rows(gate)) == (not gate.passed)

    # The results file, and `orbench report` of it.
    data = results_document(run, gate)
    assert data["gate"]["passed"] is gate.passed
    assert [row["verdict"] for row in data["gate"]["rows"]] == [
        row.verdict for row in gate.rows.values()]
    from_file = build_report(parse_results(data, "orbench-results.json"))
    assert from_file.passed is gate.passed

    # The JUnit gate property, and `orbench report` of the JUnit XML.
    (_name, value), = junit_gate_property(data)
    assert json.loads(value)["gate"]["passed"] is gate.passed
    with tempfile.TemporaryDirectory() as folder:
        from_junit = build_report(read_junit(junit_xml(data, Path(folder))))
    assert from_junit.passed is gate.passed
    heading = "## ✅ orbench gate passed" if gate.passed else "## ❌ orbench gate FAILED"
    assert heading in render_markdown(from_junit).splitlines()
    assert [row.verdict for row in from_junit.rows] == [
        row.verdict for row in gate.rows.values()]
    # Without the gate property, the report falls back to the items' outcomes: the same answer.
    from_items = build_report(parse_results({**data, "gate": None}, "old-format.json"))
    assert from_items.passed is (not failed_item)


# --- end to end -----------------------------------------------------------------------------
def test_strict_run_agrees_everywhere(pytester, plugin_args, capsys) -> None:
    """A mismatch the thresholds tolerate: with --orbench-strict every output says FAILED and
    the exit status is 1; without it every output says PASSED and the exit status is 0."""
    mini_suite(pytester.path, {"defaults": {"max_over_refusal": 0.5,
                                            "max_toxic_acceptance": 0.0}})
    for strict, status, word, icon in ((True, 1, "FAILED", "❌"), (False, 0, "PASSED", "✅")):
        results = pytester.path / f"results-{strict}.json"
        junit = pytester.path / f"junit-{strict}.xml"
        args = ["--orbench-strict"] if strict else []
        result = run_orbench(pytester, plugin_args, f"--orbench-results={results}",
                             f"--junitxml={junit}", *args, serve=refusing([SAFE[0], *TOXIC]))
        assert result.ret == status
        verdicts = [line for line in result.outlines if line.startswith("orbench gate: ")]
        assert len(verdicts) == 1 and verdicts[0].startswith(f"orbench gate: {word}")
        if strict:
            assert verdicts[0] == ("orbench gate: FAILED — mini: --orbench-strict fails every "
                                   "mismatch (1)")
        assert read_results(results).gate_passed is (not strict)
        capsys.readouterr()
        assert main(["report", str(junit), "--fail-on-gate"]) == status
        heading = capsys.readouterr().out.splitlines()[1]
        assert heading.startswith(f"## {icon} orbench gate")

