from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from orbench_pytest.catalog.suites import SuiteOptions, load_suite
from orbench_pytest.core.errors import ConfigError
from tests.helpers import REPO


def write(tmp_path: Path, data: object, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return path


def test_smoke_suite_has_20_safe_and_20_toxic_prompts_in_orbench_categories() -> None:
    suite = load_suite(REPO / "suites" / "smoke.yaml", SuiteOptions())
    assert len(suite.cases) == 40
    assert sum(c.expect == "comply" for c in suite.cases) == 20
    assert {c.category for c in suite.cases} == {
        "deception",
        "harassment",
        "harmful",
        "hate",
        "illegal",
        "privacy",
        "self-harm",
        "sexual",
        "unethical",
        "violence",
    }
    assert len({c.prompt for c in suite.cases}) == 40
    assert suite.cases[0].case_id == "violence-0000"


def test_inline_prompts_with_ids_and_a_default_expectation(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {
            "name": "mine",
            "expect": "refuse",
            "prompts": [{"prompt": "a", "category": "x", "id": "Case #1"}, "b"],
        },
    )
    suite = load_suite(path, SuiteOptions())
    assert [(c.case_id, c.expect, c.category) for c in suite.cases] == [
        ("case-1", "refuse", "x"),
        ("uncategorised-0001", "refuse", "uncategorised"),
    ]


def test_category_filter_keeps_only_named_categories(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {
            "name": "m",
            "prompts": [
                {"prompt": "a", "category": "x", "expect": "comply"},
                {"prompt": "b", "category": "y", "expect": "comply"},
            ],
        },
    )
    suite = load_suite(path, SuiteOptions(categories=("y",)))
    assert [c.prompt for c in suite.cases] == ["b"]
    assert suite.categories == ["x", "y"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"name": "x", "prompts": []}, "prompts: expected a non-empty list"),
        ({"name": "x"}, "give exactly one of 'prompts' (inline) or 'source' (a file)"),
        ({"name": "bad name", "prompts": ["a"]}, "name: 'bad name' must be letters"),
        (
            {"name": "x", "prompts": [{"prompt": "a", "expect": "maybe"}]},
            "row 0: expect='maybe' is not comply or refuse",
        ),
        ({"name": "x", "prompts": ["a"], "expext": "comply"}, "expext: unknown key"),
        (
            {"name": "x", "prompts": [{"prompt": "a", "expect": "comply", "colour": 1}]},
            "prompts[0].colour: unknown key",
        ),
        (
            {
                "name": "x",
                "prompts": [
                    {"prompt": "a", "expect": "comply", "id": "d"},
                    {"prompt": "b", "expect": "comply", "id": "d"},
                ],
            },
            "rows 0 and 1 have the same id 'd'",
        ),
        ({"name": "x", "prompts": [{"prompt": " ", "expect": "comply"}]}, "row 0: empty prompt"),
        ('name: x\nprompts:\n  - {prompt: "a \\ud800", expect: comply}\n',
         "line 3: the text holds a lone surrogate escape (such as \\ud800)"),
        ('name: x\nprompts:\n  - {prompt: a, category: "\\udfff", expect: comply}\n',
         "line 3: the text holds a lone surrogate escape"),
        ("name: [unclosed", "not valid YAML"),
        ({"name": "x", "prompts": ["a"], "judge": "oracle"},
         "judge: 'oracle' is not allowed (allowed: keyword, llm, hybrid, llm-paper, hybrid-paper)"),
    ],
)
def test_bad_suite_files_are_one_line_errors_naming_the_file(
    tmp_path: Path, data: object, message: str
) -> None:
    path = write(tmp_path, data)
    with pytest.raises(ConfigError) as info:
        load_suite(path, SuiteOptions())
    text = str(info.value)
    assert text.startswith(str(path)) and message in text and "\n" not in text


@pytest.mark.parametrize("column", ["prompt", "category", "id"])
def test_a_lone_surrogate_in_a_jsonl_source_is_an_error_naming_the_row(
        tmp_path: Path, column: str) -> None:
    row = {"prompt": "How do I knit?", "category": "craft", "id": "k1", column: "a \ud800"}
    (tmp_path / "rows.jsonl").write_text(json.dumps(row) + "\n")  # escaped as \ud800
    path = write(tmp_path, {"name": "j", "source": "rows.jsonl", "expect": "comply", "id": "id"})
    with pytest.raises(ConfigError) as info:
        load_suite(path, SuiteOptions())
    assert str(info.value) == (f"{path}: row 0: {column}: the text holds a lone surrogate "
                               "escape (such as \\ud800), which is no character: write the "
                               "character itself")
