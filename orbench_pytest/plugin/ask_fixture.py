"""The `orbench_ask` fixture's workings (hooks.py declares it) and the Hypothesis settings of
the tests that use it.

A test that asks the target through `orbench_ask` gets, unless it chose otherwise:
- its Hypothesis example database beside the answer cache ($ORBENCH_CACHE_DIR/hypothesis),
  not in `.hypothesis/` of the working tree; a test's own `database=` or a
  $HYPOTHESIS_STORAGE_DIRECTORY is kept;
- --orbench-random-seed as its Hypothesis seed (the same rewordings in every run); without it, on CI
  ($CI set) it is derandomised, as Hypothesis' own CI profile does;
- no deadline (a model's answer takes longer than Hypothesis' default 200 ms), unless the test
  or the profile set one other than the default.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest

from orbench_pytest.config.settings import Settings
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.run.prompt_asker import PromptAsker

FIXTURE = "orbench_ask"
HYPOTHESIS_DEADLINE = timedelta(milliseconds=200)  # Hypothesis' default


def _settings(config: pytest.Config) -> Settings:
    from orbench_pytest.plugin.stash import SESSION_KEY

    session = config.stash.get(SESSION_KEY, None)
    if session is not None:
        return session.settings
    from orbench_pytest.config.options import read_options
    from orbench_pytest.config.settings import build_settings

    ini_dir = config.inipath.parent if config.inipath is not None else config.rootpath
    values = read_options(vars(config.option), config.getini, ini_dir)
    return build_settings(values, invocation_dir=config.invocation_params.dir)


def session_asker(config: pytest.Config) -> PromptAsker:
    """The asker of this pytest session's target; a usage problem fails the test's setup with
    one line."""
    from orbench_pytest.config.model_choice import choose_model

    try:
        settings = _settings(config)
        target = settings.target
        if target.model is None and target.function is None and target.base_url is None:
            raise ConfigError("orbench_ask: no target: give --orbench-model (e.g. local), "
                              "--orbench-base-url or --orbench-target")
        settings, _chosen = choose_model(settings)
        return PromptAsker(settings)
    except ConfigError as exc:
        pytest.fail(str(exc), pytrace=False)


def configure_hypothesis(config: pytest.Config, items: Sequence[pytest.Item]) -> None:
    """Hypothesis tests using orbench_ask: database beside the cache, seed, CI derandomised."""
    tests = [item for item in items if FIXTURE in getattr(item, "fixturenames", ())
             and hasattr(getattr(item, "obj", None), "_hypothesis_internal_use_settings")]
    if not tests:
        return
    from hypothesis import settings as hypothesis_settings
    from hypothesis.database import DirectoryBasedExampleDatabase

    try:
        settings = _settings(config)
    except ConfigError:
        return  # the fixture reports it
    database = DirectoryBasedExampleDatabase(str(settings.cache.dir / "hypothesis"))
    for item in tests:
        fn: Any = item.obj  # type: ignore[attr-defined]
        current = fn._hypothesis_internal_use_settings
        changes: dict[str, Any] = {}
        if _default_database(current.database):
            changes["database"] = database
        if current.deadline == HYPOTHESIS_DEADLINE:
            changes["deadline"] = None  # an answer takes longer than Hypothesis' 200 ms
        seeded = getattr(fn, "_hypothesis_internal_use_seed", None) is not None
        if settings.scope.random_seed is not None and not seeded:
            fn._hypothesis_internal_use_seed = settings.scope.random_seed
        elif not seeded and os.environ.get("CI") and not current.derandomize:
            changes["derandomize"] = True
        if changes:
            fn._hypothesis_internal_use_settings = hypothesis_settings(current, **changes)


def _default_database(database: Any) -> bool:
    """Hypothesis' own default (`.hypothesis/examples` in the working folder), which nobody
    asked for."""
    return (type(database).__name__ == "_StorageDirectoryDatabase"
            and not os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"))
