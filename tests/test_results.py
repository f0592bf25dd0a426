"""orbench-results.json: written by a real run, read back, schema checked, secrets kept out."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.typed_json import dump
from orbench_pytest.reports.document import Document
from orbench_pytest.reports.results import (
    SCHEMA,
    load_run,
    parse_results,
    read_results,
    write_results,
)
from tests.helpers import LENIENT, SAFE, TOXIC, mini_suite, refusing, run_orbench
from tests.openai_server import ANSWER_TEXT, REFUSAL_TEXT, OpenAIServer

_ITEM = {"suite": "s", "case_id": "c", "variant": "", "category": "x", "expect": "comply",
         "verdict": "compliance", "outcome": "passed", "mismatch": False, "error": False}
_ROW = {"suite": "s", "variant": "", "n": 1, "errors": 0, "n_comply": 1, "over_refusals": 0,
        "n_refuse": 0, "toxic_accepted": 0}


# --- tests ----------------------------------------------------------------------------------
def test_results_file_holds_every_item_and_the_gate(pytester, plugin_args) -> None:
    mini_suite(pytester.path, LENIENT)
    # Over-refuses SAFE[0] (tolerated), answers TOXIC[0] (tolerated), the rest as expected.
    result = run_orbench(pytester, plugin_args, "--orbench-results=out/orbench-results.json",
                         serve=refusing([SAFE[0], *TOXIC[1:]]))
    result.assert_outcomes(passed=7, xfailed=2)
    data = json.loads((pytester.path / "out" / "orbench-results.json").read_text())

    assert data["schema"] == SCHEMA
    assert data["run"]["target"] == "m"
    assert data["run"]["suites"] == [{"name": "mini", "items": 9}]
    assert data["run"]["parameters"]["model"] == "m"
    assert data["run"]["versions"]["pytest"] == pytest.__version__
    by_id = {item["id"]: item for item in data["items"]}
    assert len(by_id) == 9
    over = by_id["mini[violence-0000]"]
    assert (over["verdict"], over["outcome"], over["mismatch"], over["refused"]) == \
        ("refusal", "tolerated", True, True)
    assert over["prompt"] == SAFE[0]
    assert over["response"] == over["answer"] == REFUSAL_TEXT
    assert over["nodeid"] == "suites/mini.yaml::mini[violence-0000]"
    toxic = by_id["mini[violence-0006]"]
    assert (toxic["expect"], toxic["outcome"], toxic["refused"]) == ("refuse", "tolerated", False)
    passed = by_id["mini[privacy-0001]"]
    # Every prompt and whole answer are kept, for the HTML report and labelling.
    assert passed["outcome"] == "passed" and passed["prompt"] == SAFE[1]
    assert passed["answer"] == ANSWER_TEXT
    assert isinstance(passed["latency_ms"], float) and passed["cached"] is False

    suite_row = next(r for r in data["gate"]["rows"] if r["category"] is None)
    assert (suite_row["n"], suite_row["n_comply"], suite_row["over_refusals"],
            suite_row["n_refuse"], suite_row["toxic_accepted"]) == (9, 6, 1, 3, 1)
    over_check = next(c for c in suite_row["checks"] if c["name"] == "over-refusal")
    assert over_check["limit"] == 0.5 and over_check["passed"] is True
    low, high = over_check["interval"]
    assert low < 1 / 6 < high
    assert data["gate"]["passed"] is True
    assert data["baseline"] is None


def test_results_round_trip_through_the_reader(pytester, plugin_args) -> None:
    mini_suite(pytester.path, LENIENT)
    run_orbench(pytester, plugin_args, "--orbench-results=r.json",
                serve=refusing([SAFE[0], *TOXIC]))
    path = pytester.path / "r.json"
    run = read_results(path)
    raw = json.loads(path.read_text())
    assert [item.id for item in run.items] == [item["id"] for item in raw["items"]]
    assert {item.id for item in run.items if item.mismatch} == {"mini[violence-0000]"}
    assert run.gate_passed is True and dump(run.gate_rows) == raw["gate"]["rows"]
    assert dump(run.document) == raw  # the model writes back every key it read
    # Writing what was read and reading it again changes nothing.
    copy = pytester.path / "copy" / "r.json"
    write_results(copy, raw)
    again = load_run(copy)
    assert again.items == run.items and again.gate_rows == run.gate_rows
    baseline = run.to_baseline()
    assert baseline.mismatches[("mini", "", "violence-0000")] is True
    assert baseline.mismatches[("mini", "", "privacy-0001")] is False


def test_secrets_never_reach_the_results_file(pytester, plugin_args, monkeypatch) -> None:
    secret = "sk-test-0123456789abcdefSECRET"
    monkeypatch.setenv("ORBENCH_TEST_KEY", secret)
    mini_suite(pytester.path, {"defaults": {"max_over_refusal": 1.0,
                                            "max_toxic_acceptance": 1.0}})
    # A server that echoes the key into every answer: the file must still not hold it.
    result = run_orbench(pytester, plugin_args, "--orbench-api-key-env=ORBENCH_TEST_KEY",
                         "--orbench-results=r.json", serve=refusing(SAFE, text=f"echo {secret}"))
    assert result.ret == 0
    text = (pytester.path / "r.json").read_text()
    assert secret not in text
    assert "[REDACTED]" in text
    assert json.loads(text)["run"]["parameters"]["api_key_env"] == "ORBENCH_TEST_KEY"


def test_unwritable_results_path_is_a_usage_error(pytester, plugin_args) -> None:
    mini_suite(pytester.path)
    (pytester.path / "blocker").write_text("a file, not a folder")
    with OpenAIServer(refusing(TOXIC)) as server:
        result = run_orbench(pytester, plugin_args, "--orbench-results=blocker/r.json",
                             url=server.url)
        assert server.requests == 0  # found out before any prompt was sent
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--orbench-results: cannot write " in result.stderr.str()
    assert "blocker is not a folder" in result.stderr.str()


@pytest.mark.parametrize(("data", "message"), [
    ([], "not an orbench results file"),
    ({"schema": 99, "items": []}, "results schema 99 is not supported"),
    ({"schema": 1, "items": {}}, "items: expected a list"),
    ({"schema": 1, "items": [{"suite": "s"}]}, "items[0]: missing case_id"),
    ({"schema": 1, "items": [{**_ITEM, "latency_ms": "5"}]},
     "items[0].latency_ms: expected a number, got text"),
    ({"schema": 1, "items": [_ITEM], "gate": {"rows": [{**_ROW, "n": -1}]}},
     "gate.rows[0].n: expected a whole number >= 0, got a number"),
    ({"schema": 1, "items": [_ITEM], "gate": {"rows": [{**_ROW, "rates": {"x": {
        "rate": 0.5, "interval": [0.1]}}}]}},
     "gate.rows[0].rates.x.interval: expected a list of 2, got a list"),
    ({"schema": 1, "items": [_ITEM], "run": {"cost": {"requests": True}}},
     "run.cost: missing prompt_tokens"),
    ({"schema": 1, "items": [_ITEM], "run": {"disputed": [{"id": 3}]}},
     "run.disputed[0].id: expected text, got a number"),
])
def test_bad_results_files_are_one_line_errors(data: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_results(data, "old.json")


def test_unreadable_results_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    path.write_text("{not json")
    with pytest.raises(ConfigError, match=r"old\.json: not JSON"):
        read_results(path)
    with pytest.raises(ConfigError, match=r"missing\.json: cannot read"):
        read_results(tmp_path / "missing.json")


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8)


@settings(max_examples=50, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.text(max_size=8).filter(lambda k: k != "items"), _json, max_size=4),
       st.lists(st.dictionaries(st.text(max_size=8), _json, max_size=4), max_size=5))
def test_writer_round_trips_any_document(tmp_path: Path, head: dict, items: list) -> None:
    path = tmp_path / "r.json"
    write_results(path, {**head, "items": items})
    assert json.loads(path.read_text(encoding="utf-8")) == {**head, "items": items}


# --- the model: every document it can hold is written and read back unchanged ---------------
def _strategy(kind: Any) -> st.SearchStrategy[Any]:
    """Values of a field's type as the results model declares it (core/typed_json.py)."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if dataclasses.is_dataclass(kind):
        hints = typing.get_type_hints(kind, include_extras=True)
        return st.builds(kind, **{f.name: _strategy(hints[f.name])
                                  for f in dataclasses.fields(kind)})
    if origin is typing.Annotated:  # Count
        return st.integers(0, 10**9)
    if origin in (typing.Union, types.UnionType):
        return st.one_of([_strategy(arm) for arm in args])
    if origin is list:
        return st.lists(_strategy(args[0]), max_size=2)
    if origin is tuple:
        return st.tuples(*map(_strategy, args))
    if origin is dict:
        return st.dictionaries(st.text(max_size=4), _strategy(args[1]), max_size=2)
    return {str: st.text(max_size=6), int: st.integers(), bool: st.booleans(),
            float: st.floats(allow_nan=False, allow_infinity=False),
            type(None): st.none()}[kind]


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(_strategy(Document).filter(lambda document: document.items)
       .map(lambda document: dataclasses.replace(document, schema=SCHEMA)))
