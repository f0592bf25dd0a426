"""The docs' text is true: every cross-reference (a relative link, a `#heading` anchor, a
section named in prose) leads somewhere, and every default the prose quotes is the one the
code uses (core/defaults.py, through the options' help and the commands' parsers)."""

from __future__ import annotations

import re
import sys
from functools import cache
from pathlib import Path

import pytest

from orbench_pytest.cli.init_workflow import template_env
from orbench_pytest.cli.main import _parser
from orbench_pytest.config.options import OPTIONS
from tests.docs_blocks import REPO, pages

PAGES = pages()
# Shipped files whose comments send the reader to a page (the starter thresholds, the workflow).
COMMENTED = [REPO / "suites" / "thresholds.yaml", REPO / "orbench_pytest" / "data" /
             "orbench-gate.yml", REPO / "examples" / "orbench-sharded.yml"]
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
# A section named in prose: `README's "Gate a pull request"`, `(docs/gating.md: Choosing …)`.
NAMED_SECTION = re.compile(r"\b(README|(?:docs/)?[\w-]+\.md)(?:'s)? \"([^\"]+)\""
                           r"|\((README|(?:docs/)?[\w-]+\.md): ([A-Z][^)]*)\)")


def prose(text: str) -> str:
    return FENCE.sub("", text)


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its text (code and link markup dropped), lower case,
    punctuation but `-` and `_` removed, spaces as `-`."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


