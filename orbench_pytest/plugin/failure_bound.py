"""However many prompts fail, the terminal summary stays bounded: pytest's FAILURES and ERRORS
sections and its short summary show the first SHOWN_FAILURES failures and the first
SHOWN_FAILURES errors of orbench prompts, and one line counts the rest and says where every
one is. The user's own tests are always shown in full; the stats line ("20000 failed"), the
exit status, JUnit and the results file count every prompt.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import pytest

from orbench_pytest.core.defaults import SHOWN_FAILURES
from orbench_pytest.core.untrusted import terminal_line

BOUNDED_KINDS = ("failed", "error")  # the terminal reporter's stats keys narrowed


class FailureBound:
    """A plugin of its own beside the session (a class holds one `pytest_terminal_summary`)."""

    def __init__(self, config: pytest.Config, is_prompt: Callable[[str], bool],
                 results: Path | None) -> None:
        self.config = config
        self.is_prompt = is_prompt
        self.results = results

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> Generator[None]:
        """tryfirst makes this wrapper the outer one of the terminal reporter's (pluggy calls
        tryfirst wrappers first), which writes FAILURES and ERRORS before its yield and the
        short summary after it: both see the narrowed lists. The full lists are back before
        pytest_sessionfinish writes the stats line, so it counts every prompt."""
        stats: dict[str, list[Any]] = terminalreporter.stats
        full = {kind: stats[kind] for kind in BOUNDED_KINDS if stats.get(kind)}
        hidden: dict[str, int] = {}
        for kind, reports in full.items():
            kept, cut = self._narrow(reports)
            if cut:
                stats[kind], hidden[kind] = kept, cut
        try:
            return (yield)
        finally:
            stats.update(full)
            if hidden and not self.config.option.no_summary:
                terminalreporter.write_line(self._hidden_line(hidden))

    def _narrow(self, reports: list[Any]) -> tuple[list[Any], int]:
        """Every report of a non-prompt test, and the first SHOWN_FAILURES of prompts; how many
        prompts' reports were left out."""
        kept: list[Any] = []
        prompts = 0
        for report in reports:
            if self.is_prompt(report.nodeid):
                prompts += 1
                if prompts > SHOWN_FAILURES:
                    continue
            kept.append(report)
        return kept, len(reports) - len(kept)

    def _hidden_line(self, hidden: dict[str, int]) -> str:
        counts = " and ".join(f"{hidden[kind]} more {word}" for kind, word in
                              (("failed", "failed"), ("error", "errored")) if kind in hidden)
        places = []
        junit = getattr(self.config.option, "xmlpath", None)
        if junit:
            places.append(f"the JUnit XML ({junit})")
        if self.results is not None:
            places.append(f"the results file ({self.results})")
        where = (f"every one is in {' and '.join(places)}" if places else
                 "--junitxml=PATH or --orbench-results=PATH keeps every one")
        return terminal_line(f"orbench: {counts} prompts not shown; {where}")
