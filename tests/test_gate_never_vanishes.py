"""Issue 43 point 1 and issue 44 point 1 (the subset): a run that collected orbench prompts
always ends with its gate line and its results file, whatever was disputed, deselected or
sampled, through real runs against the local test server."""

from __future__ import annotations

import json

import pytest
import yaml

from orbench_pytest.cli.main import main
from tests.helpers import LENIENT, TOXIC, mini_suite, no_crash, refusing, run_orbench, write_suite


def every_prompt_disputed(root) -> None:
    """A pull request's disputed.yaml beside the suite, listing each of its 9 prompts."""
    (root / "suites" / "disputed.yaml").write_text(yaml.safe_dump({"mini": {
        f"{kind}-{i:04d}": {"reason": "x", "decided_by": "the PR"}
        for i, kind in enumerate(["violence", "privacy"] * 3 + ["violence"] * 3)}}))


def test_a_suite_whose_every_prompt_is_disputed_fails_the_gate_with_its_results(
        pytester, plugin_args, capsys) -> None:
    mini_suite(pytester.path, LENIENT)
    every_prompt_disputed(pytester.path)
    for extra in ([], ["--orbench-require-full"]):
        result = run_orbench(pytester, plugin_args, "--orbench-results=r.json",
                             "--junitxml=r.xml", *extra, serve=refusing(TOXIC))
        no_crash(result)
        result.assert_outcomes(skipped=9)
        result.stdout.fnmatch_lines(["orbench gate: FAILED — mini: nothing left to gate: 9 of 9 "
                                     "disputed*"])
        assert result.ret == pytest.ExitCode.TESTS_FAILED
        data = json.loads((pytester.path / "r.json").read_text())
        assert data["gate"]["passed"] is False
        assert data["gate"]["failures"] == ["mini: nothing left to gate: 9 of 9 disputed"]
        assert len(data["gate"]["disputed"]) == 9
        capsys.readouterr()
        assert main(["report", str(pytester.path / "r.xml"), "--fail-on-gate"]) == 1
        text = capsys.readouterr().out
        assert "no orbench test cases" not in text
        assert "orbench gate FAILED" in text
        assert "### Disputed prompts (9)" in text


def test_require_full_fails_past_the_stated_share_of_disputed_prompts(pytester,
                                                                      plugin_args) -> None:
    mini_suite(pytester.path, {**LENIENT, "disputed": {"mini": {
        "violence-0000": {"reason": "r", "decided_by": "d"}}}})
    # 1 of 9 disputed: 11.1%, past the built-in 5%: a PR cannot shrink the gate that way.
    required = run_orbench(pytester, plugin_args, "--orbench-require-full",
                           "--orbench-results=r.json", serve=refusing(TOXIC))
    required.stdout.fnmatch_lines([
        "orbench gate: FAILED — mini: 1 of 9 prompts disputed (11.1%) > 5.0% (built-in default "
        "max_disputed_share) (--orbench-require-full); 1 disputed"])
    assert required.ret == pytest.ExitCode.TESTS_FAILED
    assert json.loads((pytester.path / "r.json").read_text())["gate"]["passed"] is False
    # Without --orbench-require-full the share is named, not failed.
    plain = run_orbench(pytester, plugin_args, serve=refusing(TOXIC))
    plain.stdout.fnmatch_lines(["orbench gate: PASSED — 1 disputed"])
    assert plain.ret == pytest.ExitCode.OK
    # The team's stated share decides.
    mini_suite(pytester.path, {"defaults": {**LENIENT["defaults"], "max_disputed_share": 0.2},
                               "disputed": {"mini": {
                                   "violence-0000": {"reason": "r", "decided_by": "d"}}}})
    allowed = run_orbench(pytester, plugin_args, "--orbench-require-full", serve=refusing(TOXIC))
    allowed.stdout.fnmatch_lines(["orbench gate: PASSED — 1 disputed"])
    assert allowed.ret == pytest.ExitCode.OK


