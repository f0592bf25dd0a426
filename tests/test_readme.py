"""The README's shape and its commands, and every command of the docs checked against the code
(not-run blocks included: their options and suites must exist too)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

import pytest
import yaml

from orbench_pytest.catalog.ready import ready_suite_names
from orbench_pytest.cli.main import _parser
from orbench_pytest.config.options import OPTIONS
from orbench_pytest.gate.thresholds import parse_thresholds
from tests.docs_blocks import pages, parse
from tests.helpers import REPO, SUBPROCESS_TIMEOUT_S

README = (REPO / "README.md").read_text()
BLOCKS = [block for page in pages() for block in parse(page)]
README_BLOCKS = parse(REPO / "README.md")


def commands() -> list[list[str]]:
    found = []
    for block in BLOCKS:
        if block.language not in ("bash", "console") or block.file:
            continue
        text = block.text
        if block.language == "console":
            text = "\n".join(line[2:] for line in text.splitlines() if line.startswith("$ "))
        for line in text.replace("\\\n", " ").splitlines():
            line = line.split(" # ")[0].strip()
            for part in re.split(r"&&|;|\||\|\|", line):
                try:
                    words = shlex.split(part.strip(), comments=True) if part.strip() else []
                except ValueError:
                    continue  # a part of a quoted string split above
                while words and "=" in words[0] and not words[0].startswith("-"):
                    words = words[1:]  # VAR=value prefixes
                if words:
                    found.append(words)
    return found


def test_the_readme_is_organised_by_task() -> None:
    sections = re.findall(r"^## (.+)$", README, re.MULTILINE)
    assert sections == ["Quick start", "Add it to your project", "Gate a pull request",
                        "Thresholds in brief", "Suites: ready and your own",
                        "Fragile prompts, and the judge on your model", "Documentation"]


def test_the_quick_start_is_one_set_up_line_and_exactly_two_commands() -> None:
    setup, two = [block.text for block in README_BLOCKS if block.language == "bash"][:2]
    assert "pip install -e '.[local,test]'" in setup
    lines = [line.split("#")[0].strip() for line in two.strip().splitlines()]
    assert lines == ["pytest suites/smoke.yaml --orbench-model=local", "pytest -n 2"]


def test_ci_runs_the_readmes_test_command_as_written() -> None:
    ci = (REPO / ".ci" / "run").read_text()
    assert re.search(r"^pytest -n 2$", ci, re.MULTILINE)


def test_the_wheel_is_built_without_its_dependencies_and_no_placeholder_url() -> None:
    assert "pip wheel --no-deps" in README
    assert "pip wheel ." not in README
    assert "OWNER" not in README and "github.com/" not in README


def test_every_option_suite_and_path_in_the_commands_exists() -> None:
    # An old spelling still works for a release (options.Option.old_flag).
    flags = {option.flag for option in OPTIONS} | {option.old_flag for option in OPTIONS
                                                   if option.old_flag}
    subcommands = _parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    seen_pytest = 0
    for words in commands():
        if words[0] == "pytest":
            seen_pytest += 1
            for word in words[1:]:
                if word.startswith("--orbench-"):
                    flag, _, value = word.partition("=")
                    assert flag in flags, word
                    if flag == "--orbench-suite":
                        assert value in ready_suite_names(), word
                elif re.fullmatch(r"suites/[\w.-]+\.yaml", word):
                    assert (REPO / word).is_file(), word
        elif words[0] == "orbench":
            assert words[1] in subcommands, words
    assert seen_pytest >= 20


def test_every_toml_snippet_uses_ini_twins_only() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    ini_names = {option.ini for option in OPTIONS if not option.command_line_only} | {
        option.old_dest for option in OPTIONS if option.old_dest and not option.command_line_only}
    snippets = [block.text for block in BLOCKS if block.language == "toml"]
    assert snippets
    for snippet in snippets:
        settings = tomllib.loads(snippet)["tool"]["pytest"]["ini_options"]
        assert settings and set(settings) <= ini_names


def test_every_thresholds_snippet_is_valid() -> None:
    snippets = [block.text for block in BLOCKS
                if block.language == "yaml" and block.text.startswith("defaults:")]
    assert len(snippets) >= 3
    for body in snippets:
        parse_thresholds(yaml.safe_load(body), "docs")


def test_the_main_job_block_is_what_the_script_makes_from_the_recording() -> None:
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "readme_main_job.py"),
                           "--check"], capture_output=True, text=True, check=False,
                          timeout=SUBPROCESS_TIMEOUT_S)
    assert done.returncode == 0, done.stdout + done.stderr
