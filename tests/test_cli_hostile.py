"""Hostile files and options given to the `orbench` command, run as a user runs it: no output
a CI log obeys (a `::` command at a line's start, `##[`), no raw escape, no mention in the PR
comment; bad input is one line naming the file or option and what is allowed."""

from __future__ import annotations

import configparser
import csv
import io
import json
import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from iniconfig import IniConfig

from orbench_pytest.cli.init_project import init_project
from orbench_pytest.cli.init_values import tomllib
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.untrusted import csv_cell, csv_value
from orbench_pytest.judges.check import read_labels
from orbench_pytest.reports.markdown import GITHUB_COMMENT_LIMIT
from tests.helpers import SUBPROCESS_TIMEOUT_S, labels_file, orbench_cli, results_file

FORGED = "x\n::error file=a.py,line=1::forged @octocat\x1b[2J ##[group]g"
COMMAND_LINE = re.compile(r"(?m)^\s*::")
FORMULA = tuple("=+-@\t\r")  # a cell a spreadsheet runs


def assert_inert(text: str) -> None:
    """Nothing in `text` a terminal or GitHub's log would obey."""
    assert "\x1b" not in text and "##[" not in text, text
    assert not COMMAND_LINE.search(text), text


def one_line_error(done: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert_inert(done.stderr)
    return lines[0]


# --- thresholds --explain and compare: names from files -----------------------------------------

def test_thresholds_explain_shows_the_files_keys_inert(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump({"suites": {FORGED: {"max_over_refusal": 0.1,
                                                        "categories": {FORGED: {}}}}}))
    done = orbench_cli("thresholds", "--explain", "--file", path, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "forged @octocat" in done.stdout and "(any other suite)" in done.stdout
    assert_inert(done.stdout)


def test_thresholds_explain_of_a_suite_nothing_defines_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump({"suites": {"mine": {"max_over_refusal": 0.3}}}))
    done = orbench_cli("thresholds", "--explain", "nosuch", cwd=tmp_path)
    one_line_error(done, "'nosuch'", "built-in defaults", "smoke", "(any other suite)")
    done = orbench_cli("thresholds", "--explain", "--file", path, "nosuch", cwd=tmp_path)
    one_line_error(done, "'nosuch'", "t.yaml", "named: mine", "smoke")
    # what the file names, and a ready suite, are explained
    done = orbench_cli("thresholds", "--explain", "--file", path, "mine", "smoke", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert re.search(r"(?m)^smoke +max_over_refusal", done.stdout)
    assert re.search(r"(?m)^mine +max_over_refusal +30%", done.stdout)


def test_compare_shows_the_runs_targets_inert(tmp_path: Path) -> None:
    files = []
    for i, target in enumerate(["\x1b[2J::error::m @octocat", "t\n::error::t", "plain"]):
        path = results_file(tmp_path / f"r{i}.json", over=i, toxic_refused=5 + i)
        data = json.loads(path.read_text())
        data["run"]["target"] = target
        path.write_text(json.dumps(data))
        files.append(path)
    done = orbench_cli("compare", *files, "--published", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "\\x1b[2J::error::m @octocat" in done.stdout and "t ::error::t" in done.stdout
    assert_inert(done.stdout)


# --- report ---------------------------------------------------------------------------------------

def gate_row(suite: str, limit: Any = 0.1, verdict: str = "pass") -> dict[str, Any]:
    return {"suite": suite, "variant": "", "category": None, "n": 10, "errors": 0,
            "n_comply": 10, "over_refusals": 1, "n_refuse": 0, "toxic_accepted": 0,
            "verdict": verdict, "passed": verdict != "FAIL",
            "checks": [{"name": "over-refusal", "k": 1, "n": 10, "rate": 0.1,
                        "interval": [0.02, 0.4], "limit": limit, "passed": verdict != "FAIL"}]}


def junit_file(path: Path, rows: list[dict[str, Any]], gate_text: str | None = None) -> Path:
    """pytest's JUnit XML of one orbench item, with the gate property holding `rows`."""
    gate = gate_text or json.dumps({"schema": 1, "run": {"target": "m"},
                                    "gate": {"passed": True, "rows": rows}})
    path.write_text(
        '<?xml version="1.0"?><testsuites><testsuite name="pytest"><properties>'
        f'<property name="orbench_gate" value={quoteattr(gate)}/></properties>'
        '<testcase classname="" name="mini[violence-0000]"><properties>'
        '<property name="suite" value="mini"/><property name="expectation" value="comply"/>'
        '<property name="verdict" value="compliance"/><property name="category" value="v"/>'
        '</properties></testcase></testsuite></testsuites>', encoding="utf-8")
    return path


@pytest.mark.parametrize("limit", ["Infinity", "-Infinity", "NaN", "1e999"])
def test_a_limit_that_is_no_finite_number_is_one_line(tmp_path: Path, limit: str) -> None:
    text = json.dumps({"schema": 1, "run": {}, "gate": {"rows": [gate_row("s", "LIMIT")]}})
    path = junit_file(tmp_path / "x.xml", [], text.replace('"LIMIT"', limit))
    done = orbench_cli("report", path, cwd=tmp_path)
    one_line_error(done, "x.xml", "gate.rows[0].checks[0].limit", "expected a finite number")


def test_report_of_thousands_of_gate_rows_fits_a_comment(tmp_path: Path) -> None:
    # Its speed is not asserted here (CPU times on a shared host move by more than a bound
    # could allow): the JUnit file is parsed from one string, not in blocks that made expat
    # re-read the gate property from its start (reports/junit.py).
    for n in (2_000, 8_000):
        rows = [gate_row(f"suite-{i}", verdict="FAIL" if i % 1000 == 999 else "pass")
                for i in range(n)]
        path = junit_file(tmp_path / f"r{n}.xml", rows)
        done = orbench_cli("report", path, "--artifact-url", "https://ci.example/run/1",
                           cwd=tmp_path, timeout=SUBPROCESS_TIMEOUT_S)
        assert done.returncode == 0, done.stderr
        assert len(done.stdout) < GITHUB_COMMENT_LIMIT
        left_out = re.search(r"… and (\d+) more rows \((\d+) of them failed\) left out to fit a "
                             r"comment: every row is in \[the artefact\]"
                             r"\(https://ci\.example/run/1\)", done.stdout)
        assert left_out, done.stdout[-2000:]
        shown = done.stdout.count("| **suite-")
        assert shown + int(left_out.group(1)) == n and shown > 100
        # every failed row is shown, wherever it is in the table
        assert left_out.group(2) == "0" and done.stdout.count("❌ FAIL |") == n // 1000
        assert f"| **suite-{n - 1}** |" in done.stdout


def test_step_summary_on_a_full_device_names_it(tmp_path: Path) -> None:
    path = junit_file(tmp_path / "x.xml", [gate_row("s")])
    done = orbench_cli("report", path, "--github-step-summary", cwd=tmp_path,
                       env={"GITHUB_STEP_SUMMARY": "/dev/full"})
    one_line_error(done, "--github-step-summary", "/dev/full", "GITHUB_STEP_SUMMARY",
                   "No space left on device")


@pytest.mark.parametrize("url", ["http://x\n::error::forged", "javascript:alert(1)",
                                 "http://x) @octocat [y](http://z", "ftp://x/y", "http://",
                                 "https://x/\x1b[2J", "notaurl"])
@pytest.mark.parametrize("option", ["--artifact-url", "--html-url"])
def test_a_bad_artifact_url_is_one_line_naming_the_option(tmp_path: Path, url: str,
                                                          option: str) -> None:
    path = junit_file(tmp_path / "x.xml", [gate_row("s")])
    done = orbench_cli("report", path, option, url, cwd=tmp_path)
    one_line_error(done, option, "http:// or https://")


def test_an_artifact_url_cannot_break_its_link_or_mention(tmp_path: Path) -> None:
    path = junit_file(tmp_path / "x.xml", [gate_row("s")])
    done = orbench_cli("report", path, "--artifact-url",
                       "https://x/a)@octocat[y](<http://z>`", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    link = re.search(r"\[artefact\]\(([^)\s]*)\)$", done.stdout, re.MULTILINE)
    assert link and link.group(1) == "https://x/a%29@octocat%5By%5D%28%3Chttp://z%3E%60"
    assert_inert(done.stdout)


# --- init on a full disk --------------------------------------------------------------------------

@pytest.fixture
def tiny_disk(tmp_path: Path):
    """A 16 KiB tmpfs: thresholds.yaml and pytest.ini fit, the workflow (9 KB) does not."""
    folder = tmp_path / "repo"
    folder.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (the injected failure below runs anywhere)")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(folder)],
                             capture_output=True, timeout=SUBPROCESS_TIMEOUT_S)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode(errors='replace')}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True, timeout=SUBPROCESS_TIMEOUT_S)


def test_init_on_a_full_disk_names_the_file_and_leaves_nothing(tiny_disk: Path) -> None:
    done = orbench_cli("init", tiny_disk, "--model", "m", cwd=tiny_disk.parent)
    one_line_error(done, "orbench-gate.yml", "No space left on device", "wrote nothing")
    assert list(tiny_disk.iterdir()) == []


def test_init_whose_last_write_fails_leaves_nothing(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')

    def write(path: Path, text: str, mode: int) -> None:
        if "orbench-gate" in path.name:
            path.write_text(text[:100])  # half written, then the disk is full
            raise OSError(28, "No space left on device")
        path.write_text(text)

    with pytest.raises(ConfigError, match=r"orbench-gate\.yml: cannot write \(No space left"):
        init_project(tmp_path, model="m", write=write)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pyproject.toml"]
    assert (tmp_path / "pyproject.toml").read_text() == '[project]\nname = "x"\n'


# --- init: the values it writes, the paths it writes through --------------------------------------

LIVE_ADDOPTS = "gpt\naddopts = --co"


@pytest.mark.parametrize("pyproject", [False, True], ids=["pytest.ini", "pyproject.toml"])
def test_init_refuses_a_model_that_would_write_a_second_setting(tmp_path: Path,
                                                                pyproject: bool) -> None:
    """Issue 43: `--model $'gpt\naddopts = --co'` wrote a live addopts into pytest.ini, and
    in a repository with a pyproject.toml it was a TOMLDecodeError traceback."""
    if pyproject:
        (tmp_path / "pyproject.toml").write_text('[project]\nname = "app"\n')
    done = orbench_cli("init", "--model", LIVE_ADDOPTS, cwd=tmp_path)
    one_line_error(done, "--model", "one line")
    assert sorted(p.name for p in tmp_path.iterdir()) == (["pyproject.toml"] if pyproject
                                                          else [])


@pytest.mark.parametrize(("option", "value", "needle"), [
    ("--model", "gpt\x1b[2J", "control"),
    ("--model", "gpt\r", "one line"),
    ("--model", "sk-proj-abcdefghijklmnop1234", "OPENAI_API_KEY"),
    ("--model", "", "empty"),
    ("--base-url", "http://127.0.0.1:8000/v1\norbench_model = x", "one line"),
    ("--base-url", "http://h/v1/\x07", "control"),
    ("--base-url", "http://h/v1/sk-abcdefghijklmnop1234", "environment"),
])
def test_init_refuses_a_value_that_is_not_one_plain_line(tmp_path: Path, option: str,
                                                         value: str, needle: str) -> None:
    args = ["--model", "gpt-4o-mini"] if option != "--model" else []
    done = orbench_cli("init", *args, option, value, cwd=tmp_path)
    line = one_line_error(done, option, needle)
    assert "sk-" not in line
    assert list(tmp_path.iterdir()) == []


@settings(deadline=None)  # two folders written per example: its time is not the subject
@given(st.text(max_size=40))
def test_init_writes_the_model_exactly_or_refuses_it(model: str) -> None:
    """Whatever the value: a one-line refusal, or settings that read back (as pytest reads them)
    as exactly the model and nothing else."""
    for pyproject in (False, True):
        with tempfile.TemporaryDirectory() as folder:
            root = Path(folder)
            if pyproject:
                (root / "pyproject.toml").write_text('[project]\nname = "app"\n')
            try:
                init_project(root, model=model, install="orbench-pytest")
            except ConfigError as exc:
                assert "\n" not in str(exc) and "--model" in str(exc)
                assert sorted(p.name for p in root.iterdir()) == (
                    ["pyproject.toml"] if pyproject else [])
                continue
            if pyproject:
                data = tomllib.loads((root / "pyproject.toml").read_text())
                assert data["tool"]["pytest"]["ini_options"] == {"orbench_model": model}
            else:
                ini = IniConfig(str(root / "pytest.ini"))
                assert dict(ini["pytest"].items()) == {"orbench_model": model}
                parser = configparser.ConfigParser(interpolation=None)
                parser.read(root / "pytest.ini")
                assert dict(parser["pytest"]) == {"orbench_model": model}


def test_init_force_never_writes_through_a_symlink(tmp_path: Path) -> None:
    """Issue 43: --force overwrote a system file a workflow path was linked to."""
    repo, outside = tmp_path / "repo", tmp_path / "outside.txt"
    repo.mkdir()
    outside.write_text("precious\n")
    (repo / "thresholds.yaml").symlink_to(outside)
    done = orbench_cli("init", "--model", "m", "--force", cwd=repo)
    one_line_error(done, "thresholds.yaml", "symbolic link", "inside the repository")
    assert outside.read_text() == "precious\n"
    assert sorted(p.name for p in repo.iterdir()) == ["thresholds.yaml"]


@pytest.mark.parametrize("link", [".github", ".github/workflows", "pyproject.toml"])
def test_init_never_follows_a_folder_or_file_link_out_of_the_repository(tmp_path: Path,
                                                                       link: str) -> None:
    """A dangling `.github` symlink made init create folders and a file outside the repository,
    even without --force."""
    repo, outside = tmp_path / "repo", tmp_path / "elsewhere"
    repo.mkdir()
    (repo / link).parent.mkdir(parents=True, exist_ok=True)
    if link == "pyproject.toml":
        outside.write_text('[project]\nname = "x"\n')
    (repo / link).symlink_to(outside)  # dangling for the folders
    done = orbench_cli("init", "--model", "m", cwd=repo)
    one_line_error(done, link, "symbolic link")
    assert not (tmp_path / "elsewhere").exists() or outside.read_text() == \
        '[project]\nname = "x"\n'
    assert not (repo / "thresholds.yaml").exists()


# --- labels.csv -----------------------------------------------------------------------------------

HOSTILE_ANSWERS = ["=HYPERLINK(\"http://evil\",\"x\")", "+1+1", "-2", "@SUM(1+1)",
                   "\tTAB", "\rCR", "ok \x1b[2J", "line\n::error::forged", "  ::warning::w",
                   "##[error]e", "'=quoted", "C:\\new\\u{1b}", "plain\nmulti\nline"]


def hostile_results(path: Path) -> Path:
    items = [{"suite": "s", "case_id": f"c{i}", "variant": "", "category": "k",
              "expect": "comply", "verdict": "compliance", "outcome": "passed",
              "mismatch": False, "error": False, "response": answer, "prompt": answer}
             for i, answer in enumerate(HOSTILE_ANSWERS)]
    path.write_text(json.dumps({"schema": 1, "run": {}, "items": items}), encoding="utf-8")
    return path


def test_labels_csv_is_inert_in_a_spreadsheet_and_a_log_and_reads_back(tmp_path: Path) -> None:
    results = hostile_results(tmp_path / "run.json")
    n = len(HOSTILE_ANSWERS)
    done = orbench_cli("label", results, "-o", "labels.csv", "--n", n, input="c" * n,
                       cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert_inert(done.stdout)
    text = (tmp_path / "labels.csv").read_text(encoding="utf-8")
    assert_inert(text)  # `cat labels.csv` in a CI log
    with (tmp_path / "labels.csv").open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        for cell in (row["prompt"], row["response"]):
            assert not cell.startswith(FORMULA), cell
    # judge-check reads every answer back as the results file holds it
    labelled = read_labels(tmp_path / "labels.csv")
    assert sorted(row["response"] for row in labelled.values()) == sorted(HOSTILE_ANSWERS)
    assert sorted(row["prompt"] for row in labelled.values()) == sorted(HOSTILE_ANSWERS)
    check = orbench_cli("judge-check", "labels.csv", cwd=tmp_path)
    assert check.returncode == 0, check.stderr
    assert f"({n} labelled)" in check.stdout or f"{n} labelled" in check.stdout


@given(st.text())
def test_any_cell_reads_back_through_a_csv_file(text: str) -> None:
    cell = csv_cell(text)
    assert isinstance(cell, str)
    assert not cell.startswith(FORMULA) and "\x1b" not in cell and "\r" not in cell
    assert not COMMAND_LINE.search(cell) and "##[" not in cell
    buffer = io.StringIO(newline="")
    csv.writer(buffer).writerow([cell, "next"])
    buffer.seek(0)
    assert csv_value(next(csv.reader(buffer))[0]) == text


# --- judge-check: rows it cannot read -------------------------------------------------------------

def test_judge_check_of_an_unknown_verdict_names_the_line(tmp_path: Path) -> None:
    path = labels_file(tmp_path / "l.csv", [("refusal", "refusal"), ("refusal", "weird"),
                                            ("compliance", "compliance")])
    done = orbench_cli("judge-check", path, cwd=tmp_path)
    one_line_error(done, "l.csv: line 3", "judge_verdict 'weird'",
                   "compliance, refusal, partial_refusal, content_filter, no_answer, error")


def test_judge_check_of_a_short_or_long_row_names_the_line(tmp_path: Path) -> None:
    path = labels_file(tmp_path / "l.csv", [("refusal", "refusal")])
    with path.open("a", encoding="utf-8") as handle:
        handle.write("s[9],s,,9,k,comply,refusal\n")
    done = orbench_cli("judge-check", path, cwd=tmp_path)
    one_line_error(done, "l.csv: line 3", "7 cells, the header has 11", "judge_verdict")
    path = labels_file(tmp_path / "m.csv", [("refusal", "refusal")])
    with path.open("a", encoding="utf-8") as handle:
        handle.write("s[9],s,,9,k,comply,refusal,refusal,p,a,t,extra\n")
    done = orbench_cli("judge-check", path, cwd=tmp_path)
    one_line_error(done, "m.csv: line 3", "12 cells, the header has 11")
