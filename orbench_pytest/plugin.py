"""pytest hooks only: options, configuration, collection. The state lives in OrbenchSession."""

from __future__ import annotations

from pathlib import Path

import pytest

from .errors import ConfigError
from .ids import ORBENCH_MARKER
from .options import add_options, read_options
from .ready_suites import resolve_suite
from .session import PLUGIN_KEY, OrbenchSession, load_configured_thresholds
from .settings import build_settings
from .suite_selection import SUITE_SUFFIXES, collection_args, node_path, suite_request


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("orbench", "orbench-pytest: over-refusal and toxic-acceptance gate")
    add_options(group.addoption, parser.addini)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{ORBENCH_MARKER}: a prompt of an orbench suite")
    here = config.invocation_params.dir
    ini_dir = config.inipath.parent if config.inipath is not None else config.rootpath
    try:
        values = read_options(vars(config.option), config.getini, ini_dir)
        settings = build_settings(values, invocation_dir=here)
        thresholds = load_configured_thresholds(settings, config.rootpath)
        suite_paths = [resolve_suite(ref, here) for ref in values["orbench_suite"] or ()]
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    typed = config.args_source == pytest.Config.ArgsSource.ARGS
    request = suite_request(config.args if typed else (), here, suite_paths)
    config.args[:] = collection_args(config.args, typed, request)
    session = OrbenchSession(config, settings, thresholds, request)
    config.stash[PLUGIN_KEY] = session
    config.pluginmanager.register(session, "orbench-session")


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(PLUGIN_KEY, None)
    if session is not None:
        session.close()
        config.pluginmanager.unregister(session)
        del config.stash[PLUGIN_KEY]


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.suffix not in SUITE_SUFFIXES:
        return None
    session = parent.config.stash.get(PLUGIN_KEY, None)
    if session is None or not session.is_suite_candidate(file_path):
        return None
    from .items import SuiteFile

    nodeid = node_path(file_path, parent.config.rootpath)
    if nodeid is None:
        return SuiteFile.from_parent(parent, path=file_path)
    return SuiteFile.from_parent(parent, path=file_path, nodeid=nodeid)


def get_plugin(config: pytest.Config) -> OrbenchSession:
    return config.stash[PLUGIN_KEY]
