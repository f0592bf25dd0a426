"""Untrusted text rendered so it cannot forge output.

Prompts, answers, endpoint error messages and names read from data files reach terminals, CI
logs, JUnit files and pull-request comments. Rendered here, such text cannot:
- move the cursor, clear the screen or rewrite a line (control characters become visible
  escapes such as \\x1b, \\r, \\u202e);
- start a CI system's log command or section (GitHub Actions, Azure Pipelines, GitLab,
  Buildkite, TeamCity: MARKERS below, each with its source), in every output: terminal, JUnit,
  results file, PR comment, CSV cells;
- ping people, link or emphasise in Markdown (mentions, autolinks, markup are escaped);
- carry a configured secret (every rendering redacts first).

CSV cells a person opens in a spreadsheet or `cat`s in a CI log (labels.csv, generate's CSVs)
go through csv_cell, and are read back exactly by csv_value.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from orbench_pytest.core.redact import redact, redact_known

# Unicode categories shown as escapes: controls, format characters (bidi overrides, zero
# width), line and paragraph separators, private use and unassigned code points.
_HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp", "Co", "Cs", "Cn"})
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
ZERO_WIDTH_SPACE = "\u200b"  # breaks a mention or an autolink without showing


def _escape(ch: str) -> str:
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 \
        else f"\\U{code:08x}"


def _visible(text: str) -> str:
    if text.isprintable():  # the common case: nothing to escape
        return text
    return "".join(_escape(ch) if unicodedata.category(ch) in _HIDDEN else ch for ch in text)


# --- CI log markers -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Marker:
    """Text a CI system obeys in a job's log. `pattern`: a regex whose one group is the
    character escaped to defuse it; `line_start`: obeyed only where a line begins (after
    spaces), else anywhere in a line."""

    system: str
    example: str
    pattern: str
    line_start: bool
    source: str


_BUILDKITE = "https://buildkite.com/docs/pipelines/configure/managing-log-output"
_AZURE = "https://learn.microsoft.com/en-us/azure/devops/pipelines/scripts/logging-commands"
# The table docs/hostile-input.md shows (tests/test_ci_markers.py checks they agree).
MARKERS: tuple[Marker, ...] = (
    Marker("GitHub Actions", "::error::text", r"(:):", True,
           "https://docs.github.com/en/actions/reference/workflows-and-actions/"
           "workflow-commands"),
    Marker("GitHub Actions, Azure Pipelines", "##[group]text", r"#(#)\[", False,
           f"{_AZURE}#formatting-commands"),
    Marker("Azure Pipelines", "##vso[task.complete result=Succeeded]", r"#(#)vso\[", False,
           _AZURE),
    Marker("TeamCity", "##teamcity[buildStatus status='SUCCESS']", r"#(#)teamcity\[", False,
           "https://www.jetbrains.com/help/teamcity/service-messages.html"),
    Marker("GitLab CI/CD", "section_start:1560896352:name (after ESC[0K)",
           r"section_(?:start|end)(:)", False,
           "https://docs.gitlab.com/ci/jobs/job_logs/#custom-collapsible-sections"),
    Marker("Buildkite", "--- group", r"(-)--[ \t]", True, _BUILDKITE),
    Marker("Buildkite", "+++ expanded group", r"(\+)\+\+[ \t]", True, _BUILDKITE),
    Marker("Buildkite", "~~~ collapsed group", r"(~)~~[ \t]", True, _BUILDKITE),
    Marker("Buildkite", "^^^ +++", r"(\^)\^\^[ \t]+\+\+\+", True, _BUILDKITE),
)
# A line starts at the text's start or after any break str.splitlines knows. Letters match in
# either case: the agents compare `##vso[` and `##teamcity[` case-insensitively.
_LINE_START = r"(?:^|(?<=[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]))[ \t]*"
_MARKER = re.compile("|".join(_LINE_START + m.pattern if m.line_start else m.pattern
                              for m in MARKERS), re.IGNORECASE)
_HINTS = ("::", "##", "ection_", "ECTION_", "--", "++", "~~", "^^")  # one is in every marker


def defused(text: str, escape: Callable[[str], str]) -> str:
    """`text` with every CI marker of MARKERS made inert: the marker's key character written
    by `escape` (a terminal's \\x3a, a CSV cell's \\u{3a}, JSON's \\u003a, read back as ':')."""
    if not any(hint in text for hint in _HINTS):  # the common case: nothing to look for
        return text

    def one(match: re.Match[str]) -> str:
        group = next(i for i, value in enumerate(match.groups(), 1) if value is not None)
        start, end = match.span(group)
        return (text[match.start():start] + escape(match.group(group))
                + text[end:match.end()])

    return _MARKER.sub(one, text)


def json_escape(ch: str) -> str:
    """A character as a JSON string escape (read back as the character itself)."""
    return f"\\u{ord(ch):04x}"


def _hex(ch: str) -> str:
    return f"\\x{ord(ch):02x}"


def _no_commands(text: str) -> str:
    """No CI marker can act in this text (a line, or lines)."""
    return defused(text, _hex)


def clip(text: str, limit: int | None) -> str:
    if limit is None or len(text) <= limit:
        return text
    return text[: max(limit - 1, 0)].rstrip() + "…"


def terminal_line(text: object) -> str:
    """One line for a terminal or a CI log, spacing kept (tables stay aligned)."""
    return _no_commands(_visible(redact(str(text))))


def terminal_text(text: object, limit: int | None = None) -> str:
    """Untrusted text inside one of our lines: whitespace runs folded to one space (so line
    breaks of any kind fold too), then shown as terminal_line, then cut to `limit`."""
    folded = " ".join(redact(str(text)).split())
    return _no_commands(clip(_visible(folded), limit))


def inert_text(text: object, limit: int | None = None) -> str:
    """terminal_text for a line often pasted into a pull-request comment (generate's review):
    no mention either (`@name` shown as `[at]name`), the secrets redacted before."""
    return clip(terminal_text(text).replace("@", "[at]"), limit)


_MARKDOWN = str.maketrans({
    "\\": "\\\\", "`": "\\`", "*": "\\*", "_": "\\_", "~": "\\~", "[": "\\[", "]": "\\]",
    "(": "\\(", ")": "\\)", "!": "\\!", "#": "\\#", "|": "\\|", "<": "&lt;", ">": "&gt;",
    "&": "&amp;", "@": "@" + ZERO_WIDTH_SPACE,
})
_AUTOLINK = re.compile(r"(?i)(:)(//)|\b(www)(\.)")


def markdown_text(text: object, limit: int | None = None) -> str:
    """Untrusted text inside a Markdown line or table cell: no markup, no mention, no link."""
    shown = terminal_text(text, limit).translate(_MARKDOWN)
    return _AUTOLINK.sub(lambda m: "".join(g for g in (m.group(1), m.group(3)) if g)
                         + ZERO_WIDTH_SPACE + (m.group(2) or m.group(4)), shown)


def markdown_code(text: object, limit: int | None = None) -> str:
    """Untrusted text inside an inline code span (`…`): mentions and markup do not render
    there; only a backtick could end the span early."""
    return terminal_text(text, limit).replace("`", "'")


# --- HTML ---------------------------------------------------------------------------------------
_SURROGATE = re.compile("[\ud800-\udfff]")  # a lone one cannot be written as UTF-8


def html_text(value: object) -> str:
    """Untrusted text as HTML text or an attribute's value (the HTML report): escaped, a lone
    surrogate replaced; never markup."""
    return html.escape(_SURROGATE.sub("\ufffd", str(value)), quote=True)


# --- CSV cells --------------------------------------------------------------------------------
FORMULA_STARTS = "=+-@\t\r"  # a cell a spreadsheet would run as a formula (OWASP's list)
_CELL_KEPT = frozenset("\n\t")  # line breaks and tabs stay: a long answer stays readable
_CELL_ESCAPE = re.compile(r"\\u\{([0-9a-f]{1,6})\}")


def _cell_escape(ch: str) -> str:
    return f"\\u{{{ord(ch):x}}}"


def _needs_quote_mark(text: str) -> bool:
    """Starts like a formula, or with the ' that marks one (so a leading ' reads back)."""
    rest = text.lstrip("'")
    return bool(rest) and rest[0] in FORMULA_STARTS


def kept_text(value: str) -> str:
    """Untrusted text written where a file must give it back exactly (a CSV cell, a JUnit
    property): without a configured secret, a control character or a CI marker's key
    character as a `\\u{hex}` escape (a `\\u{` of the text itself escaped too, so
    read_kept undoes exactly what was done)."""
    text = redact_known(value)
    if not (text.isprintable() and "\\u{" not in text):
        text = "".join(_cell_escape(ch) if (ch == "\\" and text.startswith("u{", i + 1))
                       or (ch not in _CELL_KEPT and unicodedata.category(ch) in _HIDDEN)
                       else ch for i, ch in enumerate(text))
    return defused(text, _cell_escape)


def read_kept(text: str) -> str:
    """Text as kept_text wrote it, read back."""
    if "\\u{" not in text:
        return text
    return _CELL_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text)


