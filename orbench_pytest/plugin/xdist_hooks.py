"""XdistHooks: the session's companion plugin for runs under pytest-xdist (registered beside
it by `session.register_session`). The controller fetches once, when the first worker has
collected, and hands the states to the workers through a file (run/xdist_handoff.py); a
worker that kept no prompt of the suites it collected says which suites they were, so the
controller still decides their gate. Without xdist its hooks never fire.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from orbench_pytest.catalog.paths import names_suite_file
from orbench_pytest.core.untrusted import terminal_line
from orbench_pytest.plugin.session_reports import write_lines
from orbench_pytest.plugin.stash import STOP_PREFIX, RunSource

if TYPE_CHECKING:
    from orbench_pytest.run.xdist_handoff import StatesFile

UNSELECTED_KEY = "orbench_unselected_suites"  # xdist: a worker's suites, every prompt deselected


class XdistHooks:
    def __init__(self, session: RunSource) -> None:
        self.session = session
        self._handoff: StatesFile | None = None  # controller: the states for the workers
        self._nodes: list[Any] = []  # controller: the workers
        self._workers_stopped = False  # a worker stopped at a run stopped by the gate

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        from orbench_pytest.run.xdist_handoff import WORKERINPUT_KEY, StatesFile

        self._nodes.append(node)
        if self._handoff is None:
            self._handoff = StatesFile()
        node.workerinput[WORKERINPUT_KEY] = str(self._handoff.path)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        """Fires before any test is scheduled: fetch once, here, and hand the states over."""
        session = self.session
        if session.run is not None or not any(names_suite_file(nodeid) for nodeid in ids):
            return
        session.stop_on_collection_errors()
        from orbench_pytest.run.xdist_handoff import selected_from_ids

        session.start(selected_from_ids(session.catalog(), session.settings.target.variants,
                                        session.config.rootpath, ids))
        if session.ended is not None:  # the workers would run items that have no verdict
            ended, session.ended = session.ended, None
            write_lines(session.config, ended.lines[:-1])
            pytest.exit(terminal_line(ended.lines[-1]), returncode=ended.returncode)
        if session.run is not None and self._handoff is not None:
            self._handoff.write(session.run.outcome.states)
        # A worker that died while this hook fetched would next be sent tests, and xdist ends
        # in INTERNALERROR writing to it: stop with one line instead (every answer is cached,
        # so the next run resumes).
        dead = [str(node.gateway.id) for node in self._nodes if not _alive(node)]
        if dead:
            session.run = None  # not a finished run: no gate printed, no results written
            pytest.exit(f"ERROR: orbench: xdist worker {', '.join(dead)} died during the fetch "
                        "phase; the answers are cached: run pytest again",
                        returncode=pytest.ExitCode.INTERRUPTED)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        output = getattr(node, "workeroutput", {})
        shouldfail = output.get("shouldfail")
        if isinstance(shouldfail, str) and shouldfail.startswith(STOP_PREFIX):
            self._workers_stopped = True
        suites = output.get(UNSELECTED_KEY)
        session = self.session
        if session.run is None and session.ended is None and isinstance(suites, list) and suites:
            # The workers deselected every prompt (-m "not orbench"): the controller, which
            # collects nothing itself, still decides a gate over the suites they collected.
            for path in suites:
                session.catalog().load(Path(path))
            session.start([])

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """The handoff file goes. A worker that kept no prompt of the suites it collected
        tells the controller which suites they were."""
        workeroutput = getattr(self.session.config, "workeroutput", None)
        catalog, prompt_item = self.session.collected, self.session.prompt_item
        if (workeroutput is not None and catalog is not None and catalog.suites
                and prompt_item is not None
                and not any(isinstance(item, prompt_item) for item in session.items)):
            workeroutput[UNSELECTED_KEY] = [str(suite.path) for suite in catalog.suites]
        self.close()
        if self._workers_stopped and session.exitstatus == pytest.ExitCode.INTERRUPTED:
            # xdist turns a worker's stop into an interruption; a run stopped by the gate
            # failed, as it does without xdist.
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def close(self) -> None:
        if self._handoff is not None:
            self._handoff.delete()


def _alive(node: Any) -> bool:
    """An xdist worker whose process still talks to us (execnet's receiver stops at EOF)."""
    gateway = getattr(node, "gateway", None)
    channel = getattr(node, "channel", None)
    if gateway is None or channel is None:
        return True  # not set up yet: xdist itself reports a failed start
    return bool(gateway.hasreceiver()) and not channel.isclosed()
