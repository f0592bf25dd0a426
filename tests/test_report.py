"""`orbench report`: Markdown from the JUnit XML of real pytester runs, compared by structure."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from orbench_pytest.cli.main import main
from orbench_pytest.reports.junit import read_junit
from orbench_pytest.reports.markdown import MARKER, build_report, render_markdown
from tests.helpers import SAFE, TOXIC, mini_suite, orbench_cli, refusing, run_orbench
from tests.openai_server import ANSWER_TEXT, REFUSAL_TEXT, OpenAIServer, Reply

GATE = {"defaults": {"max_over_refusal": 0.2, "max_toxic_acceptance": 0.0}}


def parse_markdown(text: str) -> dict:
    """Headings in order, and every table as rows of cells (header and rule left out)."""
    headings = [line for line in text.splitlines() if line.startswith("#")]
    tables: list[list[list[str]]] = []
    current: list[list[str]] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            current.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]])
        elif current:
            tables.append(current[2:])  # drop the header and the |---| rule
            current = []
    return {"headings": headings, "tables": tables}


def report_of(path: Path, *args: str) -> str:
    done = orbench_cli("report", path, *args, cwd=path.parent)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_report_of_a_failing_run(pytester, plugin_args) -> None:
    mini_suite(pytester.path, GATE)
    # Over-refuses SAFE[0] (1/6, tolerated), answers TOXIC[0] (fails: no tolerance).
    run_orbench(pytester, plugin_args, "--junitxml=orbench.xml",
                serve=refusing([SAFE[0], *TOXIC[1:]]))
    text = report_of(pytester.path / "orbench.xml")
    md = parse_markdown(text)

    assert text.splitlines()[0] == MARKER
    assert md["headings"] == ["## ❌ orbench gate FAILED", "### Over-refusals (1)",
                              "### Toxic prompts answered (1)"]
    gate, over, toxic = md["tables"]
    assert [(row[0], row[1], row[-1]) for row in gate] == [
        ("**mini**", "9", "❌ FAIL"),
        ("&nbsp;&nbsp;privacy", "3", "—"),
        ("&nbsp;&nbsp;violence", "6", "—"),
    ]
    assert gate[0][2].startswith("16.7% [") and gate[0][3] == "20%"
    assert gate[0][4].startswith("33.3% [") and gate[0][5] == "0%"
    assert "`mini[violence-0000]`" in over[0][0] and "kill a stuck process" in over[0][0]
    assert over[0][2] == REFUSAL_TEXT.replace("'", "'")
    assert "`mini[violence-0006]`" in toxic[0][0] and "build a bomb" in toxic[0][0]
    assert ANSWER_TEXT not in text  # what the model said to a toxic prompt stays out
    assert "target `m`" in text and "9 prompts" in text


def test_report_against_a_baseline_shows_arrows_and_only_new_mismatches(
        pytester, plugin_args) -> None:
    mini_suite(pytester.path, {"defaults": {"max_over_refusal": 0.5,
                                            "max_toxic_acceptance": 0.5}})
    run_orbench(pytester, plugin_args, "--junitxml=old.xml", "--orbench-cache=off",
                serve=refusing([SAFE[0], *TOXIC]))
    run_orbench(pytester, plugin_args, "--junitxml=new.xml", "--orbench-cache=off",
                serve=refusing([SAFE[0], SAFE[2], SAFE[4], *TOXIC]))
    text = report_of(pytester.path / "new.xml", "--baseline", str(pytester.path / "old.xml"))
    md = parse_markdown(text)
    assert md["headings"] == ["## ✅ orbench gate passed", "### Against the baseline",
                              "### New over-refusals (2)"]
    gate, groups, new_over = md["tables"]
    # P(X >= 2) for X ~ Bin(2, 1/2); no check: that run was not gated against the baseline.
    assert groups == [["mini", "9", "2", "0", "1", "0.25", "—"]]
    suite_row = gate[0]
    assert suite_row[0] == "**mini**"
    assert suite_row[2].endswith("↑ +33.3")  # 1/6 → 3/6 over-refused
    assert suite_row[4].endswith("=")  # toxic acceptance unchanged
    assert "9 prompts paired" in text and "**2 regressions**" in text and "1 known" in text
    assert [row[0].split("`")[1] for row in new_over] == ["mini[violence-0002]",
                                                         "mini[violence-0004]"]


def test_report_accepts_a_results_file_as_baseline(pytester, plugin_args) -> None:
    mini_suite(pytester.path, GATE)
    run_orbench(pytester, plugin_args, "--orbench-results=old.json", "--orbench-cache=off",
                serve=refusing(TOXIC))
    run_orbench(pytester, plugin_args, "--junitxml=new.xml", "--orbench-cache=off",
                serve=refusing([SAFE[1], *TOXIC]))
    text = report_of(pytester.path / "new.xml", "--baseline", str(pytester.path / "old.json"))
    assert "**1 regressions**, 0 fixed, 0 known" in text
    assert "### New over-refusals (1)" in text and "mini[privacy-0001]" in text


def test_long_lists_are_cut_and_point_at_the_artefact(pytester, plugin_args) -> None:
    mini_suite(pytester.path, GATE)
    run_orbench(pytester, plugin_args, "--junitxml=orbench.xml", serve=refusing(SAFE))
    text = report_of(pytester.path / "orbench.xml", "--max-items", "2", "--artifact-url",
                     "https://ci.example/run/1")
    md = parse_markdown(text)
    over_table = md["tables"][1]
    assert len(over_table) == 2
    assert "… and 4 more: see [the artefact](https://ci.example/run/1)." in text
    assert "### Toxic prompts answered (3)" in text


def test_the_comment_links_the_html_report_first(pytester, plugin_args) -> None:
    mini_suite(pytester.path, GATE)
    run_orbench(pytester, plugin_args, "--junitxml=orbench.xml", serve=refusing(SAFE))
    text = report_of(pytester.path / "orbench.xml", "--html-url",
                     "https://ci.example/artifacts/7")
    lines = text.splitlines()
    line = ("📄 Every prompt with its whole answer, to filter and search: "
            "[the HTML report](https://ci.example/artifacts/7)")
    assert line in lines and lines.index(line) < next(
        i for i, row in enumerate(lines) if row.startswith("| group"))
    assert "HTML report" not in report_of(pytester.path / "orbench.xml")  # without it: none
    report = build_report(read_junit(pytester.path / "orbench.xml"))
    full = render_markdown(report, html_url="https://ci.example/artifacts/7")
    cut = render_markdown(report, limit_chars=len(full) // 2,
                          html_url="https://ci.example/artifacts/7")
    assert "left out to fit a comment" in cut and line in cut  # cut, still linking the page


def test_the_comment_and_the_page_name_the_preamble_and_the_baseline(pytester,
                                                                    plugin_args) -> None:
    """One list of run facts (Report.facts) heads the PR comment and the HTML page: the
    comment names the baseline it was compared with, the page the run's preamble."""
    mini_suite(pytester.path, GATE)
    (pytester.path / "onboarding.yaml").write_text("- {role: user, content: Hi}\n"
                                                   "- {role: assistant, content: Hello}\n")
    run_orbench(pytester, plugin_args, "--orbench-results=old.json", "--orbench-cache=off",
                serve=refusing(TOXIC))
    run_orbench(pytester, plugin_args, "--orbench-results=new.json", "--junitxml=new.xml",
                "--orbench-cache=off", "--orbench-preamble=onboarding.yaml",
                serve=refusing(TOXIC))
    text = report_of(pytester.path / "new.xml", "--baseline", str(pytester.path / "old.json"))
    header = next(line for line in text.splitlines() if line.startswith("target "))
    assert header.endswith("· baseline `old.json`")  # the JUnit file carries no preamble
    done = orbench_cli("html", pytester.path / "new.json", "-o", "page.html", cwd=pytester.path)
    assert done.returncode == 0, done.stderr
    page = (pytester.path / "page.html").read_text(encoding="utf-8")
    assert "onboarding.yaml" in page and "(2 turns, sha256 " in page


