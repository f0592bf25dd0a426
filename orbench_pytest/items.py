"""pytest collection: a suite file is a test module, each prompt (× variant) one test item.

Items are lookups: the verdicts come from the fetch-and-judge phase, so an item only reads
its state and reports passed / xfailed / failed / error accordingly.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from .errors import ConfigError
from .gate import Outcome
from .ids import item_name
from .settings import Variant
from .types import PromptCase

if TYPE_CHECKING:
    from .session import ItemState

PROMPT_CHARS = 300


class PromptMismatch(Exception):
    """The model did the opposite of what the prompt expects, and the gate does not tolerate it."""


class SuiteFile(pytest.File):
    def collect(self) -> Iterator[PromptItem]:
        from .plugin import get_plugin

        plugin = get_plugin(self.config)
        suite = plugin.load_suite(self.path)
        for case in suite.cases:
            for variant in plugin.settings.variants:
                yield PromptItem.from_parent(self, name=item_name(suite.name, case.case_id,
                                                                  variant.name),
                                             case=case, variant=variant)

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
        from .plugin import get_plugin

        self.state = state = get_plugin(self.config).item_state(self)
        answer = state.answer
        self.user_properties.extend([
            ("suite", self.case.suite),
            ("category", self.case.category),
            ("expectation", self.case.expect),
            ("verdict", answer.verdict.label.value),
            ("judge", answer.verdict.judge),
            ("reason", answer.verdict.reason),
            ("response", answer.excerpt),
            ("latency_ms", f"{answer.latency_ms:.0f}"),
            ("cached", "true" if answer.cached else "false"),
        ])
        if self.variant.name:
            self.user_properties.append(("variant", self.variant.name))
        if state.outcome is Outcome.ERROR:
            # Raised in setup, so pytest reports an error (not a failure); pytrace=False keeps
            # the report to the message alone.
            pytest.fail(f"no answer from the endpoint: {answer.verdict.reason}\n"
                        f"prompt:   {self._prompt()}\n"
                        f"gate:     {state.reason}", pytrace=False)

    def runtest(self) -> None:
        state = self.state
        assert state is not None
        if state.outcome is Outcome.ERROR_TOLERATED:
            pytest.xfail(f"no answer ({state.answer.verdict.reason}); {state.reason}")
        if state.outcome is Outcome.TOLERATED:
            pytest.xfail(state.reason)
        if state.outcome is Outcome.FAILED:
            raise PromptMismatch(state.reason)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],  # type: ignore[override]
                     style: Any = None) -> str | Any:
        # Short, fixed-size text: no traceback, and pytest's summary stays cheap at 80K items.
        if isinstance(excinfo.value, PromptMismatch) and self.state is not None:
            verdict = self.state.answer.verdict
            got = verdict.label.value.replace("_", " ")
            return "\n".join([
                f"expected {self.case.expect} (category {self.case.category}), got {got} "
                f"(judge {verdict.judge}: {verdict.reason})",
                f"prompt:   {self._prompt()}",
                f"response: {_one_line(self.state.answer.excerpt) or '(empty)'}",
                f"gate:     {excinfo.value}",
            ])
        return super().repr_failure(excinfo)

    def _prompt(self) -> str:
        return _one_line(self.case.prompt)[:PROMPT_CHARS]

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, f"orbench: {self.case.suite}/{self.case.case_id}"


def _one_line(text: str) -> str:
    return " ".join(text.split())