@cache
def anchors(page: Path) -> frozenset[str]:
    text = page.read_text(encoding="utf-8")
    seen: dict[str, int] = {}
    found = set(HTML_ANCHOR.findall(text))
    for heading in HEADING.findall(prose(text)):
        slug = github_slug(heading)
        found.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return frozenset(found)


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in LINK.findall(prose(page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z+.-]*:", target):
            continue  # http(s), mailto
        path, _, fragment = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
            broken.append(f"{target}: no heading #{fragment} in {linked.name}")
    return broken


def resolve_named(page: Path, name: str) -> Path:
    if name == "README":
        return REPO / "README.md"
    for base in (page.parent, REPO, REPO / "docs"):
        if (base / name).is_file():
            return base / name
    return REPO / "docs" / name


def broken_named_sections(page: Path) -> list[str]:
    broken = []
    for match in NAMED_SECTION.finditer(prose(page.read_text(encoding="utf-8"))):
        name, section = (match[1], match[2]) if match[1] else (match[3], match[4])
        linked = resolve_named(page, name)
        if not linked.is_file() or github_slug(section) not in anchors(linked):
            broken.append(f"{name}: {section}")
    return broken


@pytest.mark.parametrize("page", PAGES + COMMENTED, ids=lambda p: str(p.relative_to(REPO)))
def test_every_link_and_named_section_leads_somewhere(page: Path) -> None:
    assert broken_links(page) + broken_named_sections(page) == []


def test_a_broken_link_anchor_or_section_is_found(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other\n\n## Choosing `thresholds`, well\n\n## Again\n"
                                       "\n## Again\n")
    page = tmp_path / "page.md"
    page.write_text("[a](other.md#choosing-thresholds-well) [b](other.md#again-1) [c](#page)\n"
                    "# Page\n[d](missing.md) [e](other.md#nowhere) [f](https://x/y#z)\n"
                    "```text\n[g](not-checked.md)\n```\n"
                    'The other.md\'s "Again" and (other.md: Choosing thresholds, well); '
                    '(other.md: Gone) and other.md\'s "Missing".\n')
    assert broken_links(page) == ["missing.md: no such file",
                                  "other.md#nowhere: no heading #nowhere in other.md"]
    assert broken_named_sections(page) == ["other.md: Gone", "other.md: Missing"]


# --- defaults quoted in prose ---------------------------------------------------------------------

def known_defaults() -> dict[str, set[str]]:
    """Each option's default(s) as the code states them: the plugin options' help "(default:
    X)" (the row's default, from core/defaults.py) and the argparse defaults of every `orbench`
    command."""
    known: dict[str, set[str]] = {}
    for option in OPTIONS:
        stated = re.search(r"\(default: ([^;)]+)", option.text)
        if stated:
            known.setdefault(option.flag, set()).add(stated[1].strip())
    parsers = [_parser()]
    while parsers:
        parser = parsers.pop()
        for action in parser._actions:
            choices = getattr(action, "choices", None)
            if isinstance(choices, dict):
                parsers.extend(choices.values())
            elif action.option_strings and action.default is not None and \
                    action.default is not False and action.default not in ([], "==SUPPRESS=="):
                for flag in action.option_strings:
                    known.setdefault(flag, set()).add(str(action.default))
    return known


# "(`--flag`, default 0.8)", "`--flag` (default: 60)", "(`--flag`, 20 by default)",
# "60 answers by default (`--flag`)"
QUOTED = [re.compile(r"`(--[a-z][a-z-]*)[^`]*`[^.;()`]{0,30}?\(?,?\s*default:? `?(\d[\d,.]*)"),
          re.compile(r"`(--[a-z][a-z-]*)[^`]*`[^.;()`]{0,30}?,\s*(\d[\d,.]*) by default"),
          re.compile(r"(\d[\d,.]*)[\w ]{0,30} by default \(`(--[a-z][a-z-]*)")]


def quoted_defaults(text: str) -> list[tuple[str, str]]:
    """(flag, value) for each default the prose quotes for an option."""
    text = " ".join(prose(text).split())
    found = []
    for pattern in QUOTED:
        for match in pattern.finditer(text):
            flag, value = match.groups() if match[1].startswith("--") else \
                (match[2], match[1])
            found.append((flag, value.rstrip(".,")))
    return found


def same_value(quoted: str, stated: set[str]) -> bool:
    def number(text: str) -> float | None:
        try:
            return float(text.replace(",", "").replace("_", ""))
        except ValueError:
            return None

    return any(quoted == s or (number(quoted) is not None and number(quoted) == number(s))
               for s in stated)


def wrong_defaults(text: str, known: dict[str, set[str]]) -> list[str]:
    return [f"{flag}: the prose says {value}, the code {sorted(known.get(flag, {'nothing'}))}"
            for flag, value in quoted_defaults(text)
            if not same_value(value, known.get(flag, set()))]


def test_every_default_quoted_in_prose_is_the_codes() -> None:
    known = known_defaults()
    quoted = [pair for page in PAGES for pair in quoted_defaults(page.read_text())]
    assert len(quoted) >= 3, quoted  # the scan finds what it checks
    wrong = {str(page.relative_to(REPO)): found for page in PAGES
             if (found := wrong_defaults(page.read_text(), known))}
    assert wrong == {}


def test_a_stale_default_in_prose_is_found() -> None:
    known = {"--n": {"60"}, "--dedupe-threshold": {"0.8"}, "--max-disagreements": {"20"}}
    text = ("Sample 50 answers by default (`--n`), dedupe at (`--dedupe-threshold`, default "
            "0.8), list (`--max-disagreements`, 10 by default).")
    assert sorted(wrong_defaults(text, known)) == [
        "--max-disagreements: the prose says 10, the code ['20']",
        "--n: the prose says 50, the code ['60']"]


def test_the_workflows_env_defaults_are_stated_as_the_workflow_sets_them() -> None:
    """A sentence that gives an env variable of the gate workflow a default says what the
    shipped workflow sets: "empty" where it is ""."""
    env = template_env()
    for page in PAGES:
        text = " ".join(prose(page.read_text()).split())
        for name, value in env.items():
            for match in re.finditer(rf"`{name}`[^.;]*?\bdefault\b[^.;]*", text):
                if value == "":
                    assert "empty" in match[0], f"{page.name}: {match[0]}"
                else:
                    assert value in match[0], f"{page.name}: {match[0]}"


def test_the_python_version_the_docs_state_is_the_one_the_package_requires() -> None:
    from orbench_pytest.cli.init_values import tomllib

    requires = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    minimum = re.fullmatch(r">=\s*3\.(\d+)", requires)
    assert minimum, requires
    assert sys.version_info >= (3, int(minimum[1]))
    stated = {(page.name, m) for page in PAGES
              for m in re.findall(r"Python (3\.\d+)\+", page.read_text())}
    assert stated, "no page states the Python version"
    assert {m for _, m in stated} == {f"3.{minimum[1]}"}, stated


def test_the_hypothesis_wording_the_docs_quote_is_the_installed_hypothesis(
        pytester: pytest.Pytester) -> None:
    """docs/rewordings.md quotes Hypothesis' report of a failing example ("Falsifying example"
    became "Failing test case"); the quoted words are the ones it prints."""
    quoted = re.search(r"Hypothesis' \"([^\"]+)\" shows them",
                       (REPO / "docs" / "rewordings.md").read_text())
    assert quoted
    pytester.makepyfile("from hypothesis import given, strategies as st\n"
                        "@given(st.integers(min_value=5))\n"
                        "def test_x(n):\n    assert n < 5\n")
    result = pytester.runpytest("-p", "no:orbench", "-p", "no:xdist")
    result.assert_outcomes(failed=1)
    assert f"{quoted[1]}: test_x(" in result.stdout.str()