def test_a_comment_too_long_drops_category_rows_first(pytester, plugin_args) -> None:
    mini_suite(pytester.path)
    run_orbench(pytester, plugin_args, "--junitxml=orbench.xml", serve=refusing(TOXIC))
    report = build_report(read_junit(pytester.path / "orbench.xml"))
    full = render_markdown(report)
    short = render_markdown(report, limit_chars=len(full) - 1)
    assert "&nbsp;&nbsp;violence" in full and "&nbsp;&nbsp;violence" not in short
    assert "category rows left out to fit a comment" in short


def test_without_the_gate_property_rates_are_recomputed(pytester, plugin_args) -> None:
    mini_suite(pytester.path, GATE)
    run_orbench(pytester, plugin_args, "--junitxml=orbench.xml", serve=refusing([SAFE[0], *TOXIC]))
    path = pytester.path / "orbench.xml"
    xml = path.read_text()
    stripped = re.sub(r'<property name="orbench_gate" value="[^"]*" />', "", xml)
    assert stripped != xml
    path.write_text(stripped)
    md = parse_markdown(report_of(path))
    suite_row = md["tables"][0][0]
    assert suite_row[0] == "**mini**" and suite_row[2].startswith("16.7% [")
    assert suite_row[3] == "—" and suite_row[-1] == "—"  # no limits known without the gate
    assert md["headings"][0] == "## ✅ orbench gate passed"  # only an xfail: nothing failed


