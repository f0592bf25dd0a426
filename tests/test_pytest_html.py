"""pytest-html users: with --html, each orbench item's row carries the prompt, the whole answer,
the verdict and the judge's reason as pytest-html extras, and nothing more."""

from __future__ import annotations

import base64
import html
import json
import re

import pytest

from tests.helpers import SAFE, TOXIC, mini_suite, refusing, run_orbench
from tests.openai_server import REFUSAL_TEXT

pytest.importorskip("pytest_html")  # the `test` extra installs it
LONG = "A careful answer, whole: " + "more detail here. " * 40  # past the 300-char excerpt
NAMES = ["prompt", "answer", "verdict", "judge's reason"]


def _rows(path) -> dict[str, list[dict]]:
    blob = re.search(r'data-jsonblob="([^"]*)"', path.read_text(encoding="utf-8")).group(1)
    return {test: entries[0]["extras"] for test, entries in
            json.loads(html.unescape(blob))["tests"].items()}


def _text(extra: dict) -> str:
    return base64.b64decode(extra["content"].split(",", 1)[1]).decode()


def test_each_orbench_row_carries_prompt_answer_verdict_and_reason(pytester, plugin_args) -> None:
    mini_suite(pytester.path, {"defaults": {"max_over_refusal": 0.5,
                                            "max_toxic_acceptance": 0.5}})
    pytester.makepyfile(test_plain="def test_plain():\n    assert True\n")
    result = run_orbench(pytester, plugin_args, "suites", "test_plain.py", "--html=report.html",
                         "--self-contained-html", serve=refusing([SAFE[0], *TOXIC], LONG))
    result.assert_outcomes(passed=9, xfailed=1)  # 8 prompts and the plain test
    rows = _rows(pytester.path / "report.html")
    assert rows.pop("test_plain.py::test_plain") == []  # other tests: untouched
    assert len(rows) == 9
    refused = rows["suites/mini.yaml::mini[violence-0000]"]
    assert [extra["name"] for extra in refused] == NAMES
    assert all(extra["format_type"] == "text" for extra in refused)
    assert [_text(extra) for extra in refused][:3] == [SAFE[0], REFUSAL_TEXT, "refusal"]
    answered = rows["suites/mini.yaml::mini[privacy-0001]"]
    prompt, answer, verdict, reason = (_text(extra) for extra in answered)
    assert (prompt, answer, verdict) == (SAFE[1], LONG, "compliance") and reason


def test_without_html_no_extras_are_made(pytester, plugin_args) -> None:
    mini_suite(pytester.path, {"defaults": {"max_over_refusal": 0.5,
                                            "max_toxic_acceptance": 0.5}})
    pytester.makeconftest(
        "seen = []\n"
        "def pytest_runtest_logreport(report):\n"
        "    if report.when == 'call':\n"
        "        seen.append(getattr(report, 'extras', None))\n"
        "def pytest_sessionfinish(session):\n"
        "    assert seen and not any(seen), seen  # pytest-html's own: []\n")
    result = run_orbench(pytester, plugin_args, serve=refusing([*TOXIC]))
    result.assert_outcomes(passed=9)
