"""Paths and ini values a user gets wrong: a symlink loop, an over-long name, a boolean ini key
that is not one, a list where a single path is meant, a data folder that is not there, a
file that is not an orbench cache. Each ends as one line naming the file or option and what
is allowed: no traceback, no INTERNALERROR, nothing silently defaulted."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers import (
    LENIENT,
    no_crash,
    orbench_cli,
    questions,
    refusing,
    run_orbench,
    write_suite,
)

LONG_NAME = "a" * 300  # past NAME_MAX (255): ENAMETOOLONG


def loop(folder: Path, name: str) -> Path:
    """NAME and NAME.other, each a symlink to the other."""
    os.symlink(f"{name}.other", folder / name)
    os.symlink(name, folder / f"{name}.other")
    return folder / name


def usage_error(result: pytest.RunResult) -> str:
    """The one `ERROR:` line of a usage error, after checking nothing crashed."""
    text = no_crash(result)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, text
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(errors) == 1, text
    return errors[0]


# --- symlink loops and paths that cannot be looked at -----------------------------------------

def test_a_suite_file_that_is_a_symlink_loop_is_one_line(pytester, plugin_args,
                                                          openai_server) -> None:
    loop(pytester.path, "loop1.yaml")
    result = run_orbench(pytester, plugin_args, url=openai_server.url, suites="loop1.yaml")
    assert "loop1.yaml" in usage_error(result)
    assert openai_server.requests == 0


def test_a_suite_source_that_is_a_symlink_loop_is_one_line(pytester, plugin_args,
                                                           openai_server) -> None:
    (pytester.path / "suites").mkdir()
    (pytester.path / "suites" / "s.yaml").write_text("name: s\nsource: rows.csv\n")
    loop(pytester.path / "suites", "rows.csv")
    result = run_orbench(pytester, plugin_args, url=openai_server.url)
    text = no_crash(result)
    assert "rows.csv: cannot follow the path (a symlink loop)" in text
    assert openai_server.requests == 0


@pytest.mark.parametrize("option", ["--orbench-thresholds", "--orbench-baseline",
                                    "--orbench-judge-check", "--orbench-batch-import",
                                    "--orbench-cache-path"])
@pytest.mark.parametrize("bad", ["loop", "long"])
def test_a_path_option_that_cannot_be_looked_at_is_one_line(pytester, plugin_args,
                                                             openai_server, option,
                                                             bad) -> None:
    write_suite(pytester, questions(1))
    name = loop(pytester.path, "p.yaml").name if bad == "loop" else LONG_NAME
    result = run_orbench(pytester, plugin_args, f"{option}={name}", url=openai_server.url)
    line = usage_error(result)
    assert line.startswith(f"ERROR: {option}:") and name in line, line
    assert openai_server.requests == 0


@pytest.mark.parametrize("bad", ["loop", "long"])
def test_a_suite_path_that_cannot_be_looked_at_is_one_line(pytester, plugin_args,
                                                           openai_server, bad) -> None:
    name = loop(pytester.path, "s.yaml").name if bad == "loop" else LONG_NAME + ".yaml"
    named = usage_error(run_orbench(pytester, plugin_args, f"--orbench-suite={name}",
                                    url=openai_server.url, suites=None))
    assert named.startswith(f"ERROR: --orbench-suite: {pytester.path / name}: cannot look at "
                            "the path"), named
    typed = usage_error(run_orbench(pytester, plugin_args, url=openai_server.url, suites=name))
    assert typed == f"ERROR: file or directory not found: {name}"  # pytest's own line
    assert openai_server.requests == 0


def test_a_read_only_cache_path_that_cannot_be_looked_at_is_one_line(pytester, plugin_args,
                                                                     openai_server) -> None:
    write_suite(pytester, questions(1))
    for name in (loop(pytester.path, "c.sqlite3").name, LONG_NAME):
        line = usage_error(run_orbench(pytester, plugin_args, "--orbench-cache=read",
                                       url=openai_server.url, cache=name))
        assert name in line and "cannot" in line, line
    assert openai_server.requests == 0


def test_cache_merge_of_a_symlink_loop_is_one_line(tmp_path: Path) -> None:
    loop(tmp_path, "loop1")
    for args in (["-o", "out.sqlite3", "loop1"], ["-o", "loop1", "loop1.other"]):
        done = orbench_cli("cache", "merge", *args, cwd=tmp_path)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.count("\n") == 1
        assert "cannot follow the path (a symlink loop)" in done.stderr
    done = orbench_cli("cache", "merge", "-o", "out.sqlite3", LONG_NAME, cwd=tmp_path)
    assert done.stderr.startswith(f"orbench cache: error: {LONG_NAME}: cannot ")
    assert done.stderr.endswith("(File name too long)\n") and done.stderr.count("\n") == 1
    assert not (tmp_path / "out.sqlite3").exists()


# --- a file that is not an orbench cache ------------------------------------------------------

def test_a_cache_path_at_a_users_own_file_is_never_advised_deleted(pytester, plugin_args,
                                                                   openai_server) -> None:
    write_suite(pytester, questions(1))
    notes = pytester.path / "notes.md"
    notes.write_text("# my notes\n" * 100)
    result = run_orbench(pytester, plugin_args, url=openai_server.url, cache="notes.md")
    line = usage_error(result)
    assert "notes.md: not an orbench response cache (not an SQLite file)" in line, line
    assert "--orbench-cache-path=NEW" in line and "delete it" not in line, line
    assert notes.read_text() == "# my notes\n" * 100
    assert openai_server.requests == 0


# --- ini values the key cannot hold -----------------------------------------------------------

@pytest.mark.parametrize(("file", "text"), [
    ("pytest.ini", "[pytest]\norbench_strict = maybe\n"),
    ("pytest.ini", "[pytest]\norbench_fixed_concurrency = 2\n"),
    ("tox.ini", "[pytest]\norbench_require_full = sometimes\n"),
    ("pyproject.toml", "[tool.pytest.ini_options]\norbench_strict = 3\n"),
])
def test_a_boolean_ini_key_that_is_not_one_names_key_file_and_values(
        pytester, plugin_args, openai_server, file, text) -> None:
    write_suite(pytester, questions(1))
    (pytester.path / file).write_text(text)
    key = text.split("\n")[1].split(" =")[0]
    line = usage_error(run_orbench(pytester, plugin_args, url=openai_server.url))
    assert line == (f"ERROR: {pytester.path / file}: {key}: not a boolean (allowed: true/false, "
                    "1/0, yes/no, on/off; a TOML boolean under [tool.pytest])"), line
    assert openai_server.requests == 0


@pytest.mark.parametrize(("value", "strict"), [("yes", True), ("on", True), ("1", True),
                                               ("no", False), ("off", False), ("0", False)])
def test_a_boolean_ini_key_takes_what_pytest_takes(pytester, plugin_args, value,
                                                   strict) -> None:
    rows = questions(4, "food")
    write_suite(pytester, rows, thresholds=LENIENT)
    (pytester.path / "pytest.ini").write_text(f"[pytest]\norbench_strict = {value}\n")
    # One safe prompt refused: within the lenient gate, a failure only when strict.
    result = run_orbench(pytester, plugin_args, serve=refusing([rows[0]["prompt"]]))
    no_crash(result)
    assert result.ret == (pytest.ExitCode.TESTS_FAILED if strict else pytest.ExitCode.OK)


def test_a_list_for_a_one_value_ini_key_says_what_is_allowed(pytester, plugin_args,
                                                             openai_server) -> None:
    write_suite(pytester, questions(1))
    (pytester.path / "a.yaml").write_text("defaults: {max_over_refusal: 0.5}\n")
    (pytester.path / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\norbench_thresholds = ["a.yaml"]\n')
    # pytest 9 warns of the list itself too (a TypeError to come): the run stops at our line.
    line = usage_error(run_orbench(pytester, plugin_args, "-W",
                                   "ignore:Passing a value that is not a string",
                                   url=openai_server.url))
    assert line == (f"ERROR: {pytester.path / 'pyproject.toml'}: orbench_thresholds: takes one "
                    'value, not a list; write it as one string (orbench_thresholds = "...")')


def test_an_empty_ini_value_is_refused_as_on_the_command_line(pytester, plugin_args,
                                                             openai_server) -> None:
    write_suite(pytester, questions(1))
    typed = usage_error(run_orbench(pytester, plugin_args, "--orbench-target-version=",
                                    url=openai_server.url))
    (pytester.path / "pytest.ini").write_text("[pytest]\norbench_target_version =\n")
    in_ini = usage_error(run_orbench(pytester, plugin_args, url=openai_server.url))
    assert in_ini == typed
    assert typed.startswith("ERROR: --orbench-target-version: expects one printable line")


@pytest.mark.parametrize("where", ["option", "ini"])
@pytest.mark.parametrize("bad", ["missing", "file", "loop"])
def test_a_data_dir_that_is_not_a_folder_is_one_line(pytester, plugin_args, openai_server,
                                                     where, bad) -> None:
    """--orbench-data-dir is only read, never created (docs/suites.md): a folder that is not
    there is a typo, not a request to download."""
    write_suite(pytester, questions(1))
    name = {"missing": "nowhere", "file": "notes.md", "loop": "d"}[bad]
    if bad == "file":
        (pytester.path / name).write_text("notes\n")
    if bad == "loop":
        loop(pytester.path, name)
    args = [f"--orbench-data-dir={name}"] if where == "option" else []
    if where == "ini":
        (pytester.path / "pytest.ini").write_text(f"[pytest]\norbench_data_dir = {name}\n")
    line = usage_error(run_orbench(pytester, plugin_args, *args, url=openai_server.url))
    assert line.startswith(f"ERROR: --orbench-data-dir: {pytester.path / name}"), line
    if bad != "loop":
        assert line.endswith("is not a folder; give an existing folder of pre-downloaded data "
                             "files (it is read, never created)"), line
    assert openai_server.requests == 0


def test_a_looping_python_path_entry_does_not_stop_the_target_fingerprint(tmp_path) -> None:
    """A symlink loop in $PYTHONPATH: Python's import skips it, and so does the fingerprint
    of --orbench-target's code (it was an INTERNALERROR)."""
    from orbench_pytest.fetch.fingerprint import code_fingerprint

    (tmp_path / "app.py").write_text("def answer(p, s):\n    return 'Sure'\n")
    looping = loop(tmp_path, "lib")
    found = code_fingerprint("app:answer", cwd=tmp_path, search_path=[str(looping)])
    assert found.files == ("app.py",)


