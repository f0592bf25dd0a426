"""The README's commands and snippets, checked against the code where they can be."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from orbench_pytest.cli import _parser
from orbench_pytest.options import OPTIONS
from orbench_pytest.ready_suites import ready_suite_names
from orbench_pytest.thresholds import parse_thresholds

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text()
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def blocks(kind: str) -> list[str]:
    return [body for lang, body in BLOCK.findall(README) if lang == kind]


def commands() -> list[list[str]]:
    found = []
    for body in blocks("bash"):
        for line in body.replace("\\\n", " ").splitlines():
            line = line.split(" # ")[0].strip()
            for part in re.split(r"&&|;|\|", line):
                words = shlex.split(part.strip(), comments=True) if part.strip() else []
                while words and "=" in words[0] and not words[0].startswith("-"):
                    words = words[1:]  # VAR=value prefixes
                if words:
                    found.append(words)
    return found


def test_the_readme_starts_with_the_set_up_and_exactly_two_commands() -> None:
    sections = re.findall(r"^## (.+)$", README, re.MULTILINE)
    assert sections[0].startswith("Quick start (fresh machine")
    assert sections[1] == "Add it to your project"
    assert "Choosing thresholds" in sections
    assert "### Walkthrough: gating a system-prompt change" in README
    setup, two = blocks("bash")[:2]
    assert "pip install -e '.[local,test]'" in setup
    lines = [line.split("#")[0].strip() for line in two.strip().splitlines()]
    assert lines == ["pytest suites/smoke.yaml --orbench-model=local", "pytest -n 2"]


def test_every_option_suite_and_path_in_the_commands_exists() -> None:
    flags = {option.flag for option in OPTIONS}
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
    assert seen_pytest >= 10


def test_the_pyproject_snippet_uses_ini_twins_only() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    ini_names = {option.ini for option in OPTIONS}
    (snippet,) = blocks("toml")
    settings = tomllib.loads(snippet)["tool"]["pytest"]["ini_options"]
    assert settings and set(settings) <= ini_names


def test_the_thresholds_snippets_are_valid() -> None:
    snippets = [body for body in blocks("yaml") if body.startswith("defaults:")]
    assert snippets
    for body in snippets:
        parse_thresholds(yaml.safe_load(body), "README")
