"""pytest's JUnit XML, both ways: the gate as a testsuite property, and a run read back.

Every orbench test case carries the properties suite, category, expectation, verdict, judge,
reason, response, latency_ms, cached (and variant; prompt for mismatches), and the testsuite
carries `orbench_gate`, the gate as the run decided it (limits, verdicts). pytest writes
per-testcase properties under its default junit_family (xunit2) too, so no
`-o junit_family=...` is needed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from orbench_pytest.core.bounded import RESULTS_LIMIT, read_bytes
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.ids import parse_item_name
from orbench_pytest.core.typed_json import dump, load
from orbench_pytest.gate.decision import Outcome
from orbench_pytest.reports.document import ERROR_VERDICTS, SCHEMA, Document, ItemRecord, RunRecord

GATE_PROPERTY = "orbench_gate"
FLIPS_LISTED = 10  # --orbench-rewordings: minimal flips carried for the PR comment


def junit_gate_property(document: Document) -> list[tuple[str, str]]:
    """Testsuite-level JUnit properties: the gate as decided, for `orbench report`."""
    data = dump(document)
    gate = {key: data["gate"][key] for key in ("passed", "stopped_reason", "baseline", "rows")}
    if not data["gate"]["rows"]:  # a gate over nothing: why it failed is all there is to say
        gate["failures"] = data["gate"]["failures"]
    baseline: Mapping[str, Any] | None = data.get("baseline")
    if baseline is not None:  # the id lists can be long: the report recomputes them
        baseline = {k: v for k, v in baseline.items() if k not in ("regressions", "fixed")}
    run = {k: data["run"][k] for k in ("target", "judge", "thresholds", "ungated", "partial",
                                       "disputed", "cost") if k in data["run"]}
    rewordings = data["run"].get("rewordings")
    if rewordings is not None:  # the PR comment lists a few flips; the results file has all
        run["rewordings"] = {**rewordings, "flips": rewordings["flips"][:FLIPS_LISTED]}
    summary = {"schema": SCHEMA, "run": run,
               "gate": gate, "baseline": baseline}
    return [(GATE_PROPERTY, json.dumps(summary, ensure_ascii=False, separators=(",", ":"),
                                       allow_nan=False)),
            *cost_properties(data["run"].get("cost"))]


def cost_properties(cost: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """What the run cost, one testsuite property per figure (a CI dashboard reads them
    without parsing the gate's JSON): orbench_prompt_tokens, orbench_completion_tokens,
    orbench_tokens_estimated (answers whose reply had no usage), orbench_requests,
    orbench_retries, orbench_wall_s and, with prices, orbench_cost_usd."""
    if not cost:
        return []
    names = {"prompt_tokens": "orbench_prompt_tokens",
             "completion_tokens": "orbench_completion_tokens",
             "estimated_answers": "orbench_tokens_estimated", "requests": "orbench_requests",
             "retries": "orbench_retries", "wall_s": "orbench_wall_s", "usd": "orbench_cost_usd"}
    return [(prop, str(cost[key])) for key, prop in names.items() if cost.get(key) is not None]


def read_junit(path: Path) -> RunRecord:
    from junitparser import Error, Failure, JUnitXml, Properties, Skipped, TestSuite

    data = read_bytes(path, RESULTS_LIMIT, "JUnit XML")
    try:
        # Parsed from one string, not fed in blocks: expat re-reads a token that spans blocks
        # from its start at every block, so the gate property (one attribute, megabytes with
        # thousands of rows) took time quadratic in its length.
        xml = JUnitXml.fromstring(data)
    except Exception as exc:  # junitparser raises lxml/ElementTree errors of several kinds
        raise ConfigError(f"{path}: not JUnit XML ({exc})") from None
    suites: list[TestSuite] = [xml] if isinstance(xml, TestSuite) else list(xml)
    items: list[ItemRecord] = []
    gate: Document | None = None
    for suite in suites:
        for prop in suite.properties():
            if prop.name == GATE_PROPERTY:
                gate = _parse_gate_property(prop.value, path)
        for case in suite:
            props_elem = case.child(Properties)
            props = {p.name: p.value for p in props_elem} if props_elem is not None else {}
            if "suite" not in props or "expectation" not in props:
                continue  # an ordinary test in the same run
            results = list(case.result)
            outcome, message = Outcome.PASSED.value, ""
            for result in results:
                message = result.message or ""
                if isinstance(result, Error):
                    outcome = Outcome.ERROR.value
                elif isinstance(result, Failure):
                    outcome = Outcome.FAILED.value
                elif isinstance(result, Skipped) and (result.type or "") == "pytest.xfail":
                    outcome = Outcome.TOLERATED.value
                elif isinstance(result, Skipped):
                    outcome = "skipped"  # not an orbench outcome: a user's own skip
            items.append(_item(str(case.name), props, outcome, message))
    return RunRecord(str(path), replace(gate or Document(), items=items))


def _parse_gate_property(value: str | None, path: Path) -> Document:
    try:
        data: dict[str, Any] = json.loads(value or "")
        if not isinstance(data["gate"]["rows"], list) or not isinstance(data, dict):
            raise TypeError
    except (ValueError, KeyError, TypeError, RecursionError):
        raise ConfigError(f"{path}: testsuite property {GATE_PROPERTY} is not a gate "
                          "written by orbench-pytest") from None
    return load(Document, data, f"{path}: {GATE_PROPERTY}")


def _item(name: str, props: Mapping[str, str], outcome: str, message: str) -> ItemRecord:
    suite = props["suite"]
    variant = props.get("variant", "")
    case_id = parse_item_name(name, suite, variant)
    verdict = props.get("verdict", "")
    error = verdict in ERROR_VERDICTS or outcome == Outcome.ERROR
    if error and outcome == Outcome.TOLERATED:
        outcome = Outcome.ERROR_TOLERATED.value
    latency = props.get("latency_ms")
    try:
        latency_ms: float | None = float(latency) if latency is not None else None
    except ValueError:
        latency_ms = None
    return ItemRecord(
        suite=suite, case_id=case_id, variant=variant, category=props.get("category", ""),
        expect=props["expectation"], verdict=verdict, outcome=outcome,
        mismatch=not error and outcome in (Outcome.TOLERATED, Outcome.FAILED), error=error,
        judge=props.get("judge", ""), judge_reason=props.get("reason", ""),
        reason=message.split("\n", 1)[0], response=props.get("response", ""),
        prompt=props.get("prompt", ""), latency_ms=latency_ms, nodeid=name,
        refusals=_count(props.get("refusals")), samples=_count(props.get("samples")),
        cached={"true": True, "false": False}.get(props.get("cached", "")),
    )


def _count(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None
