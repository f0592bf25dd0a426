"""pytest entry point: the options, and the orbench session only in a run that uses orbench.

Every pytest start imports this module, also in projects that run no suite, so it imports only
the option table (options.py, standard library only). `pytest_configure` registers the session
(session.py: collection, the run, reports) as a second plugin only when an orbench option is
set (command line or ini file), a path typed on the command line can hold a suite, or this is
an xdist worker of an orbench run; otherwise the plugin stays inert and loads nothing more
(`python -m benchmarks idle` measures what it costs).

PYTEST_DONT_REWRITE, as the package (`__init__.py` says why): loaded by
`-p orbench_pytest.plugin.hooks` from a checkout, this module is the name pytest would mark
for rewriting.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from orbench_pytest.config.options import (
    Deprecated,
    add_options,
    any_given,
    deprecated_spellings,
    read_options,
)

_DEPRECATED = pytest.StashKey[list[Deprecated]]()  # old spellings given, warned at collection


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("orbench", "orbench-pytest: over-refusal and toxic-acceptance gate")
    add_options(group.addoption, parser.addini)


def pytest_configure(config: pytest.Config) -> None:
    ini_dir = config.inipath.parent if config.inipath is not None else config.rootpath
    try:
        values = read_options(vars(config.option), config.getini, ini_dir, config.inipath)
    except Exception as exc:  # core.errors loaded only when something failed: an idle start
        from orbench_pytest.core.errors import ConfigError

        if isinstance(exc, ConfigError):  # an ini value the key cannot hold: one line
            raise pytest.UsageError(str(exc)) from None
        raise
    config.stash[_DEPRECATED] = deprecated_spellings(vars(config.option), config.getini,
                                                     config.inipath)
    if not (any_given(values) or _may_collect_suites(config)):
        return
    from orbench_pytest.plugin.session import register_session

    register_session(config, values)


@pytest.hookimpl(tryfirst=True)  # before xdist's controller, which collects nothing
def pytest_collection(session: pytest.Session) -> None:
    """Warn of each old spelling where the user typed it (the command line, the ini file's
    line), not at this line: pytest records the warnings of collection with their own place.
    Once per run: not again in each xdist worker."""
    config = session.config
    if hasattr(config, "workerinput"):
        return
    for found in config.stash.get(_DEPRECATED, []):
        warnings.warn_explicit(pytest.PytestDeprecationWarning(found.message),
                               pytest.PytestDeprecationWarning, found.filename, found.lineno)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Property tests that use orbench_ask: their Hypothesis database beside the answer cache,
    --orbench-random-seed as their seed (ask_fixture.py)."""
    if any("orbench_ask" in getattr(item, "fixturenames", ()) for item in items):
        from orbench_pytest.plugin.ask_fixture import configure_hypothesis

        configure_hypothesis(config, items)


@pytest.fixture(scope="session")
def orbench_ask(request: pytest.FixtureRequest) -> Any:
    """Ask the configured target (--orbench-model, --orbench-target …) one prompt, through the
    run's engine and cache, and get its judged answer: `.complied`, `.refused`, `.answer`.
    For property tests over rewordings (orbench_pytest.strategies, docs/rewordings.md)."""
    from orbench_pytest.plugin.ask_fixture import session_asker

    asker = session_asker(request.config)
    try:
        yield asker
    finally:
        asker.close()


def _may_collect_suites(config: pytest.Config) -> bool:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:  # an xdist worker: orbench runs where its controller's does
        from orbench_pytest.run.xdist_handoff import WORKERINPUT_KEY

        return WORKERINPUT_KEY in workerinput
    from orbench_pytest.catalog.paths import may_hold_suites

    typed = config.args_source == pytest.Config.ArgsSource.ARGS  # typed, not testpaths
    return typed and may_hold_suites(config.args, config.invocation_params.dir)
