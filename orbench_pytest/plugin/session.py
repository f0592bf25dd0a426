"""OrbenchSession: the one orbench object of a pytest process, registered as a plugin by
`register_session` (from hooks.py's pytest_configure, only in a run that uses orbench).

Its hooks are thin: each hands its job to the module named for it (collection, session_run,
reporting). Two companion plugins, registered with it, hold its other jobs: what pytest
reports of the run (session_reports.py) and the xdist controller's and workers' side
(xdist_hooks.py). This module stays light to import: a pytest run that collects no suite
never loads the run engine, the judges or the YAML parser.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from orbench_pytest.catalog.selection import (
    SuiteRequest,
    is_requested_suite,
    named_suite_files,
    node_path,
    suite_request,
)
from orbench_pytest.config.settings import build_settings
from orbench_pytest.core.errors import BatchEnded, ConfigError
from orbench_pytest.core.ids import ORBENCH_MARKER
from orbench_pytest.core.untrusted import terminal_line
from orbench_pytest.plugin.session_reports import SessionReports
from orbench_pytest.plugin.stash import SESSION_KEY
from orbench_pytest.plugin.xdist_hooks import XdistHooks
from orbench_pytest.run.xdist_handoff import WORKERINPUT_KEY

if TYPE_CHECKING:
    from orbench_pytest.catalog.collection import SuiteCatalog
    from orbench_pytest.config.settings import Settings
    from orbench_pytest.gate.disputed import Disputes
    from orbench_pytest.plugin.items import PromptItem
    from orbench_pytest.run.runner import ItemState, Selected
    from orbench_pytest.run.session_run import CompletedRun

FAILURE_BOUND = "orbench-failure-bound"  # the plugin bounding the failures shown
COMPANIONS = ("orbench-session-reports", "orbench-xdist")  # plugins of the session's other jobs


def register_session(config: pytest.Config, values: dict[str, Any]) -> None:
    """Validate the options (`values`: options.read_options') and register the session. The
    suites named by option are not added to pytest's arguments: the session collects them
    beside whatever those arguments collect (`OrbenchSession.pytest_collection_modifyitems`)."""
    from orbench_pytest.catalog.ready import resolve_suite

    config.addinivalue_line("markers", f"{ORBENCH_MARKER}: a prompt of an orbench suite")
    here = config.invocation_params.dir
    try:
        settings = build_settings(values, invocation_dir=here)
        suite_paths = [resolve_suite(ref, here) for ref in values["orbench_suite"] or ()]
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    typed = config.args_source == pytest.Config.ArgsSource.ARGS
    if typed:
        from orbench_pytest.catalog.ready import ready_suite_dir
        from orbench_pytest.catalog.selection import typed_ready_ids

        config.args[:] = typed_ready_ids(config.args, ready_suite_dir())
    request = suite_request(config.args if typed else (), here, suite_paths)
    if (settings.scope.samples > 1 and settings.target.temperature == 0
            and not hasattr(config, "workerinput")):
        from orbench_pytest.gate.samples import identical_answers_warning

        config.issue_config_time_warning(
            pytest.PytestWarning(identical_answers_warning(settings.scope.samples)), stacklevel=2)
    session = OrbenchSession(config, settings, request)
    config.stash[SESSION_KEY] = session
    config.pluginmanager.register(session, "orbench-session")
    config.pluginmanager.register(SessionReports(session), COMPANIONS[0])
    # Registered last, so pluggy calls its pytest_sessionfinish first, as the session did.
    config.pluginmanager.register(XdistHooks(session), COMPANIONS[1])
    if not session.is_worker:  # a worker's terminal output is not shown
        from orbench_pytest.plugin.failure_bound import FailureBound

        config.pluginmanager.register(
            FailureBound(config, session.is_prompt, settings.reports.results), FAILURE_BOUND)


class OrbenchSession:
    def __init__(self, config: pytest.Config, settings: Settings,
                 request: SuiteRequest) -> None:
        self.config = config
        self.settings = settings
        workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
        self.is_worker = workerinput is not None
        self._states_path: str | None = (workerinput or {}).get(WORKERINPUT_KEY)
        self._request = request
        self._markers: set[str] = set()
        self._catalog: SuiteCatalog | None = None
        self.prompt_item: type[PromptItem] | None = None  # set with the catalog
        self.run: CompletedRun | None = None
        self._states: dict[str, ItemState] | None = None
        self.empty_shard = False  # --orbench-shard=K/N deselected every prompt collected
        self.ended: BatchEnded | None = None  # the run ended after a batch step
        self._disputes: Disputes | None = None
        self._dispute_folders: list[Path] = []  # the suites' folders self._disputes read
        self._walked: set[Path] = set()  # suite files collected by pytest's walk (resolved)
        self._restore_sigint: Callable[[], None] | None = None  # set after a first Ctrl-C
        self._collection_errors = 0  # failed collection reports, the user's own files too

    # --- collection -----------------------------------------------------------------------
    def pytest_collect_file(self, file_path: Path,
                            parent: pytest.Collector) -> pytest.Collector | None:
        if not is_requested_suite(file_path, self._request):
            return None
        self._walked.add(file_path.resolve())
        return suite_file(parent, file_path)

    def suite_markers(self, suite: str) -> list[str]:
        """The markers of a suite's items (registered, so --strict-markers accepts them)."""
        from orbench_pytest.core.ids import suite_marker

        marker = suite_marker(suite)
        if marker not in self._markers:
            self._markers.add(marker)
            self.config.addinivalue_line("markers", f"{marker}: prompts of the orbench suite "
                                                    f"{suite}")
        return [ORBENCH_MARKER, marker]

    def disputes(self) -> Disputes:
        """Disputed prompts (thresholds.yaml's `disputed:`, disputed.yaml beside it or beside
        a suite of the run): collected as skipped with their reason, left out of every rate.
        Read again when a suite from another folder joins the run."""
        folders = sorted({suite.path.resolve().parent for suite in self.catalog().suites})
        if self._disputes is None or folders != self._dispute_folders:
            from orbench_pytest.run.session_run import load_disputes

            self._disputes = load_disputes(self.settings.gate.thresholds, self.config.rootpath,
                                           folders)
            self._dispute_folders = folders
        return self._disputes

    def catalog(self) -> SuiteCatalog:
        if self._catalog is None:
            from orbench_pytest.catalog.collection import SuiteCatalog
            from orbench_pytest.catalog.ready import ready_suite_dir
            from orbench_pytest.catalog.suites import SuiteOptions
            from orbench_pytest.plugin.items import PromptItem

            scope = self.settings.scope
            options = SuiteOptions(subset=scope.subset, seed=scope.random_seed,
                                   categories=scope.categories, data_dirs=scope.data_dirs,
                                   ready_suite_dir=ready_suite_dir())
            self._catalog = SuiteCatalog(options, self._request.files)
            self.prompt_item = PromptItem  # for a hook called thrice per item: no import
        return self._catalog

    @property
    def collected(self) -> SuiteCatalog | None:
        """The catalog, or None where no suite was collected in this process."""
        return self._catalog

    # --- the fetch-and-judge phase --------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool | None:
        """Serial run: fetch and judge once the selection is final, before any item runs.
        After a batch step that ends the run (an export, a status) no item runs: True tells
        pytest the loop is done."""
        if session.config.option.collectonly or self.is_worker or self._catalog is None:
            return None
        self.stop_on_collection_errors()
        from orbench_pytest.plugin.items import PromptItem
        from orbench_pytest.run.runner import Selected

        selected = [Selected(item.nodeid, item.case, item.variant) for item in session.items
                    if isinstance(item, PromptItem)]
        self.start(selected)
        return True if self.ended is not None else None

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        """The suites named by option that the walk did not reach join the items (tryfirst:
        before -k, -m, --deselect, --sw and randomising see the items; --lf and --ff wrap
        every implementation, so they see them too). Then --orbench-shard=K/N: the other
        shards' prompts are deselected, not run."""
        # Each suite file named by --orbench-suite / orbench_suites, once: the walk over
        # pytest's arguments collected those inside them; the others (outside them, the ready
        # suites, a dot folder, an --ignore'd one) are collected here, directly under the
        # session, their collection errors reported as pytest reports any.
        for path in named_suite_files(self._request):
            if path.resolve() not in self._walked:
                self._walked.add(path.resolve())
                items.extend(collect_suite(suite_file(session, path)))
        if self.settings.scope.shard is not None and self._catalog is not None:
            from orbench_pytest.plugin.items import PromptItem

            shard = self.settings.scope.shard
            dropped = [item for item in items if isinstance(item, PromptItem) and not
                       shard.holds((item.case.suite, item.variant.name, item.case.case_id))]
            if dropped:
                config.hook.pytest_deselected(items=dropped)
                gone = {id(item) for item in dropped}
                items[:] = [item for item in items if id(item) not in gone]
                self.empty_shard = not any(isinstance(item, PromptItem) for item in items)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """Counted here, the xdist controller included (it is sent the workers' reports)."""
        if report.failed:
            self._collection_errors += 1

    def stop_on_collection_errors(self) -> None:
        """A collection error anywhere (the user's own tests too): the run is not the one
        meant, so nothing is asked (it would cost money) and no gate is printed, even under
        --continue-on-collection-errors. A broken thresholds or disputed file, which made
        the suites fail to collect, is its own one-line usage error."""
        if not self._collection_errors:
            return
        try:
            self.disputes()
        except ConfigError as exc:
            raise pytest.UsageError(str(exc)) from None
        errors = self._collection_errors
        pytest.exit(f"ERROR: orbench: no endpoint asked and no gate: {errors} collection "
                    f"error{'s' if errors > 1 else ''} (shown above); fix "
                    f"{'them' if errors > 1 else 'it'} and run again",
                    returncode=pytest.ExitCode.INTERRUPTED)

    def start(self, everything: list[Selected]) -> None:
        """Ask and judge the selected prompts (those disputed left out) and decide the gate:
        `run` is set, or `ended` after a batch step."""
        from orbench_pytest.core.ids import key_label
        from orbench_pytest.gate.disputed import skip_reason
        from orbench_pytest.run.session_run import (
            ScopeCounts,
            check_categories,
            check_disputes,
            coverage,
            run_collected,
        )

        if not everything and self.settings.scope.shard is not None:
            return  # a shard holding none of the prompts says so itself (session_reports.py)
        try:
            disputes = self.disputes()
            catalog = self.catalog()
            check_disputes(disputes, catalog)
            disputed = [(s, skip_reason(s.case.suite, s.case.case_id, disputes))
                        for s in everything]
            selected = [s for s, reason in disputed if reason is None]
            if not selected and self.settings.scope.categories:
                check_categories(self.settings, catalog, seen=set(catalog.known_categories()))
            # The gate's scope, decided before the gate and given to it (gate/scope.py).
            counts = ScopeCounts(
                coverage(everything, selected, catalog, len(self.settings.target.variants)),
                _narrowed_by(self.config, self.settings), self.settings.gate.require_full,
                [(key_label((s.case.suite, s.variant.name, s.case.case_id)),
                  disputes[s.case.suite][s.case.case_id].reason,
                  disputes[s.case.suite][s.case.case_id].decided_by)
                 for s, reason in disputed if reason is not None])
            reporter = self.config.pluginmanager.get_plugin("terminalreporter")
            self.run = run_collected(selected, self.settings, catalog, self.config.rootpath,
                                     reporter, self.config.option.maxfail, counts)
        except ConfigError as exc:
            raise pytest.UsageError(str(exc)) from None
        except BatchEnded as ended:  # an export or a batch's status: no item runs, no gate
            self.ended = ended
            return
        self._states = self.run.outcome.states

    def is_prompt(self, nodeid: str) -> bool:
        """An item of a suite this run asked (not the user's own tests)."""
        return self._states is not None and nodeid in self._states

    def item_state(self, nodeid: str) -> ItemState:
        if self._states is None and self._states_path is not None:
            from orbench_pytest.run.xdist_handoff import read_states

            self._states = read_states(Path(self._states_path))
        state = (self._states or {}).get(nodeid)
        if state is None:
            raise ConfigError(f"{nodeid}: no verdict (the fetch phase did not run)")
        return state

    # --- items' reports -------------------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item,
                                  call: pytest.CallInfo[None]) -> pytest.TestReport | None:
        if self.prompt_item is None:  # no suite collected in this process
            return None
        return item.report(call) if isinstance(item, self.prompt_item) else None

    @pytest.hookimpl(tryfirst=True)  # before every plugin's own finishing work
    def pytest_keyboard_interrupt(self) -> None:
        from orbench_pytest.plugin.second_interrupt import stop_at_second_interrupt

        if self._restore_sigint is None:
            self._restore_sigint = stop_at_second_interrupt()

    @pytest.hookimpl(trylast=True)  # after pytest's own collection of unraisable garbage
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        from orbench_pytest.core.redact import forget_secrets

        if self._restore_sigint is not None:
            self._restore_sigint()

        forget_secrets()
        config.pluginmanager.unregister(self)
        for name in (*COMPANIONS, FAILURE_BOUND):
            companion = config.pluginmanager.get_plugin(name)
            if isinstance(companion, XdistHooks):
                companion.close()  # the handoff file, also after an interrupted run
            if companion is not None:
                config.pluginmanager.unregister(companion, name)
        del config.stash[SESSION_KEY]