def test_every_document_round_trips(tmp_path: Path, document: Document) -> None:
    """read(write(x)) == x, and write → read → write writes the same bytes: samples runs,
    variants, baselines, disputed, ratchet, partial gates, calibration, cost, rewordings."""
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    write_results(first, document)
    run = read_results(first)
    assert run.document == document
    write_results(second, run.document)
    assert second.read_bytes() == first.read_bytes()


@pytest.mark.parametrize("name", ["results-main-full.json", "results-main-samples.json",
                                  "results-rogan-gladen.json"])
def test_files_of_the_previous_writer_load_and_write_back_unchanged(tmp_path: Path,
                                                                    name: str) -> None:
    """Baselines users already have: every optional section read, and written back the same."""
    path = Path(__file__).parent / "data" / name
    raw = json.loads(path.read_text(encoding="utf-8"))
    run = read_results(path)
    assert dump(run.document) == raw
    copy = tmp_path / name
    write_results(copy, run.document)
    assert json.loads(copy.read_text(encoding="utf-8")) == raw
    assert run.to_baseline().mismatches  # and it serves as a baseline


def _synthetic_run(sampled: bool) -> Document:
    """The run behind tests/data/results-main-*.json, built as a run builds its document."""
    from datetime import datetime, timezone

    from orbench_pytest.config.settings import build_settings
    from orbench_pytest.core.redact import redact
    from orbench_pytest.gate.baseline import Comparison, Pairing
    from orbench_pytest.gate.calibration import ErrorRates, KindLabels, Stratum, calibrate
    from orbench_pytest.gate.decision import ItemResult, Outcome, evaluate
    from orbench_pytest.gate.scope import Ungated, scope_of
    from orbench_pytest.gate.thresholds import parse_thresholds
    from orbench_pytest.reports.cost import RunCost
    from orbench_pytest.reports.document import Agreement, Fingerprint, Flip, ItemRecord
    from orbench_pytest.reports.results import build_results, calibration_record
    from orbench_pytest.run.rewording_search import SearchOutcome

    results = []
    for i in range(16):
        refused = None if i == 5 else bool(i % 2)
        results.append(ItemResult(
            "s" if i % 4 else "t", "cat-a" if i % 5 else "cat-b",
            "comply" if i % 3 else "refuse", refused, ("plain", "strict")[i % 2],
            list(Pairing)[i % len(Pairing)],
            refusals=(i % 4 if refused is not None else 0) if sampled else None,
            answered=(3 if refused is not None else 0) if sampled else 1,
            baseline_rate=0.5 if sampled and i % 2 else None))
    thresholds = parse_thresholds({
        "defaults": {"max_over_refusal": 0.1, "max_toxic_acceptance": 0.5,
                     "max_regressions": 2, "decision": "significant"},
        "suites": {"s": {"baseline": "ratchet", "decision": "point"}}}, "thresholds.yaml")
    scope = scope_of([("s", 900, 16, 0)], thresholds, ["--orbench-subset"], False,
                     [("t[plain][0099]", "the label is wrong", "review 2026-10")])
    gate = evaluate(results, thresholds, baseline_source="old.json",
                    baseline_rates={("s", "strict", None): {"over-refusal": 1.0}}, scope=scope)
    rates = ErrorRates(40, 38, 60, 57)
    calibration = None if sampled else calibrate(
        gate, "labels.csv", "ab" * 32,
        {"comply": KindLabels(), "refuse": KindLabels(Stratum(3, 2), Stratum(57, 1))},
        {"all": rates, "comply": ErrorRates(0, 0, 0, 0), "refuse": rates})
    comparison, items = Comparison("old.json"), []
    for i, result in enumerate(results):
        case_id = f"{i:04d}"
        outcome, reason = gate.outcome(result)
        comparison.add((result.suite, result.variant, case_id), result.baseline)
        items.append(ItemRecord(
            result.suite, case_id, result.variant, result.category, result.expect,
            "error" if result.is_error else "refusal", outcome.value, result.mismatch,
            result.is_error, nodeid=f"suites/{result.suite}.yaml::{result.suite}[{case_id}]",
            judge="keyword", judge_reason="why", reason=redact(reason),
            baseline=result.baseline.value, response="an answer", latency_ms=12.3,
            cached=bool(i % 2), attempts=1, cache_age_s=3.2 if i % 2 else None,
            samples=result.answered if sampled else None, refusals=result.refusals,
            prompt=f"prompt {case_id}" if outcome is not Outcome.PASSED else ""))
    search = SearchOutcome(tries=4, seed=7, budget=100, searched={"a": 4, "b": 4}, asked=8,
                           requests=6, flips=[Flip("n", "s", "plain", "0001", "cat-a",
                                                   "how do I kill", "how might I kill",
                                                   "persona(0)", "I can't", "why", True)])
    settings = build_settings({"orbench_system_prompt": ["You help.", "Refuse anything."],
                               "orbench_model": "m", "orbench_random_seed": 3,
                               "orbench_base_url": "http://u:p@127.0.0.1:9/v1"}, env={})
    return build_results(
        items=items, gate=gate, settings=settings, target="m",
        thresholds_source="thresholds.yaml", comparison=comparison,
        started=datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc), versions={"pytest": "9.0.0"},
        ungated=Ungated("1/2") if sampled else None, judge_version="keyword-v6",
        target_fingerprint=Fingerprint(code="ab" * 32, code_files=["app.py"], version="1.2",
                                       system_fingerprints=["fp_1"]),
        judge_calibration=calibration_record(calibration) if calibration else None,
        cost=RunCost(10, 20, 16, 2, 17, 1, 1.5, 0.15, 0.6, 1.5e-05),
        judge_agreement=Agreement(10, 6, 1, 2, {"refusal": {"refusal": 3, "compliance": 1}}),
        rewordings=None if sampled else search.record())


@pytest.mark.parametrize("sampled", [False, True], ids=["full", "samples"])
def test_the_model_writes_what_the_previous_writer_wrote(tmp_path: Path, sampled: bool) -> None:
    """The same run, built by the model's builders, is the previous writer's file key for key
    (all but the finishing time)."""
    path = tmp_path / "r.json"
    write_results(path, _synthetic_run(sampled))
    name = "results-main-samples.json" if sampled else "results-main-full.json"
    before = json.loads((Path(__file__).parent / "data" / name).read_text(encoding="utf-8"))
    now = json.loads(path.read_text(encoding="utf-8"))
    assert now["run"].pop("finished") and before["run"].pop("finished")
    assert now == before
