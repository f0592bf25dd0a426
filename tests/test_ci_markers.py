"""Untrusted text is inert for every CI system a team may run: no CI marker of
core/untrusted.py's MARKERS table (GitHub Actions, Azure Pipelines, GitLab, Buildkite,
TeamCity) survives into any output: the terminal, JUnit XML, the results file, the PR comment,
the labels CSV.

Before: only GitHub's `::` and `##[` were defused, so a category
`##vso[task.complete result=Succeeded]x` started a row of the gate table (Azure Pipelines then
marked the job succeeded) and labels.csv held `##vso[…]` at column 0."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from orbench_pytest.core.untrusted import (
    MARKERS,
    csv_cell,
    csv_value,
    inert_text,
    json_escape,
    markdown_code,
    markdown_text,
    terminal_line,
    terminal_text,
)
from orbench_pytest.core.untrusted import defused as defused_by
from tests.helpers import REPO, SUBPROCESS_TIMEOUT_S, no_crash, orbench_cli

# Detectors written apart from the code under test: what each CI system obeys, as its docs say.
AT_LINE_START = re.compile(r"^[ \t]*(?:::|(?:---|\+\+\+|~~~)[ \t]|\^\^\^[ \t]+\+\+\+)")
ANYWHERE = re.compile(r"##(?:vso|teamcity)?\[|section_(?:start|end):", re.IGNORECASE)
HOSTILE = ("##vso[task.complete result=Succeeded]x", "::error::forged", "##[group]g",
           "##teamcity[buildStatus status='SUCCESS']", "section_start:1:sec",
           "--- group", "+++ open", "~~~ shut", "^^^ +++", "  ::warning::w",
           "##VSO[task.setvariable variable=x]1", "\x1b[0Ksection_end:1:sec\r\x1b[0K")


def obeyed(text: str) -> list[str]:
    """The lines of `text` a CI system would obey (empty: the text is inert)."""
    return [line for line in re.split(r"\r\n|[\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]", text)
            if AT_LINE_START.search(line) or ANYWHERE.search(line)]


# --- the one function ----------------------------------------------------------------------------

marker_text = st.lists(st.one_of(st.sampled_from(HOSTILE), st.sampled_from(["\n", " ", "\t",
                                                                            "\u2028", "#",
                                                                            ":", "-", "+"]),
                                 st.text(max_size=4)), max_size=8).map("".join)


@given(marker_text)
def test_no_rendering_lets_a_marker_through(text: str) -> None:
    for render in (terminal_line, terminal_text, inert_text, markdown_text, markdown_code):
        assert not obeyed(render(text)), (render.__name__, render(text))
    cell = csv_cell(text)
    assert isinstance(cell, str) and not obeyed(cell) and csv_value(cell) == text
    line = json.dumps(text, ensure_ascii=False)
    written = defused_by(line, json_escape)
    assert not obeyed(written) and json.loads(written) == text


def test_every_marker_of_the_table_is_defused_and_has_a_source() -> None:
    for marker in MARKERS:
        assert marker.source.startswith("https://"), marker
        example = marker.example.split(" (")[0]
        assert obeyed(example), marker  # the detector knows it: the table is not weaker
        assert not obeyed(terminal_line(example)), marker
    docs = (REPO / "docs" / "hostile-input.md").read_text(encoding="utf-8")
    for marker in MARKERS:  # the docs' table lists every row, with its source
        assert marker.source in docs and marker.system in docs, marker


def test_plain_text_is_left_as_it_is() -> None:
    for text in ("a -- b", "x ::y", "#1 [link]", "section start", "a ---", "C++ is fine"):
        assert terminal_text(text) == text and csv_cell(text) == text


# --- every output of a real run ------------------------------------------------------------------

APP = '''
ANSWERS = {ANSWERS!r}

def answer(prompt, system_prompt):
    number = int(prompt.split()[1])
    if prompt.startswith("safe") and number % 2:  # over-refused: failures to show
        return "I'm sorry, but I can't help with that."
    return ANSWERS[number % len(ANSWERS)]  # toxic prompts answered: failures too
'''


@pytest.fixture
def hostile_run(pytester: pytest.Pytester, plugin_args: list[str]) -> dict[str, str]:
    """A run whose categories, prompts and answers hold every marker; its outputs by name."""
    rows = [{"prompt": f"safe {i} {text}", "expect": "comply", "category": text}
            for i, text in enumerate(HOSTILE)]
    rows += [{"prompt": f"toxic {i} {text}", "expect": "refuse", "category": text}
             for i, text in enumerate(HOSTILE)]
    (pytester.path / "suites").mkdir()
    (pytester.path / "suites" / "s.yaml").write_text(
        yaml.safe_dump({"name": "s", "prompts": rows}), encoding="utf-8")
    (pytester.path / "app.py").write_text(APP.replace("{ANSWERS!r}", repr(
        [f"Sure.\n{text}\nmore {text}" for text in HOSTILE])), encoding="utf-8")
    result = pytester.runpytest_subprocess(
        *plugin_args, "suites", "--orbench-target=app:answer", "-rA", "-vv",
        "--orbench-results=run.json", "--junitxml=run.xml", "-p", "no:cacheprovider",
        "--orbench-strict", timeout=SUBPROCESS_TIMEOUT_S)
    assert result.ret == 1
    outputs = {"terminal": no_crash(result)}
    for name in ("run.json", "run.xml"):
        outputs[name] = (pytester.path / name).read_text(encoding="utf-8")
    report = orbench_cli("report", "run.xml", "--baseline", "run.json", cwd=pytester.path)
    assert report.returncode == 0, report.stderr
    outputs["PR comment"] = report.stdout + report.stderr
    label = orbench_cli("label", "run.json", "-o", "labels.csv", "--n", "24",
                        "--suite", "suites/s.yaml", input="c\n" * 24, cwd=pytester.path)
    assert label.returncode == 0, label.stderr
    outputs["orbench label"] = label.stdout + label.stderr
    outputs["labels.csv"] = (pytester.path / "labels.csv").read_text(encoding="utf-8")
    check = orbench_cli("judge-check", "labels.csv", cwd=pytester.path)
    outputs["judge-check"] = check.stdout + check.stderr
    return outputs


def test_no_output_of_a_run_holds_a_live_marker(hostile_run: dict[str, str]) -> None:
    for name, text in hostile_run.items():
        assert "Succeeded" in text or name == "judge-check", name  # the text is there
        assert not obeyed(text), (name, obeyed(text)[:5])
