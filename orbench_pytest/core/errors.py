"""The package's exceptions: every error it raises on purpose derives from OrbenchError.

The tree, with where each class lives and what it means, is drawn once, for the code that
catches them: docs/reliability.md, "Errors, for code that catches them" (its code block checks
it). Private exceptions (`_Malformed`, `_Wrong`) are control flow inside one module, turned
into a ConfigError before they leave it; each docstring says so. tests/test_package_shape.py
fails on a public exception class of the package that does not derive from OrbenchError.
"""

from collections.abc import Iterable, Sequence


class OrbenchError(Exception):
    """Base of every error this package raises on purpose."""


class ConfigError(OrbenchError):
    """Bad user input (file, option, environment): the message is one line naming the fix."""

    def __init__(self, message: str) -> None:
        # One line whatever the message quotes (a YAML key, an option value, an endpoint's
        # error), with control characters shown, no workflow command and no secret.
        from orbench_pytest.core.untrusted import terminal_line

        super().__init__(terminal_line(one_line(message)))


class BatchEnded(OrbenchError):
    """The run ends after a batch step, without asking or gating (an export, a status, a batch
    still running): the lines to print and the exit status. Here, not in run/batch_steps.py:
    the session catches it in every run, and a run without batch steps loads no batch code."""

    def __init__(self, lines: list[str], returncode: int = 0) -> None:
        super().__init__(lines[-1] if lines else "")
        self.lines = lines
        self.returncode = returncode


def check_known_keys(keys: Iterable[object], allowed: Sequence[str], where: str) -> None:
    """The one-line error for a key not in `allowed`: `{where}{key}: unknown key (allowed: …)`."""
    for key in keys:
        if key not in allowed:
            raise ConfigError(f"{where}{key}: unknown key (allowed: {', '.join(allowed)})")


# Everything str.splitlines() breaks on (what terminals and pytest's output split on too).
_LINE_BREAKS: dict[str, str | int | None] = {
    ch: repr(ch)[1:-1] for ch in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"}


def one_line(text: str) -> str:
    """`text` with every line break written as its escape (\\n, \\r, …)."""
    return text.translate(str.maketrans(_LINE_BREAKS)) if not text.isprintable() else text
