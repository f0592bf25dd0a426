from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import REPO, plugin_installed
from tests.openai_server import OpenAIServer
from tests.timeouts import SCALE_ERROR

pytest_plugins = ["pytester"]


def _hypothesis_profile() -> None:
    """No property test here is about its own speed: Hypothesis' 200 ms deadline and its
    too-slow health check measure the machine, and failed on a loaded 2-core host (issue 44).
    The profile keeps everything else of the one in force (Hypothesis' `ci` profile on CI)."""
    from hypothesis import HealthCheck, settings

    current = settings.default
    settings.register_profile(
        "orbench-tests", parent=current, deadline=None,
        suppress_health_check=[*current.suppress_health_check, HealthCheck.too_slow])
    settings.load_profile("orbench-tests")


def _ctrl_c_as_in_a_terminal() -> None:
    """A run started in the background (`cmd &` in a script, nohup, some CI runners) inherits
    SIGINT ignored: Python then raises no KeyboardInterrupt, here nor in the children the
    tests send a Ctrl-C to (an ignored signal stays ignored across exec), and every Ctrl-C
    test fails ("DID NOT RAISE KeyboardInterrupt", a child that never stops). Python's own
    handler back, as in a terminal; a handler is reset to the default at exec."""
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_configure(config: pytest.Config) -> None:
    """Hypothesis keeps its files (example database, cache of constants) in pytest's cache
    folder rather than a `.hypothesis/` in the working directory, so a test run leaves the
    checkout as it found it. Subprocesses (pytester's, xdist workers) inherit the variable;
    this process is pinned too, as a test may unset the variable to play a user who chose
    none. A storage folder chosen from outside is kept."""
    from hypothesis.configuration import set_hypothesis_home_dir

    if SCALE_ERROR:  # a bad $ORBENCH_TEST_TIMEOUT_SCALE: one line, not a traceback
        raise pytest.UsageError(SCALE_ERROR)
    where = os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY")
    if not where:
        cache = getattr(config, "cache", None)  # absent under -p no:cacheprovider
        where = str(cache.mkdir("hypothesis") if cache is not None
                    else Path(tempfile.mkdtemp(prefix="orbench-tests-hypothesis-")))
        os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = where
    set_hypothesis_home_dir(where)
    _hypothesis_profile()  # after the storage folder: the profile's database lives there
    _ctrl_c_as_in_a_terminal()


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:
        yield server


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory,
                    monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads or writes the user's real cache, and no key leaks in from outside."""
    monkeypatch.setenv("ORBENCH_CACHE_DIR", str(tmp_path_factory.mktemp("orbench-cache")))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("ORBENCH_DATA_DIR", raising=False)


@pytest.fixture(autouse=True)
def _no_secret_outlives_its_test() -> Iterator[None]:
    """The secret registry is the process's: a test's keys must not redact the next test's
    output (nor hide that a test forgot to register one)."""
    yield
    from orbench_pytest.core.redact import forget_secrets

    forget_secrets()


@pytest.fixture
def plugin_args(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """How a pytester run loads the plugin: by its entry point when installed, else by -p."""
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    if plugin_installed():
        return []
    return ["-p", "orbench_pytest.plugin.hooks"]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """How many code blocks of README.md and docs/ ran (tests/test_docs.py), under xdist too:
    each page's test records its counts as a user property, which travels with its report."""
    ran = not_run = files = page_count = 0
    seconds = 0.0
    for reports in terminalreporter.stats.values():
        for report in reports:
            if getattr(report, "when", None) != "call":
                continue
            for name, value in getattr(report, "user_properties", ()):
                if name == "docs_blocks":
                    page_count += 1
                    ran, not_run, files = ran + value[0], not_run + value[1], files + value[2]
                    seconds += value[3]
    if page_count:
        terminalreporter.write_line(
            f"docs: {ran} code blocks run on {page_count} pages in {seconds:.1f}s "
            f"({not_run} not-run, {files} written as files)")


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Headless Chromium for the HTML report's tests (tests/browser.py): a skip without it,
    a failure in CI. Module-scoped: while it is open, Playwright's sync API keeps an event
    loop running in this thread, where an in-process pytester run (another module's, in the
    same xdist worker) could not start its fetch."""
    from tests.browser import launched

    with launched() as found:
        yield found
