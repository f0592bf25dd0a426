"""A pytest session's run, without pytest: once, when the collected selection is final.

`run_collected` settles the run's effective settings (a suite's judge) once, checks the
selection against the thresholds, plans the requests once, serves the Batch API steps, fetches
and judges through the runner, and returns everything reports need, each computed once
(`CompletedRun`: the baseline comparison, the cost). Also the session's lookups of thresholds,
disputes, baseline and how much of each suite the gate covers.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orbench_pytest.catalog.collection import SuiteCatalog
from orbench_pytest.config.model_choice import choose_model
from orbench_pytest.config.settings import Settings
from orbench_pytest.core import defaults
from orbench_pytest.core.bounded import regular_file
from orbench_pytest.core.errors import BatchEnded, ConfigError
from orbench_pytest.core.paths import resolved
from orbench_pytest.core.types import Response
from orbench_pytest.core.untrusted import terminal_line
from orbench_pytest.fetch.cache import ResponseCache
from orbench_pytest.fetch.costs import Spending
from orbench_pytest.fetch.engine import FetchReport
from orbench_pytest.fetch.progress import ProgressLine
from orbench_pytest.gate.baseline import Baseline
from orbench_pytest.gate.disputed import Disputes
from orbench_pytest.gate.scope import Scope, Ungated, scope_of
from orbench_pytest.gate.thresholds import (
    BUILT_IN,
    Thresholds,
    built_in_line,
    check_gated_categories,
    check_gated_suites,
)
from orbench_pytest.reports.cost import Prices, RunCost
from orbench_pytest.run.runner import (
    JobPlan,
    RunOutcome,
    Selected,
    check_judge_settings,
    plan_jobs,
    run_selected,
)

if TYPE_CHECKING:  # a run without --orbench-rewordings never loads the search
    from orbench_pytest.reports.document import Rewordings
    from orbench_pytest.run.rewording_search import SearchOutcome


@dataclass(frozen=True)
class CompletedRun:
    """A finished run with what the reports need: settings, thresholds, selection."""

    settings: Settings  # as the run used them (the suite's judge applied)
    thresholds: Thresholds
    selected: list[Selected]
    outcome: RunOutcome
    started: datetime
    cost: RunCost  # the fetch's requests and the rewordings search's
    ungated: Ungated | None = None  # why the gate does not decide this run (a shard alone)
    rewordings: Rewordings | None = None  # --orbench-rewordings: the fragile prompts found


def effective_settings(settings: Settings, catalog: SuiteCatalog,
                       selected: list[Selected]) -> Settings:
    """A suite's `judge:` applies unless --orbench-judge was given; one judge per run."""
    if settings.judge.given:
        return settings
    names = {s.case.suite for s in selected}
    wanted = {suite.name: suite.judge for suite in catalog.suites
              if suite.name in names and suite.judge}
    judges = set(wanted.values())
    if len(judges) > 1:
        listed = ", ".join(f"{name}: {judge}" for name, judge in sorted(wanted.items()))
        raise ConfigError(f"the suites ask for different judges ({listed}); run them "
                          "apart or choose one with --orbench-judge")
    if not judges:
        return settings
    return dataclasses.replace(settings,
                               judge=dataclasses.replace(settings.judge, name=judges.pop()))


def check_categories(settings: Settings, catalog: SuiteCatalog, seen: set[str]) -> None:
    """A mistyped --orbench-category selects nothing: say so, not "no tests ran"."""
    known = catalog.known_categories()
    missing = [c for c in settings.scope.categories if c not in seen]
    if known and missing:
        raise ConfigError(f"--orbench-category: {', '.join(missing)} matches no prompt "
                          f"(categories: {', '.join(known)})")


def check_selection(settings: Settings, thresholds: Thresholds, catalog: SuiteCatalog,
                    selected: list[Selected]) -> None:
    from orbench_pytest.catalog.ready import ready_suite_names

    suites_run = {s.case.suite for s in selected}
    check_gated_suites(thresholds, suites_run | {suite.name for suite in catalog.suites},
                       ready_suite_names())
    check_gated_categories(thresholds, {suite.name: suite.categories for suite in catalog.suites
                                        if suite.name in suites_run})
    if settings.scope.categories and selected:  # else the session checked them on what it held
        check_categories(settings, catalog, seen={s.case.category for s in selected})


def check_request_bound(selected: list[Selected], settings: Settings) -> None:
    """Prompts × samples is bounded (defaults.MAX_REQUESTS), before anything is planned."""
    total = len(selected) * settings.scope.samples
    if total > defaults.MAX_REQUESTS:
        raise ConfigError(f"--orbench-samples={settings.scope.samples}: {len(selected):,} "
                          "prompts × "
                          f"{settings.scope.samples} samples = {total:,} requests, more than the "
                          f"{defaults.MAX_REQUESTS:,} a run may ask; lower --orbench-samples or "
                          "select fewer prompts (--orbench-subset, --orbench-shard)")