def csv_cell(value: object) -> object:
    """A CSV cell that neither a spreadsheet runs (a formula start gets a leading ') nor a
    terminal or CI log obeys (kept_text); csv_value reads it back exactly. Plain text is
    written as it is; non-text values are left to the CSV writer."""
    if not isinstance(value, str):
        return value
    text = kept_text(value)
    return "'" + text if _needs_quote_mark(text) else text


def csv_value(cell: str) -> str:
    """A cell as csv_cell wrote it, read back: the formula mark dropped, escapes undone."""
    if cell[:1] == "'" and _needs_quote_mark(cell[1:]):
        cell = cell[1:]
    return read_kept(cell)


# --- reprs ------------------------------------------------------------------------------------
_Class = TypeVar("_Class", bound=type)


def redacted_repr(cls: _Class) -> _Class:
    """Class decorator (above @dataclass): the class's own repr, redacted and inert, wherever a
    library shows the object: repr() (pytest's assertion rewriting, tracebacks) and Hypothesis'
    reports, which print a dataclass field by field and a str subclass as a plain str unless
    `_repr_pretty_` says otherwise. A prompt or an answer that quotes a key shows [REDACTED]."""
    plain = cast(Callable[[object], str], cls.__repr__)

    def __repr__(self: object) -> str:
        return terminal_line(plain(self))

    def _repr_pretty_(self: object, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))

    setattr(cls, "__repr__", __repr__)  # noqa: B010 (mypy: a method is not assignable)
    setattr(cls, "_repr_pretty_", _repr_pretty_)  # noqa: B010
    return cls