def test_generate_into_a_symlink_loop_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "seeds.csv").write_text("seed\nhow do I kill a process?\n")
    loop(tmp_path, "bank")
    dead = "http://127.0.0.1:9/v1"  # nothing listens: nothing may be asked before the check
    done = orbench_cli("generate", "--seeds", "seeds.csv", "--out", "bank",
                       "--rewriter-model", "m", "--rewriter-base-url", dead, "--moderator", "m",
                       "--moderator-base-url", dead, "--max-retries", "0", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr == ("orbench generate: error: --out: bank: cannot follow the path (a "
                           "symlink loop); give a file or folder that exists\n")


# --- under xdist, a usage error reads as it does serially -------------------------------------

@pytest.mark.parametrize("thresholds", [
    "thresholds: [\n",  # a broken file: the suites fail to collect in the workers
    "disputed:\n  s:\n    no-such-id: {reason: r, decided_by: me}\n",  # found by the controller
])
def test_a_usage_error_under_xdist_is_the_same_one_line(pytester, plugin_args, openai_server,
                                                       thresholds) -> None:
    write_suite(pytester, questions(2))
    (pytester.path / "thresholds.yaml").write_text(thresholds)
    argv = ("--orbench-thresholds=thresholds.yaml",)
    serial = usage_error(run_orbench(pytester, plugin_args, *argv, url=openai_server.url))
    parallel = run_orbench(pytester, plugin_args, *argv, "-n", "2", url=openai_server.url,
                           subprocess=True)
    assert usage_error(parallel) == serial
    assert "Exit" not in parallel.stdout.str() + parallel.stderr.str()
