"""OrbenchSession: the one plugin object per pytest process (kept in config.stash).

It loads suites for collection, runs the fetch-and-judge phase once the selection is final
(in the controller under xdist), hands every item its state, and prints the gate.
"""

from __future__ import annotations

import dataclasses
import tempfile
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .baseline import Baseline
from .cache import ResponseCache
from .errors import ConfigError
from .progress import ProgressLine
from .runner import ItemState, RunOutcome, Selected, check_target_settings, run_selected
from .settings import Settings
from .suites import Suite, SuiteOptions, is_suite_document, load_suite, read_suite_document
from .summary import (
    baseline_lines,
    cache_line,
    judge_lines,
    table_lines,
    variant_lines,
    verdict_line,
)
from .thresholds import BUILT_IN, Thresholds, load_thresholds

if TYPE_CHECKING:
    from .items import PromptItem

PLUGIN_KEY = pytest.StashKey["OrbenchSession"]()
READY_SUITES = Path(__file__).resolve().parent.parent / "suites"

__all__ = ["PLUGIN_KEY", "ItemState", "OrbenchSession", "load_configured_thresholds"]


def load_configured_thresholds(settings: Settings, rootpath: Path) -> Thresholds:
    path = settings.thresholds or rootpath / "thresholds.yaml"
    if settings.thresholds is None and not path.is_file():
        return BUILT_IN
    try:
        shown = str(path.resolve().relative_to(rootpath.resolve()))
    except ValueError:
        shown = str(path)
    return load_thresholds(path, shown)


