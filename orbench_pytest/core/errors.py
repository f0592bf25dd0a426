"""The package's exceptions: every error it raises on purpose derives from OrbenchError.

    OrbenchError
    ├── ConfigError           bad input (file, option, environment): one line naming the fix;
    │                         the pytest shell shows it as a usage error (exit 4), the CLIs
    │                         exit 2
    ├── BatchEnded            a run that ends after a batch step (an export, a status): the
    │                         lines to print and the exit status, not a failure
    ├── BodyTooLarge          (core/bounded.py) a reply over the body limit: that answer is an
    │                         error, not retried
    ├── TransientFault        (fetch/targets.py) worth another try: a 429, a 5xx, a reset, a
    │                         timeout, a garbled body
    ├── ConfigFault           (fetch/targets.py) the request itself is wrong (401, 403, 404, a
    │                         bad parameter): the run stops at the first one
    ├── CacheWriteError       (fetch/cache_write.py) an answer could not be stored: the run
    │                         stops with a line naming the file
    └── GenerationIncomplete  (generate/pipeline.py) `orbench generate` got no answer to some
                              requests; what did is cached for the next run

Private exceptions (`_Malformed`, `_Wrong`) are control flow inside one module, turned into a
ConfigError before they leave it; each docstring says so. tests/test_package_shape.py checks
that every public exception class of the package derives from OrbenchError; docs/reliability.md
shows the tree to users.
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
