"""pytest entry point: options, configuration and the suite-file check, nothing more.

Importing it must stay cheap (every pytest start pays for it, also in projects that run no
suite): the run engine, judges, YAML and HTTP clients load only once a suite is collected.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .options import add_options
from .stash import SESSION_KEY


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("orbench", "orbench-pytest: over-refusal and toxic-acceptance gate")
    add_options(group.addoption, parser.addini)


def pytest_configure(config: pytest.Config) -> None:
    from .errors import ConfigError
    from .ids import ORBENCH_MARKER
    from .options import read_options
    from .ready_suites import resolve_suite
    from .session import OrbenchSession
    from .settings import build_settings
    from .suite_selection import collection_args, suite_request

    config.addinivalue_line("markers", f"{ORBENCH_MARKER}: a prompt of an orbench suite")
    here = config.invocation_params.dir
    ini_dir = config.inipath.parent if config.inipath is not None else config.rootpath
    try:
        values = read_options(vars(config.option), config.getini, ini_dir)
        settings = build_settings(values, invocation_dir=here)
        suite_paths = [resolve_suite(ref, here) for ref in values["orbench_suite"] or ()]
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    typed = config.args_source == pytest.Config.ArgsSource.ARGS
    request = suite_request(config.args if typed else (), here, suite_paths)
    config.args[:] = collection_args(config.args, typed, request)
    if settings.samples > 1 and settings.temperature == 0 and not hasattr(config, "workerinput"):
        from .samples import identical_answers_warning

        config.issue_config_time_warning(
            pytest.PytestWarning(identical_answers_warning(settings.samples)), stacklevel=2)
    session = OrbenchSession(config, settings, request)
    config.stash[SESSION_KEY] = session
    config.pluginmanager.register(session, "orbench-session")


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(SESSION_KEY, None)
    if session is not None:
        session.close()
        config.pluginmanager.unregister(session)
        del config.stash[SESSION_KEY]


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    session = parent.config.stash.get(SESSION_KEY, None)
    if session is None or not session.is_suite_candidate(file_path):
        return None
    from .items import SuiteFile
    from .suite_selection import node_path

    nodeid = node_path(file_path, parent.config.rootpath)
    if nodeid is None:
        return SuiteFile.from_parent(parent, path=file_path)
    return SuiteFile.from_parent(parent, path=file_path, nodeid=nodeid)