def _narrowed_by(config: pytest.Config, settings: Settings) -> list[str]:
    """The options that can leave prompts of a suite out of this run, as the gate line names
    them ("gated on 62 of 1,319 prompts (-k)")."""
    option = config.option
    found = [flag for flag, given in (
        ("-k", getattr(option, "keyword", "")), ("-m", getattr(option, "markexpr", "")),
        ("--lf", getattr(option, "lf", False)), ("--deselect", getattr(option, "deselect", None)),
        ("--orbench-category", settings.scope.categories)) if given]
    if settings.scope.subset is not None:
        found.append("--orbench-subset")
    if settings.scope.shard is not None:
        found.append(f"shard {settings.scope.shard}")
    if any("::" in str(arg) for arg in config.args):
        found.append("node ids")
    return found


def collect_suite(node: pytest.Collector) -> list[pytest.Item]:
    """A named suite's items, its collection reported as pytest reports any. Not through
    `session.genitems`: under --lf pytest skips every file whose path holds no last failure,
    and a ready suite's failures are recorded under orbench:<file>, never under its path in
    site-packages, so its failed prompts would not run again."""
    try:
        children = list(node.collect())
        report = pytest.CollectReport(node.nodeid, "passed", None, children)
    except Exception:
        failure = node.repr_failure(pytest.ExceptionInfo.from_current())
        children, report = [], pytest.CollectReport(node.nodeid, "failed", failure, [])
    node.ihook.pytest_collectreport(report=report)
    return [child for child in children if isinstance(child, pytest.Item)]