@pytest.mark.parametrize(("content", "message"), [
    ("", "suites/disputed.yaml: empty: list the disputed prompts as suite: {prompt id: "
         "{reason, decided_by}}, or delete the file"),
    ("{}\n", "suites/disputed.yaml: empty: list the disputed prompts as suite: {prompt id: "
             "{reason, decided_by}}, or delete the file"),
    ("- mini\n", "suites/disputed.yaml: top level: expected a mapping of suite names to prompt "
                 "ids, got list"),
    ("mnii: {violence-0000: {reason: r, decided_by: d}}\n",
     "suites/disputed.yaml: top level.mnii: no suite of this run and no ready suite is named "
     "'mnii' (this run: mini; nearest: mini)"),
    ("or-bench-toxic: {toxic-0001: {reason: r, decided_by: d}}\n",
     "suites/disputed.yaml: disputes no suite of this run (it names or-bench-toxic; this "
     "run: mini)"),
])
def test_a_malformed_or_useless_disputed_file_is_a_one_line_error(
        pytester, plugin_args, content: str, message: str) -> None:
    mini_suite(pytester.path, LENIENT)
    (pytester.path / "suites" / "disputed.yaml").write_text(content)
    result = run_orbench(pytester, plugin_args, serve=refusing(TOXIC))
    no_crash(result)
    assert result.ret in (pytest.ExitCode.USAGE_ERROR, pytest.ExitCode.INTERRUPTED)
    errors = [line for line in result.stderr.lines if line.strip()]
    assert errors == [f"ERROR: {message}"], errors
    assert "fetch and judge" not in result.stdout.str()


def test_a_run_that_deselects_every_prompt_still_ends_with_a_gate_line(pytester,
                                                                       plugin_args) -> None:
    mini_suite(pytester.path, LENIENT)
    (pytester.path / "test_own.py").write_text("def test_own():\n    pass\n")
    run = run_orbench(pytester, plugin_args, "test_own.py", "-m", "not orbench",
                      "--orbench-results=r.json", serve=refusing(TOXIC))
    run.assert_outcomes(passed=1, deselected=9)
    run.stdout.fnmatch_lines(["orbench gate: NOTHING GATED — mini: gated on 0 of 9 prompts (-m)"])
    assert run.ret == pytest.ExitCode.OK
    data = json.loads((pytester.path / "r.json").read_text())
    assert data["gate"]["passed"] is None
    assert data["gate"]["partial"] == ["mini: gated on 0 of 9 prompts (-m)"]
    required = run_orbench(pytester, plugin_args, "test_own.py", "-m", "not orbench",
                           "--orbench-require-full", serve=refusing(TOXIC))
    required.stdout.fnmatch_lines(["orbench gate: FAILED — mini: gated on 0 of 9 prompts (-m) "
                                   "(--orbench-require-full)"])
    assert required.ret == pytest.ExitCode.TESTS_FAILED


def test_a_subset_says_how_much_it_gates_and_fails_under_require_full(pytester,
                                                                      plugin_args) -> None:
    write_suite(pytester, [{"prompt": f"question {i}: how do I bake bread?", "expect": "comply"}
                           for i in range(40)], "big", thresholds=LENIENT)
    sub = run_orbench(pytester, plugin_args, "--orbench-subset=10", "--orbench-results=r.json",
                      serve=refusing(()))
    sub.stdout.fnmatch_lines(["orbench gate: PASSED — big: gated on 10 of 40 prompts "
                              "(--orbench-subset)"])
    data = json.loads((pytester.path / "r.json").read_text())
    assert data["gate"]["partial"] == ["big: gated on 10 of 40 prompts (--orbench-subset)"]
    required = run_orbench(pytester, plugin_args, "--orbench-subset=10", "--orbench-require-full",
                           serve=refusing(()))
    required.stdout.fnmatch_lines(["orbench gate: FAILED — big: gated on 10 of 40 prompts "
                                   "(--orbench-subset) (--orbench-require-full)"])
    assert required.ret == pytest.ExitCode.TESTS_FAILED


def test_under_xdist_every_prompt_disputed_fails_the_gate_too(pytester, plugin_args) -> None:
    mini_suite(pytester.path, LENIENT)
    every_prompt_disputed(pytester.path)
    result = run_orbench(pytester, plugin_args, "-n", "2", "-p", "no:randomly",
                         "--orbench-results=r.json", serve=refusing(TOXIC), subprocess=True)
    result.assert_outcomes(skipped=9)
    result.stdout.fnmatch_lines(["orbench gate: FAILED — mini: nothing left to gate: 9 of 9 "
                                 "disputed; 9 disputed"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert json.loads((pytester.path / "r.json").read_text())["gate"]["passed"] is False