class OrbenchSession:
    def __init__(self, config: pytest.Config, settings: Settings, thresholds: Thresholds) -> None:
        self.config = config
        self.settings = settings
        self.thresholds = thresholds
        workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
        self.is_worker = workerinput is not None
        self.run_id: str = (workerinput or {}).get("orbench_run") or uuid.uuid4().hex
        self._worker_cache_path = (workerinput or {}).get("orbench_cache_path")
        self._explicit = self._explicit_paths(config)
        self._suites: dict[Path, Suite | None] = {}
        self._tmpdir: tempfile.TemporaryDirectory[str] | None = None
        self._cache: ResponseCache | None = None
        self.outcome: RunOutcome | None = None
        self._states: dict[str, ItemState] = {}
        self._selected: list[Selected] = []
        self._started = datetime.now(timezone.utc)
        self._baseline: Baseline | None = None

    # --- collection -------------------------------------------------------------------
    @staticmethod
    def _explicit_paths(config: pytest.Config) -> set[Path]:
        here = config.invocation_params.dir
        return {(here / arg.split("::")[0]).resolve() for arg in config.args}

    def is_suite_candidate(self, path: Path) -> bool:
        return path.parent.name == "suites" or path.resolve() in self._explicit

    def load_suite(self, path: Path) -> Suite:
        """Parse a suite file once per process; an empty Suite for other YAML in suites/."""
        key = path.resolve()
        if key not in self._suites:
            data = read_suite_document(path)
            if not is_suite_document(data):
                if key in self._explicit:
                    raise ConfigError(f"{path}: not a suite file (needs name, and prompts or "
                                      "source)")
                self._suites[key] = None
            else:
                options = SuiteOptions(sample=self.settings.sample, seed=self.settings.seed,
                                       categories=self.settings.categories,
                                       data_dir=self.settings.data_dir,
                                       ready_suite_dir=READY_SUITES)
                self._suites[key] = load_suite(path, options, data)
        suite = self._suites[key]
        return suite if suite is not None else Suite(name="", path=path)

    # --- the fetch-and-judge phase ------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        if session.config.option.collectonly or self.is_worker:
            return
        from .items import PromptItem

        items = [item for item in session.items if isinstance(item, PromptItem)]
        if items:
            self._run([Selected(i.nodeid, i.case, i.variant) for i in items])
        elif self.settings.categories:
            try:
                self._check_categories(seen=set(self._known_categories()))
            except ConfigError as exc:
                raise pytest.UsageError(str(exc)) from None

    def _known_categories(self) -> list[str]:
        return sorted({c for suite in self._suites.values() if suite for c in suite.categories})

    def _check_categories(self, seen: set[str]) -> None:
        """A mistyped --orbench-category selects nothing: say so, not "no tests ran"."""
        known = self._known_categories()
        missing = [c for c in self.settings.categories if c not in seen]
        if known and missing:
            raise ConfigError(f"--orbench-category: {', '.join(missing)} matches no prompt "
                              f"(categories: {', '.join(known)})")

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """xdist controller → workers: the run id and the cache file they read verdicts from."""
        node.workerinput["orbench_run"] = self.run_id
        node.workerinput["orbench_cache_path"] = str(self._cache_path())

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        """xdist controller: fires before any test is scheduled, so fetch once, here."""
        if self.outcome is not None:
            return
        selected = self._selected_from_ids(ids)
        if not selected:
            return
        try:
            self._run(selected, publish_errors=True)
        except pytest.UsageError as exc:
            pytest.exit(f"ERROR: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)

    def _selected_from_ids(self, ids: list[str]) -> list[Selected]:
        from .ids import item_name

        wanted = set(ids)
        selected = []
        for path_part in dict.fromkeys(nodeid.split("::")[0] for nodeid in ids):
            path = self.config.rootpath / path_part
            if path.suffix not in (".yaml", ".yml"):
                continue
            try:
                suite = self.load_suite(path)
            except ConfigError:
                continue  # the workers report the collection error
            for case in suite.cases:
                for variant in self.settings.variants:
                    nodeid = f"{path_part}::{item_name(suite.name, case.case_id, variant.name)}"
                    if nodeid in wanted:
                        selected.append(Selected(nodeid, case, variant))
        return selected

    def _run(self, selected: list[Selected], publish_errors: bool = False) -> None:
        try:
            self._check_selection(selected)
            check_target_settings(self.settings)
            if self.settings.results is not None:
                from .results import check_writable

                check_writable(self.settings.results)
            cache = self._open_cache()
            reporter = self.config.pluginmanager.get_plugin("terminalreporter")
            progress = self._progress(reporter)
            if reporter is not None:
                reporter.write_sep("-", f"orbench: fetch and judge {len(selected)} prompts")
            maxfail = self.config.option.maxfail if self.settings.strict else 0
            self.settings = self._with_suite_judge(selected)
            self.outcome = run_selected(selected, self.settings, self.thresholds, cache=cache,
                                        progress=progress, max_mismatches=maxfail or None,
                                        baseline=self._load_baseline())
            self._selected = selected
        except ConfigError as exc:
            raise pytest.UsageError(str(exc)) from None
        if reporter is not None and progress is not None and self._is_tty(reporter):
            reporter.write_line("")
        self._states = self.outcome.states
        if publish_errors and cache is not None:
            report = self.outcome.report
            cache.put_run_errors(self.run_id, report.errors, report.stopped_reason)

    def _with_suite_judge(self, selected: list[Selected]) -> Settings:
        """A suite's `judge:` applies unless --orbench-judge was given; one judge per run."""
        if self.settings.judge_given:
            return self.settings
        names = {s.case.suite for s in selected}
        wanted = {suite.name: suite.judge for suite in self._suites.values()
                  if suite is not None and suite.name in names and suite.judge}
        judges = set(wanted.values())
        if len(judges) > 1:
            listed = ", ".join(f"{name}: {judge}" for name, judge in sorted(wanted.items()))
            raise ConfigError(f"the suites ask for different judges ({listed}); run them "
                              "apart or choose one with --orbench-judge")
        if not judges:
            return self.settings
        return dataclasses.replace(self.settings, judge=judges.pop())

    def _check_selection(self, selected: list[Selected]) -> None:
        suites_run = {s.case.suite for s in selected}
        not_run = [name for name in self.thresholds.suites if name not in suites_run]
        # Reading every sibling suite file costs ~0.1 s: only when thresholds name one not run.
        known = set(suites_run) | (self._sibling_suite_names() if not_run else set())
        for name in not_run:
            if name not in known:
                raise ConfigError(f"{self.thresholds.source}: suites.{name}: no such suite "
                                  f"(known: {', '.join(sorted(known))})")
        if self.settings.categories:
            self._check_categories(seen={s.case.category for s in selected})

    def _sibling_suite_names(self) -> set[str]:
        """Suites beside the ones run: thresholds may name them without running them."""
        names: set[str] = set()
        folders = {path.parent for path in self._suites} | {READY_SUITES}
        for folder in folders:
            for path in sorted(folder.glob("*.y*ml")):
                try:
                    data = read_suite_document(path)
                except ConfigError:
                    continue
                if is_suite_document(data) and isinstance(data.get("name"), str):
                    names.add(data["name"])
        return names

    def _cache_path(self) -> Path:
        if self.settings.cache_mode == "off":
            # xdist workers still need a file to read verdicts from: a private one.
            if self._tmpdir is None:
                self._tmpdir = tempfile.TemporaryDirectory(prefix="orbench-")
            return Path(self._tmpdir.name) / "run.sqlite3"
        return self.settings.cache_path

    def _open_cache(self) -> ResponseCache | None:
        if self._cache is None:
            if self.is_worker:
                self._cache = ResponseCache(Path(self._worker_cache_path), writable=False)
            elif self.settings.cache_mode == "off" and not self._under_xdist():
                return None
            else:
                self._cache = ResponseCache(self._cache_path(),
                                            writable=self.settings.cache_mode != "read")
        return self._cache

    def _under_xdist(self) -> bool:
        return self.config.pluginmanager.has_plugin("dsession")

    def _progress(self, reporter: Any) -> ProgressLine | None:
        if reporter is None or (self.config.option.verbose < 0 and not self._is_tty(reporter)):
            return None

        def write(text: str, rewrite: bool) -> None:
            if rewrite:
                reporter.rewrite(text, erase=True)
            else:
                reporter.write_line(text)

        return ProgressLine(write, self._is_tty(reporter))

    @staticmethod
    def _is_tty(reporter: Any) -> bool:
        return bool(getattr(reporter, "isatty", False))

    # --- items ----------------------------------------------------------------------------
    def item_state(self, item: PromptItem) -> ItemState:
        state = self._states.get(item.nodeid)
        if state is None and self.is_worker and self.outcome is None:
            self._replay(item.session)
            state = self._states.get(item.nodeid)
        if state is None:
            raise ConfigError(f"{item.nodeid}: no verdict (the fetch phase did not run)")
        return state

    def _replay(self, session: pytest.Session) -> None:
        """xdist worker: the same verdicts and gate as the controller, read from the cache."""
        from .items import PromptItem

        selected = [Selected(i.nodeid, i.case, i.variant) for i in session.items
                    if isinstance(i, PromptItem)]
        self.settings = self._with_suite_judge(selected)
        self.outcome = run_selected(selected, self.settings, self.thresholds,
                                    cache=self._open_cache(), replay_run=self.run_id,
                                    baseline=self._load_baseline())
        self._states = self.outcome.states

    def _load_baseline(self) -> Baseline | None:
        if self.settings.baseline is None:
            return None
        if self._baseline is None:
            from .results import load_run

            path = self.settings.baseline
            try:
                shown = str(path.resolve().relative_to(self.config.rootpath.resolve()))
            except ValueError:
                shown = str(path)
            snapshot = load_run(path).to_baseline()
            self._baseline = Baseline(shown, snapshot.mismatches)
        return self._baseline

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """Reports need the prompt of a mismatch (JUnit property); passing items stay lean."""
        state = getattr(item, "state", None)
        if isinstance(state, ItemState) and state.result.mismatch:
            case = item.case  # type: ignore[attr-defined]
            item.user_properties.append(("prompt", " ".join(case.prompt.split())[:300]))

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Keep our items' passed setup/teardown reports out of the terminal's stats[""].

        For every failure, pytest's summary scans all of stats[""] for that test's teardown
        sections (pytest-dev/pytest#13360): O(failures × items), hours at 80K prompts with half
        failing. A prompt item writes no teardown output, so nothing is lost by not keeping
        them (trylast: the terminal reporter has just appended this report).
        """
        if report.when == "call" or not report.passed or report.nodeid not in self._states:
            return
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        kept = getattr(reporter, "stats", {}).get("")
        if kept and kept[-1] is report:
            kept.pop()

    # --- report ---------------------------------------------------------------------------
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.outcome is None or self.is_worker:
            return
        gate = self.outcome.gate
        report = self.outcome.report
        write = terminalreporter.write_line
        terminalreporter.write_sep("=", "orbench gate")
        write(f"target: {self.outcome.target_label}   judge: {self.settings.judge}   "
              f"thresholds: {self.thresholds.source}")
        for line in table_lines(gate):
            write(line)
        write(f"answers: {len(report.answers)} ({report.cache_hits} from cache), "
              f"requests: {report.requests}, retries: {report.retries}, "
              f"fetch time: {report.wall_s:.1f}s")
        cache_summary = cache_line(report, self.settings.cache_max_age_s)
        if cache_summary is not None:
            write(cache_summary)
        if report.retry_reasons:  # what the endpoint did wrong, for the CI log
            write("failed attempts: " + ", ".join(
                f"{kind} ×{count}" for kind, count in sorted(report.retry_reasons.items())))
        for line in judge_lines(self.outcome.judge_stats, self.settings.judge == "llm"):
            write(line)
        for line in variant_lines(gate):
            write(line)
        if self.outcome is not None and gate.baseline_source is not None:
            from .results import comparison_of

            comparison = comparison_of(self._selected, self.outcome.states,
                                       gate.baseline_source)
            for line in baseline_lines(comparison, gate):
                write(line)
        line = verdict_line(gate)
        write(line, green=gate.passed, red=not gate.passed, bold=True)
        if self.settings.results is not None and self.outcome is not None:
            write(f"orbench results: {self.settings.results}")

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Controller only: the results file, and the gate as JUnit testsuite properties
        (tryfirst: before junitxml writes its file)."""
        if self.outcome is None or self.is_worker or not self._selected:
            return
        if not self.outcome.gate.passed and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED  # the gate decides the status
        from .junit import junit_gate_property
        from .results import results_from_run, write_results

        data = results_from_run(self.outcome, self._selected, self.settings,
                                self.thresholds.source, self._started,
                                versions={"pytest": pytest.__version__})
        if self.settings.results is not None:
            try:
                write_results(self.settings.results, data)
            except OSError as exc:
                raise pytest.UsageError(f"--orbench-results: cannot write "
                                        f"{self.settings.results} ({exc.strerror})") from None
        for plugin in self.config.pluginmanager.get_plugins():
            # junitxml's LogXML (registered without a name): duck-typed, no private import.
            if type(plugin).__name__ == "LogXML" and hasattr(plugin, "add_global_property"):
                for name, value in junit_gate_property(data):
                    plugin.add_global_property(name, value)

    def close(self) -> None:
        if self._cache is not None:
            self._cache.close()
            self._cache = None
        if self._tmpdir is not None:
            self._tmpdir.cleanup()
            self._tmpdir = None
