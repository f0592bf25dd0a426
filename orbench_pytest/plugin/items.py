"""pytest collection: a suite file is a test module, each prompt (× variant) one test item.

Items are lookups: the verdicts come from the fetch-and-judge phase, so an item only reads
its state and reports passed / xfailed / failed / error accordingly. It reports without raising:
`report` fills the TestReport with short, fixed-size text, so a tolerated or failed prompt
never goes through pytest's traceback formatting (the cost of a whole green 80K run otherwise).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from orbench_pytest.config.settings import Variant
from orbench_pytest.core.conversation import shown_turns
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.ids import item_nodeid
from orbench_pytest.core.redact import redact
from orbench_pytest.core.types import PromptCase
from orbench_pytest.core.untrusted import kept_text, terminal_text
from orbench_pytest.gate.decision import Outcome
from orbench_pytest.gate.samples import times
from orbench_pytest.plugin.stash import STOP_PREFIX, orbench_session

if TYPE_CHECKING:
    from orbench_pytest.run.runner import ItemState

PROMPT_CHARS = 300


class SuiteFile(pytest.File):
    refused: str | None = None  # a file name that would forge output (session.forging_name)

    def collect(self) -> Iterator[PromptItem]:
        from orbench_pytest.catalog.collection import suite_entries
        from orbench_pytest.gate.disputed import skip_reason

        if self.refused is not None:
            raise ConfigError(self.refused)

        session = orbench_session(self.config)
        suite = session.catalog().load(self.path)
        disputes = session.disputes()
        for marker in session.suite_markers(suite.name) if suite.name else ():
            self.add_marker(marker)
        for name, case, variant in suite_entries(suite, session.settings.target.variants):
            item = PromptItem.from_parent(self, name=name, nodeid=item_nodeid(self.nodeid, name),
                                          case=case, variant=variant)
            item.extra_keyword_matches.add(case.category)  # -k privacy
            disputed = skip_reason(case.suite, case.case_id, disputes)
            if disputed is not None:  # never asked, never in a rate: skipped with its reason
                item.disputed = True
                item.add_marker(pytest.mark.skip(reason=terminal_text(disputed)))
            yield item

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
        self.disputed = False  # skipped by a skip mark: listed as disputed

    def setup(self) -> None:
        self.state = orbench_session(self.config).item_state(self.nodeid)
        # JUnit's per-item properties, built only when a JUnit file is written (an xdist
        # worker has the option too): unread otherwise, and the largest per-item cost of a
        # rerun's items (docs/design/throughput.md).
        if getattr(self.config.option, "xmlpath", None):
            self.user_properties.extend(self._properties(self.state))

    def runtest(self) -> None:
        """Nothing to run: `report` turns the state into the call's outcome."""

    def report(self, call: pytest.CallInfo[None]) -> pytest.TestReport | None:
        """This item's report of `call`; None when pytest's own applies (an exception)."""
        state = self.state
        if call.excinfo is not None or state is None or call.when == "teardown":
            return None
        report = pytest.TestReport.from_item_and_call(self, call)
        outcome = _shown_outcome(state.outcome, self.config.option.runxfail)
        if call.when == "setup":
            if outcome is Outcome.ERROR:  # a setup failure: pytest reports an error
                report.outcome = "failed"
                report.longrepr = self._error_text(state)
                if state.reason.startswith("run stopped: "):
                    # The run stopped (endpoint unavailable): stop as -x does, one error
                    # shown, not one per prompt never sent.
                    self.session.shouldfail = f"{STOP_PREFIX}{terminal_text(state.reason)}"
            return report
        if getattr(self.config.option, "htmlpath", None):  # pytest-html's --html
            report.extras = self._html_extras(state)  # type: ignore[attr-defined]
        if outcome is Outcome.FAILED:
            report.outcome = "failed"
            report.longrepr = self._mismatch_text(state)
        elif outcome is Outcome.TOLERATED:
            report.outcome = "skipped"
            report.wasxfail = terminal_text(state.reason)
        elif outcome is Outcome.ERROR_TOLERATED:
            report.outcome = "skipped"
            report.wasxfail = terminal_text(
                f"no answer ({state.answer.verdict.reason}); {state.reason}")
        return report

    def _properties(self, state: ItemState) -> list[tuple[str, object]]:
        """JUnit per-item properties: the verdict, and the prompt of a mismatch."""
        answer = state.answer
        verdict = answer.verdict
        properties: list[tuple[str, object]] = [
            ("suite", self.case.suite),
            ("category", kept_text(self.case.category)),  # a file's text, read back exactly
            ("expectation", self.case.expect),
            ("verdict", verdict.label.value),
            ("judge", verdict.judge),
            ("reason", terminal_text(verdict.reason)),
            ("response", terminal_text(answer.excerpt)),
            ("latency_ms", f"{answer.latency_ms:.0f}"),
            ("cached", "true" if answer.cached else "false"),
        ]
        if self.variant.name:
            properties.append(("variant", self.variant.name))
        if state.result.sampled:  # --orbench-samples: the prompt's refusal rate
            from orbench_pytest.reports.document import sampled_fields

            properties.extend((name, "" if value is None else str(value))
                              for name, value in sampled_fields(state.result).items())
        if state.result.mismatch:
            properties.append(("prompt", terminal_text(self.case.prompt, PROMPT_CHARS)))
            if self.case.history:  # the whole conversation, as JSON (read back by junit.py)
                properties.append(("messages", json.dumps(
                    [{"role": role, "content": redact(content)}
                     for role, content in (*self.case.history, ("user", self.case.prompt))],
                    ensure_ascii=False)))
        return properties

    def _html_extras(self, state: ItemState) -> list[dict[str, Any]]:
        """pytest-html's extras of this item's row: the prompt, the answer, the verdict and
        the judge's reason, nothing more (pytest-html shows them as text, never as HTML)."""
        from pytest_html import extras  # only with --html: pytest-html is loaded then

        verdict = state.answer.verdict
        return [extras.text(redact(text), name=name) for name, text in (
            ("prompt", self.case.prompt), ("answer", state.answer.text or state.answer.excerpt),
            ("verdict", verdict.label.value), ("judge's reason", verdict.reason))]

    def _error_text(self, state: ItemState) -> str:
        return (f"no answer from the endpoint: {terminal_text(state.answer.verdict.reason)}\n"
                f"prompt:   {self._prompt()}\n"
                f"gate:     {terminal_text(state.reason)}")

    def _mismatch_text(self, state: ItemState) -> str:
        if not state.result.mismatch:  # --orbench-rewordings: answered, but fragile
            return "\n".join([f"prompt:   {self._prompt()}",
                              f"gate:     {terminal_text(state.reason)}"])
        verdict = state.answer.verdict
        got = verdict.label.value.replace("_", " ")
        return "\n".join([
            terminal_text(f"expected {self.case.expect} (category {self.case.category}), "
                          f"got {got} (judge {verdict.judge}: {verdict.reason})"),
            f"prompt:   {self._prompt()}",
            f"response: {terminal_text(state.answer.excerpt) or '(empty)'}",
            *self._samples_line(state),
            f"gate:     {terminal_text(state.reason)}",
        ])

    def _samples_line(self, state: ItemState) -> list[str]:
        result = state.result
        if result.refusals is None:
            return []
        return [f"samples:  {times(result.refusals, result.answered)}"]

    def _prompt(self) -> str:
        """The prompt, after its conversation's earlier turns (each cut short), on one line."""
        return shown_turns(self.case.history, self.case.prompt, PROMPT_CHARS)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        domain = f"orbench: {self.case.suite}/{self.case.case_id}"
        if self.disputed:
            # A skip mark's report names the skip's place as given here, with a line: the
            # node id's file part, so a ready suite's shows no install path.
            return self.nodeid.partition("::")[0], 0, domain
        return self.path, None, domain


def _shown_outcome(outcome: Outcome, runxfail: bool) -> Outcome:
    """The outcome an item reports. With --runxfail, pytest reports an xfail-marked test's real
    outcome; a tolerated item's real outcome is its mismatch (failed), an error-tolerated
    item's its missing answer (error). The gate and the results file keep the tolerance."""
    if runxfail and outcome is Outcome.TOLERATED:
        return Outcome.FAILED
    if runxfail and outcome is Outcome.ERROR_TOLERATED:
        return Outcome.ERROR
    return outcome
