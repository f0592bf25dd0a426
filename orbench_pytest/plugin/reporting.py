"""Reports of a finished run: the gate block in the terminal, the results file, and the gate as
JUnit testsuite properties (both built from one results document)."""

from __future__ import annotations

from typing import Any

import pytest

from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.ids import key_label
from orbench_pytest.core.untrusted import terminal_line
from orbench_pytest.reports.summary import (
    baseline_lines,
    cache_line,
    flaky_lines,
    judge_lines,
    judged_line,
    table_lines,
    variant_lines,
    verdict_line,
)
from orbench_pytest.run.session_run import CompletedRun


def write_gate(terminalreporter: Any, run: CompletedRun) -> None:
    outcome, settings = run.outcome, run.settings
    gate, report, verdicts = outcome.gate, outcome.report, outcome.verdicts

    def write(line: str, **markup: bool) -> None:
        # Category names, thresholds keys and endpoint reasons come from outside.
        terminalreporter.write_line(terminal_line(line), **markup)

    terminalreporter.write_sep("=", "orbench gate")
    write(f"target: {outcome.target_label}   judge: {settings.judge.name}   "
          f"thresholds: {run.thresholds.source}")
    if not run.selected:  # every prompt disputed or deselected: nothing was asked or judged
        write(verdict_line(gate), green=gate.passed, red=not gate.passed, bold=True)
        if settings.reports.results is not None:
            write(f"orbench results: {settings.reports.results}")
        return
    for line in table_lines(gate):
        write(line)
    if outcome.calibration is not None:
        write(outcome.calibration.line())
    if run.rewordings is not None:
        from orbench_pytest.reports.rewordings import terminal_lines

        for line in terminal_lines(run.rewordings, gate):
            write(line)
    concurrency = ""
    if report.requests:  # how far the adaptive limit went, and how often the endpoint cut it
        cuts = report.concurrency_cuts
        concurrency = (f", concurrency: peak {report.concurrency_peak}"
                       f"{f' (cut {cuts}× by 429 / 5xx)' if cuts else ''}")
    errors = len(verdicts.errors)  # prompts without an answer (an endpoint error, never sent)
    write(f"answers: {len(verdicts.answers) - errors} ({report.cache_hits} from cache), "
          f"{f'errors: {errors}, ' if errors else ''}"
          f"requests: {report.requests}, retries: {report.retries}, "
          f"fetch time: {report.wall_s:.1f}s{concurrency}")
    write(run.cost.line())
    for optional in (cache_line(report, verdicts, settings.cache.max_age_s),
                     judged_line(verdicts)):
        if optional is not None:
            write(optional)
    if report.retry_reasons:  # what the endpoint did wrong, for the CI log
        write("failed attempts: " + ", ".join(
            f"{kind} ×{count}" for kind, count in sorted(report.retry_reasons.items())))
    for line in judge_lines(outcome.judge_stats, settings.judge.name == "llm"):
        write(line)
    for line in variant_lines(gate):
        write(line)
    states = outcome.states  # only a flaky prompt is named: no label for the others
    flaky = [(key_label((s.case.suite, s.variant.name, s.case.case_id)), state.result)
             for s in run.selected
             if (state := states.get(s.nodeid)) is not None and state.result.flaky]
    for line in flaky_lines(flaky, gate):
        write(line)
    if outcome.comparison is not None:
        for line in baseline_lines(outcome.comparison, gate):
            write(line)
    if run.ungated is not None:
        write(run.ungated.gate_line(), bold=True)
    else:
        write(verdict_line(gate, settings.target.preamble), green=gate.passed, red=not gate.passed,
              bold=True)
    if settings.judge.check is not None:
        from orbench_pytest.judges.check import check_labels, summary_line

        try:
            write(summary_line(check_labels(settings.judge.check,
                                            settings.judge.partial_is_refusal)))
        except ConfigError as exc:
            write(f"judge check: {exc}")
    if settings.reports.results is not None:
        write(f"orbench results: {settings.reports.results}")
    if settings.reports.html is not None:
        write(f"orbench html: {settings.reports.html}")


def write_results_and_junit(config: pytest.Config, run: CompletedRun) -> None:
    """The results file (--orbench-results) and the JUnit testsuite properties."""
    settings = run.settings
    junit = [plugin for plugin in config.pluginmanager.get_plugins()
             # junitxml's LogXML (registered without a name): duck-typed, no private import.
             if type(plugin).__name__ == "LogXML" and hasattr(plugin, "add_global_property")]
    if settings.reports.results is None and settings.reports.html is None and not junit:
        return  # the results document's modules are not even loaded
    from orbench_pytest.reports.junit import junit_gate_property
    from orbench_pytest.reports.results import write_results
    from orbench_pytest.run.run_document import run_document

    data = run_document(run, versions={"pytest": pytest.__version__})
    if settings.reports.results is not None:
        try:
            write_results(settings.reports.results, data)
        except OSError as exc:
            raise pytest.UsageError(f"--orbench-results: cannot write "
                                    f"{settings.reports.results} ({exc.strerror})") from None
        except ConfigError as exc:  # the path became a device or folder meanwhile
            raise pytest.UsageError(str(exc)) from None
    if settings.reports.html is not None:
        from orbench_pytest.reports.document import RunRecord
        from orbench_pytest.reports.html import write_html
        from orbench_pytest.reports.results import read_without_texts

        try:
            # The baseline's answers are shown beside regressions and fixes.
            baseline, base_texts = (read_without_texts(settings.gate.baseline)
                                    if settings.gate.baseline is not None else (None, None))
            write_html(settings.reports.html,
                       RunRecord(str(settings.reports.results or settings.reports.html), data),
                       baseline, "--orbench-html", baseline_texts=base_texts)
        except ConfigError as exc:
            raise pytest.UsageError(str(exc)) from None
    for plugin in junit:
        for name, value in junit_gate_property(data):
            plugin.add_global_property(name, value)