@dataclass(frozen=True)
class ScopeCounts:
    """How much of each suite a run holds, known before the gate decides (scope.py): (suite,
    whole, present, disputed) per suite, the options that left prompts out, the disputed."""

    counts: list[tuple[str, int, int, int]]
    narrowed_by: list[str]
    require_full: bool = False
    disputed: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)

    def scope(self, thresholds: Thresholds) -> Scope:
        return scope_of(self.counts, thresholds, self.narrowed_by, self.require_full,
                        self.disputed)


def run_collected(selected: list[Selected], settings: Settings, catalog: SuiteCatalog,
                  rootpath: Path, reporter: Any, maxfail: int,
                  counts: ScopeCounts | None = None) -> CompletedRun:
    """Check, fetch and judge `selected`; ConfigError for anything the user must fix. With
    nothing selected (every prompt disputed or deselected) nothing is asked, and the gate is
    still decided over `counts`."""
    started = datetime.now(timezone.utc)
    thresholds = gate_thresholds(settings.gate.thresholds, rootpath)
    check_selection(settings, thresholds, catalog, selected)
    check_request_bound(selected, settings)
    settings = effective_settings(settings, catalog, selected)
    scope = (counts or ScopeCounts([], [])).scope(thresholds)
    if not selected:
        if settings.reports.results is not None:
            from orbench_pytest.reports.results import check_writable

            check_writable(settings.reports.results)
        outcome = run_selected(selected, settings, thresholds, cache=None, scope=scope)
        return CompletedRun(settings, thresholds, selected, outcome, started,
                            run_cost(outcome.report, settings))
    settings, chosen = choose_model(settings)
    if settings.cache.print_key:
        from orbench_pytest.run.runner import answers_key

        raise BatchEnded([f"orbench cache key: {answers_key(selected, settings)}"])
    if settings.batch.export is not None:
        raise batch_export(selected, settings)
    check_judge_settings(settings)  # the target's key: only if something is to be asked
    for path, option in ((settings.reports.results, "--orbench-results"),
                         (settings.reports.html, "--orbench-html")):
        if path is not None:
            from orbench_pytest.reports.results import check_writable

            check_writable(path, option)
    baseline = load_baseline(settings.gate.baseline, rootpath)
    progress = ProgressLine.for_reporter(reporter)
    if reporter is not None:
        if thresholds is BUILT_IN:
            reporter.write_line(built_in_line())
        if chosen is not None:
            reporter.write_line(terminal_line(chosen))
        reporter.write_sep("-", f"orbench: fetch and judge {len(selected)} prompts")
    cache = (None if settings.cache.mode == "off"
             else ResponseCache(settings.cache.path, writable=settings.cache.mode != "read",
                                lock_wait_s=settings.cache.lock_wait_s))
    ungated = (Ungated(str(settings.scope.shard))
               if settings.scope.shard is not None and not settings.gate.shard_gate else None)
    plan = plan_jobs(selected, settings)
    try:
        given = batch_answers(plan, settings, cache, reporter)
        outcome = run_selected(selected, settings, thresholds, cache=cache, progress=progress,
                               max_mismatches=(maxfail if settings.gate.strict else 0) or None,
                               baseline=baseline, given=given, ungated=ungated, scope=scope,
                               plan=plan)
    finally:
        if cache is not None:
            cache.close()
        if progress is not None and progress.rewrites:
            reporter.write_line("")
    if cache is not None and cache.ignored_rows and reporter is not None:
        reporter.write_line(terminal_line(
            f"orbench: {settings.cache.path}: {cache.ignored_rows} cached rows of wrong types "
            "(edited or crafted) ignored; their prompts were asked again"))
    search = None
    if settings.scope.rewordings is not None and outcome.report.stopped_reason is None:
        from orbench_pytest.run.rewording_search import progress_lines, run_search

        search = run_search(
            selected, outcome, settings, thresholds,
            reporter.write_line if reporter is not None else None,
            progress_lines(reporter))
    return CompletedRun(settings, thresholds, selected, outcome, started,
                        run_cost(outcome.report, settings, search), ungated,
                        search.record() if search is not None else None)


def run_cost(report: FetchReport, settings: Settings,
             search: SearchOutcome | None = None) -> RunCost:
    """What the run cost: the tokens of the answers it asked, its requests by kind (the
    suites' prompts, the LLM judge's, the backend check and the rewordings search's), retries
    and time, and with prices given, dollars."""
    spent, retries, wall_s = Spending(), report.retries, report.wall_s
    spent.add(report.spent)
    if search is not None:
        spent.add(search.spent)
        retries, wall_s = retries + search.retries, wall_s + search.wall_s
    prices = Prices(settings.reports.price_input, settings.reports.price_output)
    return RunCost.of(spent, retries, wall_s, prices, cached=report.cache_hits)


