"""Untrusted text rendered so it cannot forge output.

Prompts, answers, endpoint error messages and names read from data files reach terminals, CI
logs, JUnit files and pull-request comments. Rendered here, such text cannot:
- move the cursor, clear the screen or rewrite a line (control characters become visible
  escapes such as \\x1b, \\r, \\u202e);
- start a CI workflow command (GitHub Actions runs a log line that begins with `::`, after
  leading spaces, and a `##[` command anywhere in a line);
- ping people, link or emphasise in Markdown (mentions, autolinks, markup are escaped);
- carry a configured secret (every rendering redacts first).

CSV cells a person opens in a spreadsheet or `cat`s in a CI log (labels.csv, generate's CSVs)
go through csv_cell, and are read back exactly by csv_value.
"""

from __future__ import annotations

import html
import re
import unicodedata

from orbench_pytest.core.redact import redact, redact_known

# Unicode categories shown as escapes: controls, format characters (bidi overrides, zero
# width), line and paragraph separators, private use and unassigned code points.
_HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp", "Co", "Cs", "Cn"})
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_WORKFLOW_COMMAND = re.compile(r"^(\s*):")  # `::cmd` at a line's start, spaces allowed
_OLD_COMMAND = "##["
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


def _no_commands(text: str) -> str:
    """No workflow command can start in this (single) line."""
    if _OLD_COMMAND in text:
        text = text.replace(_OLD_COMMAND, "#\\x23[")
    if text.lstrip().startswith("::"):
        text = _WORKFLOW_COMMAND.sub(r"\1\\x3a", text, count=1)
    return text


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
_CELL_COMMAND = re.compile(r"(?m)^([ \t]*):(?=:)")


def _cell_escape(ch: str) -> str:
    return f"\\u{{{ord(ch):x}}}"


def _needs_quote_mark(text: str) -> bool:
    """Starts like a formula, or with the ' that marks one (so a leading ' reads back)."""
    rest = text.lstrip("'")
    return bool(rest) and rest[0] in FORMULA_STARTS


def csv_cell(value: object) -> object:
    """A CSV cell that neither a spreadsheet runs (a formula start gets a leading ') nor a
    terminal or CI log obeys (a control character, a `::` at a line's start or `##[` becomes
    a `\\u{hex}` escape), without a configured secret; csv_value reads it back exactly.
    Plain text is written as it is; non-text values are left to the CSV writer."""
    if not isinstance(value, str):
        return value
    text = redact_known(value)
    if not (text.isprintable() and "\\u{" not in text and _OLD_COMMAND not in text
            and "::" not in text):
        text = "".join(_cell_escape(ch) if (ch == "\\" and text.startswith("u{", i + 1))
                       or (ch not in _CELL_KEPT and unicodedata.category(ch) in _HIDDEN)
                       else ch for i, ch in enumerate(text))
        text = _CELL_COMMAND.sub(lambda m: m.group(1) + _cell_escape(":"), text)
        text = text.replace(_OLD_COMMAND, "#" + _cell_escape("#") + "[")
    return "'" + text if _needs_quote_mark(text) else text


def csv_value(cell: str) -> str:
    """A cell as csv_cell wrote it, read back: the formula mark dropped, escapes undone."""
    if cell[:1] == "'" and _needs_quote_mark(cell[1:]):
        cell = cell[1:]
    if "\\u{" not in cell:
        return cell
    return _CELL_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), cell)