def suite_file(parent: pytest.Collector, path: Path) -> pytest.Collector:
    """The collector of a suite file, under `parent` (a folder, or the session): a ready
    suite's node id is orbench:<file>, a file outside the rootdir's its relative path."""
    from orbench_pytest.catalog.ready import ready_suite_dir
    from orbench_pytest.plugin.items import SuiteFile

    rootpath = parent.config.rootpath
    # A node id pytest would print as it is: an escaped one. None: pytest's own (the path
    # relative to the rootdir).
    refused = forging_name(path, rootpath)
    nodeid = refused[0] if refused is not None else node_path(path, rootpath, ready_suite_dir())
    node = SuiteFile.from_parent(parent, path=path, name=path.name, nodeid=nodeid)
    node.refused = None if refused is None else refused[1]
    return node


def forging_name(path: Path, rootpath: Path) -> tuple[str, str] | None:
    """A suite file whose path holds a control or format character (a newline, ESC, a bidi
    override) or `::` (pytest's node id separator) would print forged lines (a workflow
    command at column 0, a cleared screen) wherever pytest shows its node id, and under xdist
    its items would not be found again. Such a file is refused: (escaped node id, message)."""
    try:
        shown_path = os.path.relpath(path, rootpath).replace(os.sep, "/")
    except ValueError:  # another drive
        shown_path = str(path)
    if shown_path.isprintable() and "::" not in shown_path:
        return None
    escaped = terminal_line(shown_path).replace("::", ":\\x3a")
    return escaped, (f"{escaped}: a suite file name may not hold control characters, line "
                     "breaks or '::' (pytest prints it as it is, so it could forge output); "
                     "rename the file")