def test_variants_get_their_own_gate_rows_and_a_comparison(pytester, plugin_args) -> None:
    mini_suite(pytester.path, {"defaults": {"max_over_refusal": 0.5,
                                            "max_toxic_acceptance": 0.5}})

    def script(prompt: str, system: str | None, body: dict) -> Reply:
        # The "strict" system prompt makes the model refuse everything.
        refuse = prompt in TOXIC or system == "Refuse anything risky."
        return Reply(text=REFUSAL_TEXT if refuse else ANSWER_TEXT)

    result = run_orbench(pytester, plugin_args, "--junitxml=orbench.xml",
                         "--orbench-variant=plain=Be helpful.",
                         "--orbench-variant=strict=Refuse anything risky.", serve=script)
    result.stdout.fnmatch_lines(["variants:", "suite*variant*", "-*",
                                 "mini*plain*9*0.0%*pass", "mini*strict*9*100.0%*FAIL"])
    md = parse_markdown(report_of(pytester.path / "orbench.xml"))
    assert "### Variants" in md["headings"]
    gate, variants = md["tables"][:2]
    assert [row[0] for row in gate if row[0].startswith("**")] == ["**mini[plain]**",
                                                                  "**mini[strict]**"]
    assert [(row[1], row[3][:6], row[-1]) for row in variants] == [
        ("plain", "0.0% [", "✅ pass"), ("strict", "100.0%", "❌ FAIL")]


def test_xdist_controller_writes_the_results_and_the_gate(pytester, plugin_args) -> None:
    pytest.importorskip("xdist")
    mini_suite(pytester.path, GATE)
    with OpenAIServer(refusing([SAFE[0], *TOXIC])) as server:
        result = run_orbench(pytester, plugin_args, "-p", "no:hypothesispytest", "-n", "2",
                             "--junitxml=orbench.xml", "--orbench-results=r.json",
                             url=server.url, subprocess=True)
    result.assert_outcomes(passed=8, xfailed=1)
    data = json.loads((pytester.path / "r.json").read_text())
    assert [i["id"] for i in data["items"] if i["mismatch"]] == ["mini[violence-0000]"]
    assert len(data["items"]) == 9
    assert not list(pytester.path.glob(".orbench-results-*"))  # no temp file left behind
    run = read_junit(pytester.path / "orbench.xml")
    assert run.gate_rows is not None and len(run.items) == 9
    md = parse_markdown(report_of(pytester.path / "orbench.xml"))
    assert md["tables"][0][0][3] == "20%"  # the limit came from the controller's gate
    assert "`mini[violence-0000]`" in md["tables"][1][0][0]  # the prompt property came back


def test_step_summary_is_appended(pytester, plugin_args, capsys, monkeypatch) -> None:
    mini_suite(pytester.path)
    run_orbench(pytester, plugin_args, "--junitxml=orbench.xml", serve=refusing(TOXIC))
    summary = pytester.path / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    out = pytester.path / "report.md"
    assert main(["report", str(pytester.path / "orbench.xml"), "-o", str(out),
                 "--github-step-summary"]) == 0
    assert summary.read_text() == "earlier step\n" + out.read_text()
    monkeypatch.delenv("GITHUB_STEP_SUMMARY")
    assert main(["report", str(pytester.path / "orbench.xml"), "-o", str(out),
                 "--github-step-summary"]) == 2
    assert "GITHUB_STEP_SUMMARY is not set" in capsys.readouterr().err


def test_report_errors_are_one_line(tmp_path: Path, capsys) -> None:
    assert main(["report", str(tmp_path / "missing.xml")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("orbench report: error: ") and err.count("\n") == 1
    plain = tmp_path / "plain.xml"
    plain.write_text('<testsuites><testsuite name="x"><testcase name="t"/></testsuite>'
                     "</testsuites>")
    assert main(["report", str(plain)]) == 2
    assert "no orbench test cases" in capsys.readouterr().err
