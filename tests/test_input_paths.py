"""Every path a user gives the plugin or the `orbench` command is read only where it is a
regular file: a device, a FIFO or a folder is one line naming it and what it is, through the
one helper (core/bounded.py: regular_file, open_regular, read_bytes), never a hang, a
stream read forever, a misleading "file not found" or a silent default.

Before: `orbench report|plot|compare` and `orbench generate --rewrite-prompt` read /dev/zero
until memory ran out and blocked forever on a FIFO; `orbench cache merge /dev/zero` said "no
such cache file"; `--orbench-cache-path=/dev/zero` said "disk I/O error"; a FIFO or a folder
named thresholds.yaml or disputed.yaml was taken as absent (built-in limits, silently); a
suite's data file that is a FIFO was "file not found"."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from orbench_pytest.core.bounded import open_regular, read_bytes, regular_file
from orbench_pytest.core.errors import ConfigError
from tests.helpers import mini_suite, no_crash, orbench_cli, results_file, run_orbench

KINDS = {"device": "a device", "fifo": "a FIFO", "folder": "a folder"}


def special(tmp_path: Path, kind: str, name: str = "special") -> Path:
    """A path of this kind: /dev/zero (streams forever), a FIFO nobody writes (blocks
    forever), a folder."""
    if kind == "device":
        return Path("/dev/zero")
    path = tmp_path / name
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    return path


def refused(done: subprocess.CompletedProcess[str], path: Path, kind: str) -> str:
    """One line on stderr, exit 2, naming the path and what it is."""
    assert done.returncode == 2, (done.stdout, done.stderr)
    (line,) = done.stderr.splitlines()
    assert str(path) in line and f"({KINDS[kind]}, not a regular file)" in line, line
    return line


# --- the helper ----------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_the_helper_refuses_what_is_not_a_regular_file_without_opening_it(tmp_path: Path,
                                                                        kind: str) -> None:
    path = special(tmp_path, kind)
    for read in (lambda: regular_file(path, "the x"), lambda: open_regular(path, "the x"),
                 lambda: read_bytes(path, 10, "the x")):
        with pytest.raises(ConfigError, match=rf"cannot read the x \({KINDS[kind]}, not a "
                                              r"regular file\)$"):
            read()


def test_the_helper_reads_a_regular_file_with_its_cap_and_tells_absent_from_special(
        tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_bytes(b"12345")
    assert regular_file(path) is not None and regular_file(tmp_path / "none") is None
    assert read_bytes(path, 5) == b"12345"
    with pytest.raises(ConfigError, match=r"f.txt: cannot read \(larger than the 0 KiB"):
        read_bytes(path, 4)
    with open_regular(path) as handle:
        assert handle.read() == b"12345"  # blocking again once opened: a normal file object


# --- the orbench command -------------------------------------------------------------------------

def _run_files(tmp_path: Path) -> tuple[Path, Path]:
    return results_file(tmp_path / "run.json", 1, 9), tmp_path / "run.xml"


REPORTS = {
    "report": lambda p, ok: ["report", p],
    "report --baseline": lambda p, ok: ["report", ok, "--baseline", p],
    "plot": lambda p, ok: ["plot", p],
    "plot --baseline": lambda p, ok: ["plot", ok, "--baseline", p],
    "compare": lambda p, ok: ["compare", ok, p],
    "thresholds --file": lambda p, ok: ["thresholds", "--explain", "--file", p],
    "cache merge": lambda p, ok: ["cache", "merge", p, "-o", p.parent / "merged.sqlite3"],
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("command", REPORTS)
def test_every_file_the_report_commands_read_is_refused_in_one_line(tmp_path: Path,
                                                                    command: str,
                                                                    kind: str) -> None:
    good, junit = _run_files(tmp_path)
    path = special(tmp_path, kind)
    ok = junit if command == "report --baseline" else good
    if command == "report --baseline":
        junit.write_text(JUNIT)
    refused(orbench_cli(*REPORTS[command](path, ok), cwd=tmp_path), path, kind)


# One orbench item as pytest's JUnit XML carries it (what `orbench report` reads).
JUNIT = ('<?xml version="1.0"?><testsuites><testsuite name="pytest">'
         '<testcase classname="" name="mini[violence-0000]"><properties>'
         '<property name="suite" value="mini"/><property name="expectation" value="comply"/>'
         '<property name="verdict" value="compliance"/></properties></testcase>'
         '</testsuite></testsuites>')


GENERATE = ("--seeds", "--seed-topics", "--rewrite-prompt", "--moderation-prompt")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("option", GENERATE)
def test_every_file_orbench_generate_reads_is_refused_in_one_line(tmp_path: Path, option: str,
                                                                  kind: str) -> None:
    seeds = tmp_path / "seeds.csv"
    seeds.write_text("seed\nHow do I kill a process?\n")
    path = special(tmp_path, kind)
    source = [] if option.startswith("--seed") else ["--seeds", seeds]
    done = orbench_cli("generate", *source, option, path, "--out", tmp_path / "gen",
                       "--rewriter-model", "m", "--moderator", "m1",
                       "--rewriter-base-url", "http://127.0.0.1:9/v1", cwd=tmp_path)
    assert refused(done, path, kind).startswith(f"orbench generate: error: {option}: ")


@pytest.mark.parametrize("kind", ("fifo", "folder"))
def test_orbench_generate_review_refuses_a_special_file_in_its_folder(tmp_path: Path,
                                                                     kind: str) -> None:
    (tmp_path / "gen").mkdir()
    path = special(tmp_path / "gen", kind, "generated.csv")
    refused(orbench_cli("generate", "--out", "gen", "--review", cwd=tmp_path),
            Path("gen/generated.csv"), kind)
    assert path.exists()


# --- the plugin ----------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_the_cache_path_is_refused_naming_what_it_is(pytester: pytest.Pytester,
                                                     plugin_args: list[str], kind: str) -> None:
    mini_suite(pytester)
    path = special(pytester.path, kind)
    result = run_orbench(pytester, plugin_args, f"--orbench-cache-path={path}",
                         "--orbench-model=m", "--orbench-base-url=http://127.0.0.1:9/v1")
    no_crash(result)
    assert result.ret == 4
    result.stderr.fnmatch_lines([f"ERROR: {path}: cannot read the response cache "
                                 f"({KINDS[kind]}, not a regular file)"])


@pytest.mark.parametrize("kind", ("fifo", "folder"))
@pytest.mark.parametrize("name", ("thresholds.yaml", "suites/disputed.yaml"))
def test_a_gate_file_that_is_not_a_file_is_an_error_not_the_built_in_limits(
        pytester: pytest.Pytester, plugin_args: list[str], name: str, kind: str) -> None:
    mini_suite(pytester)
    path = special(pytester.path, kind, name)
    result = run_orbench(pytester, plugin_args, "--orbench-model=m",
                         "--orbench-base-url=http://127.0.0.1:9/v1")
    text = no_crash(result)
    assert result.ret != 0 and "built-in limits" not in text and "orbench gate:" not in text
    assert f"{path}: cannot read " in text and f"({KINDS[kind]}, not a regular file)" in text


@pytest.mark.parametrize("kind", ("fifo", "folder"))
@pytest.mark.parametrize("option", ("--orbench-baseline", "--orbench-thresholds",
                                    "--orbench-batch-import"))
def test_a_file_option_names_what_the_path_is(pytester: pytest.Pytester, plugin_args: list[str],
                                              option: str, kind: str) -> None:
    mini_suite(pytester)
    path = special(pytester.path, kind)
    result = run_orbench(pytester, plugin_args, f"{option}={path}", "--orbench-model=m",
                         "--orbench-base-url=http://127.0.0.1:9/v1")
    no_crash(result)
    result.stderr.fnmatch_lines([f"ERROR: {option}: {path}: cannot read "
                                 f"({KINDS[kind]}, not a regular file)"])


@pytest.mark.parametrize("kind", ("fifo", "folder"))
def test_a_suite_data_file_that_is_not_a_file_is_named_so(pytester: pytest.Pytester,
                                                          plugin_args: list[str],
                                                          kind: str) -> None:
    (pytester.path / "suites").mkdir()
    (pytester.path / "suites" / "d.yaml").write_text("name: d\nsource: data.csv\n")
    path = special(pytester.path / "suites", kind, "data.csv")
    result = run_orbench(pytester, plugin_args, "--orbench-model=m",
                         "--orbench-base-url=http://127.0.0.1:9/v1")
    text = no_crash(result)
    assert f"{path}: cannot read the data file ({KINDS[kind]}, not a regular file)" in text
    assert "file not found" not in text
