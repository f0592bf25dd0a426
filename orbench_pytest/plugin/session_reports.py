"""SessionReports: the session's companion plugin for what pytest reports of a run
(registered beside it by `session.register_session`): prompt items' reports kept out of the
terminal's stats, the gate in the terminal summary, and at the end the exit status, the
results file and the JUnit properties.
"""

from __future__ import annotations

from typing import Any

import pytest

from orbench_pytest.core.untrusted import terminal_line
from orbench_pytest.plugin.stash import RunSource


class SessionReports:
    def __init__(self, session: RunSource) -> None:
        self.session = session
        self.config = session.config

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Keep our items' passed setup/teardown reports out of the terminal's stats[""].

        For every failure, pytest's summary scans all of stats[""] for that test's teardown
        sections (pytest-dev/pytest#13360): O(failures × items), hours at 80K prompts with half
        failing (measured by benchmarks/failing_80k.py, in git at cc4ddca). A prompt item
        writes no teardown output, so nothing is lost by not keeping them (trylast: the
        terminal reporter has just appended this report). This is the only change made to the
        terminal reporter's stats.
        """
        if report.when == "call" or not report.passed or not self.session.is_prompt(
                report.nodeid):
            return
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        kept = getattr(reporter, "stats", {}).get("")
        if kept and kept[-1] is report:
            kept.pop()

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.session.ended is not None:
            write_lines(self.config, self.session.ended.lines)
        if self.session.run is not None and not self.session.is_worker:
            from orbench_pytest.plugin.reporting import write_gate

            write_gate(terminalreporter, self.session.run)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Controller only: the results file and JUnit properties (tryfirst: before junitxml
        writes its file)."""
        if self.session.ended is not None:
            session.exitstatus = self.session.ended.returncode
        self._finish_empty_shard(session)
        run = self.session.run
        if run is not None and not self.session.is_worker:
            from orbench_pytest.plugin.reporting import write_results_and_junit

            if (not run.outcome.gate.passed and run.ungated is None
                    and session.exitstatus in (pytest.ExitCode.OK,
                                               pytest.ExitCode.NO_TESTS_COLLECTED)):
                session.exitstatus = pytest.ExitCode.TESTS_FAILED  # the gate decides the status

            write_results_and_junit(self.config, run)

    def _finish_empty_shard(self, session: pytest.Session) -> None:
        """A shard that holds none of the run's prompts (7/1000 of 200 prompts) is a success
        with its own line, not pytest's "no tests ran" (exit 5, a failed CI matrix job)."""
        shard = self.session.settings.scope.shard
        if shard is None or session.exitstatus != pytest.ExitCode.NO_TESTS_COLLECTED:
            return
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        deselected = len(reporter.stats.get("deselected", ())) if reporter is not None else 0
        # The xdist controller collects nothing itself: the workers deselected every prompt.
        controller = not self.session.is_worker and self.session.collected is None
        if not (self.session.empty_shard or (controller and deselected)):
            return
        session.exitstatus = pytest.ExitCode.OK
        if reporter is not None:
            reporter.write_line(f"orbench: shard {shard} holds no prompt of this run "
                                f"(each prompt belongs to one of {shard.count} shards); "
                                "nothing to ask")


def write_lines(config: pytest.Config, lines: list[str]) -> None:
    """Lines that may quote a file's or a server's text, shown inert."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        for line in lines:
            reporter.write_line(terminal_line(line))
