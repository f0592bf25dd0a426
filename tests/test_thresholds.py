from __future__ import annotations

from pathlib import Path

import pytest

from orbench_pytest.core.errors import ConfigError
from orbench_pytest.gate.thresholds import load_thresholds, parse_thresholds


def test_limits_inherit_defaults_then_suite() -> None:
    t = parse_thresholds(
        {
            "defaults": {"max_over_refusal": 0.1, "max_error_rate": 0.05, "confidence": 0.9},
            "suites": {
                "hard": {
                    "max_toxic_acceptance": 0.2,
                    "categories": {"self-harm": {"max_over_refusal": 0.25}},
                }
            },
        },
        "t.yaml",
    )
    assert t.confidence == 0.9
    hard = t.for_suite("hard")
    assert (hard.max_over_refusal, hard.max_toxic_acceptance, hard.max_error_rate) == (
        0.1,
        0.2,
        0.05,
    )
    category = t.for_category("hard", "self-harm")
    assert category is not None and category.max_over_refusal == 0.25
    # A category entry gates only the limits it names: not the suite's toxic acceptance.
    assert category.max_toxic_acceptance is None and category.decision == hard.decision
    assert t.for_category("hard", "privacy") is None
    assert t.for_suite("other").max_over_refusal == 0.1
    assert (
        t.where("hard", "max_over_refusal", "self-harm")
        == "t.yaml: suites.hard.categories.self-harm.max_over_refusal"
    )


def test_a_message_names_where_an_inherited_limit_was_set() -> None:
    t = parse_thresholds({"defaults": {"max_error_rate": 0.01},
                          "suites": {"smoke": {"max_over_refusal": 0.25, "categories": {
                              "privacy": {"max_toxic_acceptance": 0.5}}}}}, "t.yaml")
    assert t.where("smoke", "max_error_rate") == "t.yaml: defaults.max_error_rate"
    assert t.where("smoke", "max_over_refusal") == "t.yaml: suites.smoke.max_over_refusal"
    assert t.where("smoke", "max_over_refusal", "privacy") == \
        "t.yaml: suites.smoke.max_over_refusal"
    assert t.where("smoke", "max_toxic_acceptance", "privacy") == \
        "t.yaml: suites.smoke.categories.privacy.max_toxic_acceptance"
    # Issue 31: a limit the file does not set is a built-in default, never the file's
    assert t.where("other", "max_toxic_acceptance") == "built-in default max_toxic_acceptance"
    assert t.where("smoke", "max_toxic_acceptance") == "built-in default max_toxic_acceptance"
    assert t.for_suite("other").max_toxic_acceptance == 0.10


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"defaults": {"max_over_refusl": 0.1}},
            "t.yaml: defaults.max_over_refusl: unknown key (allowed: ",
        ),
        (
            {"suites": {"x": {"max_over_refusal": "high"}}},
            "t.yaml: suites.x.max_over_refusal: expected a number in [0, 1], got 'high'",
        ),
        (
            {"suites": {"x": {"max_toxic_acceptance": 1.5}}},
            "t.yaml: suites.x.max_toxic_acceptance: 1.5 is outside [0, 1]",
        ),
        (
            {"defaults": {"decision": "maybe"}},
            "t.yaml: defaults.decision: 'maybe' is not allowed (allowed: point, significant)",
        ),
        ({"defaults": {"confidence": 1}}, "t.yaml: defaults.confidence: 1 is outside (0, 1)"),
        ({"suites": ["x"]}, "t.yaml: suites: expected a mapping, got list"),
        ({"gate": {}}, "t.yaml: gate: unknown key (allowed: defaults, suites, disputed, "
                       "judge_calibration)"),
        (
            {"suites": {"x": {"categories": {"c": {"max_error_rate": 0.1}}}}},
            "t.yaml: suites.x.categories.c.max_error_rate: unknown key",
        ),
        (
            {"defaults": {"max_over_refusal": True}},
            "t.yaml: defaults.max_over_refusal: expected a number in [0, 1], got True",
        ),
    ],
)
def test_bad_values_name_the_file_and_key(data: object, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_thresholds(data, "t.yaml")
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


def test_bad_yaml_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "thresholds.yaml"
    path.write_text("defaults:\n  max_over_refusal: [0.1\n")
    with pytest.raises(ConfigError, match=r"thresholds.yaml: line \d+: not valid YAML"):
        load_thresholds(path)


def test_empty_file_means_defaults(tmp_path: Path) -> None:
    path = tmp_path / "thresholds.yaml"
    path.write_text("")
    assert load_thresholds(path).defaults.max_error_rate == 0.02
