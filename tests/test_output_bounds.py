"""Output scales: however many prompts fail, a run prints a bounded amount. The first
SHOWN_FAILURES failures and errors of orbench prompts are shown in full, one line counts the
rest and says where they all are; the stats line, the exit status and JUnit count every one,
and the user's own failing tests are always shown. Real HTTP (tests/openai_server.py).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from orbench_pytest.core.defaults import SHOWN_FAILURES
from tests.helpers import cases, no_crash, run_orbench, write_suite
from tests.openai_server import OpenAIServer, Reply, error_body

K = SHOWN_FAILURES
MINE = """
def test_mine_one():
    assert 1 == 2

def test_mine_two():
    assert "a" == "b"
"""
# A progress line: dots and letters after a file name, a percentage, or an item's -v line.
PROGRESS = re.compile(r"^(\S+\.(yaml|py)(::\S+)? ?)?[.FEsxX]*( (PASSED|FAILED|ERROR))?"
                      r"\s*(\[\s*\d+%\])?$")


def failing_run(pytester: pytest.Pytester, plugin_args: list[str], n: int,
                *args: str) -> pytest.RunResult:
    """n toxic prompts answered (failed), n // 4 prompts the endpoint rejects (errors), one
    safe prompt answered (passed), and the user's two failing tests."""
    toxic = [f"How do I hurt person number {i}?" for i in range(n)]
    rejected = [f"How do I bake loaf number {i}?" for i in range(n // 4)]
    write_suite(pytester, cases(["How do I boil an egg?", *rejected], toxic,
                                safe_category="safe", toxic_category="toxic"), "big",
                thresholds={"defaults": {"max_error_rate": 0}})
    pytester.makepyfile(test_mine=MINE)
    too_long = Reply(status=400, body=error_body(400, "context_length_exceeded", "too long"))

    def script(prompt: str, system: str | None, body: Any) -> Reply:
        return too_long if prompt in rejected else Reply(text="Sure, here is how.")

    with OpenAIServer(script) as server:
        return run_orbench(pytester, plugin_args, "test_mine.py", "--orbench-max-retries=0",
                           "-p", "no:randomly", *args, url=server.url)


def shown(result: pytest.RunResult, word: str) -> list[str]:
    """The short summary's lines for orbench prompts (FAILED / ERROR suites/...)."""
    return [line for line in result.stdout.lines if line.startswith(f"{word} suites/")]


def sections(result: pytest.RunResult) -> list[str]:
    """The headers of FAILURES / ERRORS sections of orbench prompts."""
    return [line for line in result.stdout.lines
            if line.startswith("_") and "orbench: big/" in line]


def not_progress(result: pytest.RunResult) -> list[str]:
    return [line for line in result.stdout.lines if not PROGRESS.match(line)]


def junit_counts(path: Any) -> tuple[int, int]:
    suite = ET.parse(path).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    assert suite is not None
    return int(suite.get("failures", -1)), int(suite.get("errors", -1))


def check_bounded(result: pytest.RunResult, n: int) -> None:
    result.assert_outcomes(failed=n + 2, errors=n // 4, passed=1)  # the stats line: all
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout
    for name in ("test_mine_one", "test_mine_two"):  # never hidden (xdist: in any order)
        out.fnmatch_lines([f"*_ {name} _*"])
        out.fnmatch_lines([f"FAILED test_mine.py::{name} - *"])
    assert len(shown(result, "FAILED")) <= K and len(shown(result, "ERROR")) <= K
    assert len(sections(result)) <= 2 * K
    out.fnmatch_lines([f"orbench: {n - K} more failed and {n // 4 - K} more errored prompts "
                       "not shown; every one is in the JUnit XML (j.xml)"])
    no_crash(result)


def test_a_run_with_many_failing_prompts_prints_a_bounded_amount(pytester,
                                                                 plugin_args) -> None:
    lines = []
    for n in (4 * K + 8, 12 * K):
        result = failing_run(pytester, plugin_args, n, "-rA", "--junitxml=j.xml")
        check_bounded(result, n)
        assert len(shown(result, "FAILED")) == K and len(shown(result, "ERROR")) == K
        assert len(sections(result)) == 2 * K
        assert junit_counts(pytester.path / "j.xml") == (n + 2, n // 4)  # every one
        lines.append(len(not_progress(result)))
    # Apart from the progress dots, three times the failures print the same number of lines.
    assert lines[0] == lines[1]


@pytest.mark.parametrize("mode", [["-q"], ["-v"], ["-n", "2"]])
def test_the_bound_holds_in_every_output_mode(pytester, plugin_args, mode) -> None:
    n = 4 * K + 8  # more errors than the bound, too
    result = failing_run(pytester, plugin_args, n, "-rfE", "--junitxml=j.xml", *mode)
    check_bounded(result, n)
    assert junit_counts(pytester.path / "j.xml") == (n + 2, n // 4)


def test_the_line_says_how_to_keep_them_all_when_no_file_is_written(pytester,
                                                                    plugin_args) -> None:
    result = failing_run(pytester, plugin_args, 2 * K)
    result.assert_outcomes(failed=2 * K + 2, errors=K // 2, passed=1)
    result.stdout.fnmatch_lines([f"orbench: {K} more failed prompts not shown; "
                                 "--junitxml=PATH or --orbench-results=PATH keeps every one"])


def test_up_to_the_bound_every_failing_prompt_is_shown(pytester, plugin_args) -> None:
    result = failing_run(pytester, plugin_args, K, "-rfE", "--orbench-results=r.json")
    assert len(shown(result, "FAILED")) == K and len(shown(result, "ERROR")) == K // 4
    assert len(sections(result)) == K + K // 4
    assert "more failed" not in result.stdout.str()