def batch_export(selected: list[Selected], settings: Settings) -> Exception:
    """--orbench-batch-export: the requests the cache lacks, written; the run ends there."""
    from orbench_pytest.run.batch_steps import export

    cache = (None if settings.cache.mode in ("off", "refresh")
             else ResponseCache(settings.cache.path, writable=False,
                                lock_wait_s=settings.cache.lock_wait_s))
    try:
        return export(selected, settings, cache)
    finally:
        if cache is not None:
            cache.close()


def batch_answers(plan: JobPlan, settings: Settings, cache: ResponseCache | None,
                  reporter: Any) -> dict[str, Response]:
    """Answers from Batch API output files and a submitted batch, before the fetch phase."""
    if not settings.batch.imports and settings.batch.mode is None:
        return {}
    from orbench_pytest.run.batch_steps import import_files, submit_or_status

    def write(line: str) -> None:
        if reporter is not None:
            reporter.write_line(line)

    given: dict[str, Response] = {}
    if settings.batch.imports:
        imported = import_files(settings.batch.imports, plan, cache)
        for line in imported.lines:
            write(line)
        given.update(imported.responses)
    if settings.batch.mode is not None:
        fetched = submit_or_status(plan, settings, cache, write)
        for line in fetched.lines:
            write(line)
        for key, response in fetched.responses.items():
            if key not in given or given[key].error is not None:
                given[key] = response
    return given


def coverage(present_in_run: list[Selected], gated: list[Selected], catalog: SuiteCatalog,
             variants: int) -> list[tuple[str, int, int, int]]:
    """(suite, whole, present, disputed) of each suite of the run. `present_in_run`: every
    prompt item left in the run, the disputed among them (a disputed prompt is counted apart,
    not as left out); `gated`: those the gate counts. A suite's whole is its prompts as defined
    (its own sample) times the variants."""
    present = Counter(s.case.suite for s in present_in_run)
    counted = Counter(s.case.suite for s in gated)
    return [(suite.name, suite.full_size * variants, present[suite.name],
             present[suite.name] - counted[suite.name]) for suite in catalog.suites]


def load_disputes(thresholds_path: Path | None, rootpath: Path,
                  suite_folders: Iterable[Path] = ()) -> Disputes:
    """The `disputed:` section of the thresholds file, a disputed.yaml beside it (or in the
    rootdir without a thresholds file), and a disputed.yaml in the folder of a suite of the
    run (`orbench generate --rebuild` writes the review's there). The project's files win."""
    from orbench_pytest.gate.disputed import DISPUTED_FILE, load_disputed_file, merged
    from orbench_pytest.gate.thresholds import load_thresholds

    path = thresholds_path if thresholds_path is not None else rootpath / "thresholds.yaml"
    beside = path.parent / DISPUTED_FILE
    parts = [load_disputed_file(found, _shown(found, rootpath), beside_suite=True)
             for found in dict.fromkeys(folder / DISPUTED_FILE for folder in suite_folders)
             if regular_file(found, "disputed file") and resolved(found) != resolved(beside)]
    if regular_file(path, "thresholds file"):
        parts.append(load_thresholds(path, _shown(path, rootpath)).disputed)
    if regular_file(beside, "disputed file"):
        parts.append(load_disputed_file(beside, _shown(beside, rootpath)))
    return merged(*parts)


def check_disputes(disputes: Disputes, catalog: SuiteCatalog) -> None:
    """Every suite a dispute names is a suite of this run or a ready suite, a disputed.yaml
    beside a suite disputes a suite of this run, and every disputed id is a prompt's."""
    from orbench_pytest.catalog.ready import ready_suite_names
    from orbench_pytest.gate.thresholds import check_disputed_prompts, check_disputed_suites

    prompt_ids = catalog.prompt_ids()
    check_disputed_suites(disputes, prompt_ids, ready_suite_names())
    check_disputed_prompts(disputes, prompt_ids)


def gate_thresholds(path: Path | None, rootpath: Path) -> Thresholds:
    """--orbench-thresholds, else thresholds.yaml in the rootdir, else the built-in ones."""
    from orbench_pytest.gate.thresholds import load_thresholds

    if path is None:
        path = rootpath / "thresholds.yaml"
        if regular_file(path, "thresholds file") is None:
            return BUILT_IN
    return load_thresholds(path, _shown(path, rootpath))


def load_baseline(path: Path | None, rootpath: Path) -> Baseline | None:
    if path is None:
        return None
    from orbench_pytest.reports.results import load_run

    snapshot = load_run(path).to_baseline()
    return Baseline(_shown(path, rootpath), snapshot.mismatches, snapshot.rates,
                    snapshot.group_rates)


def _shown(path: Path, rootpath: Path) -> str:
    """A file as reports name it: relative to the rootdir when inside it."""
    try:
        return str(resolved(path).relative_to(rootpath.resolve()))
    except ValueError:
        return str(path)
