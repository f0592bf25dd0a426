"""pytest collection: a suite file is a test module, each prompt (× variant) one test item.

Items are lookups: the verdicts come from the fetch-and-judge phase, so an item only reads
its state and reports passed / xfailed / failed / error accordingly. It reports without raising:
`report` fills the TestReport with short, fixed-size text, so a tolerated or failed prompt
never goes through pytest's traceback formatting (the cost of a whole green 80K run otherwise).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from .errors import ConfigError
from .gate import Outcome
from .settings import Variant
from .stash import STOP_PREFIX, orbench_session
from .types import PromptCase

if TYPE_CHECKING:
    from .runner import ItemState

PROMPT_CHARS = 300


class SuiteFile(pytest.File):
    def collect(self) -> Iterator[PromptItem]:
        from .collection import suite_entries

        session = orbench_session(self.config)
        suite = session.catalog().load(self.path)
        for name, case, variant in suite_entries(suite, session.settings.variants):
            yield PromptItem.from_parent(self, name=name, case=case, variant=variant)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException]) -> Any:  # type: ignore[override]
        if isinstance(excinfo.value, ConfigError):
            return str(excinfo.value)
        return super().repr_failure(excinfo)


class PromptItem(pytest.Item):
    def __init__(self, *, case: PromptCase, variant: Variant, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        self.variant = variant
        self.state: ItemState | None = None

    def setup(self) -> None:
        self.state = orbench_session(self.config).item_state(self.nodeid)
        self.user_properties.extend(self._properties(self.state))

    def runtest(self) -> None:
        """Nothing to run: `report` turns the state into the call's outcome."""

    def report(self, call: pytest.CallInfo[None]) -> pytest.TestReport | None:
        """This item's report of `call`; None when pytest's own applies (an exception)."""
        state = self.state
        if call.excinfo is not None or state is None or call.when == "teardown":
            return None
        report = pytest.TestReport.from_item_and_call(self, call)
        outcome = state.outcome
        if call.when == "setup":
            if outcome is Outcome.ERROR:  # a setup failure: pytest reports an error
                report.outcome = "failed"
                report.longrepr = self._error_text(state)
                if state.reason.startswith("run stopped: "):
                    # The run stopped (endpoint unavailable): stop as -x does, one error
                    # shown, not one per prompt never sent.
                    self.session.shouldfail = f"{STOP_PREFIX}{state.reason}"
            return report
        if outcome is Outcome.FAILED:
            report.outcome = "failed"
            report.longrepr = self._mismatch_text(state)
        elif outcome is Outcome.TOLERATED:
            report.outcome = "skipped"
            report.wasxfail = state.reason
        elif outcome is Outcome.ERROR_TOLERATED:
            report.outcome = "skipped"
            report.wasxfail = (
                f"no answer ({state.answer.verdict.reason}); {state.reason}")
        return report

    def _properties(self, state: ItemState) -> list[tuple[str, object]]:
        """JUnit per-item properties: the verdict, and the prompt of a mismatch."""
        answer = state.answer
        verdict = answer.verdict
        properties: list[tuple[str, object]] = [
            ("suite", self.case.suite),
            ("category", self.case.category),
            ("expectation", self.case.expect),
            ("verdict", verdict.label.value),
            ("judge", verdict.judge),
            ("reason", verdict.reason),
            ("response", answer.excerpt),
            ("latency_ms", f"{answer.latency_ms:.0f}"),
            ("cached", "true" if answer.cached else "false"),
        ]
        if self.variant.name:
            properties.append(("variant", self.variant.name))
        if state.result.mismatch:
            properties.append(("prompt", self._prompt()))
        return properties

    def _error_text(self, state: ItemState) -> str:
        return (f"no answer from the endpoint: {state.answer.verdict.reason}\n"
                f"prompt:   {self._prompt()}\n"
                f"gate:     {state.reason}")

    def _mismatch_text(self, state: ItemState) -> str:
        verdict = state.answer.verdict
        got = verdict.label.value.replace("_", " ")
        return "\n".join([
            f"expected {self.case.expect} (category {self.case.category}), got {got} "
            f"(judge {verdict.judge}: {verdict.reason})",
            f"prompt:   {self._prompt()}",
            f"response: {_one_line(state.answer.excerpt) or '(empty)'}",
            f"gate:     {state.reason}",
        ])

    def _prompt(self) -> str:
        return _one_line(self.case.prompt)[:PROMPT_CHARS]

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, f"orbench: {self.case.suite}/{self.case.case_id}"


def _one_line(text: str) -> str:
    return " ".join(text.split())
