"""Cheap when idle: every pytest start imports the plugin, so a run that uses no orbench suite
loads the option table and nothing more (`python -m benchmarks idle` measures the time)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from orbench_pytest.catalog.paths import may_hold_suites
from tests.helpers import REPO, SUBPROCESS_TIMEOUT_S, questions, run_orbench, write_suite
from tests.openai_server import OpenAIServer

ENTRY_MODULES = {"orbench_pytest", "orbench_pytest.plugin", "orbench_pytest.plugin.hooks",
                 "orbench_pytest.config", "orbench_pytest.config.options",
                 "orbench_pytest.config.parsers", "orbench_pytest.core",
                 "orbench_pytest.core.defaults"}
HEAVY = ("yaml", "httpx", "openai", "aiohttp", "asyncio", "sqlite3", "junitparser",
         "orbench_pytest.plugin.session", "orbench_pytest.config.settings",
         "orbench_pytest.core.types")


def test_importing_the_entry_point_loads_only_the_option_table() -> None:
    """In a fresh interpreter, after pytest itself: the modules the plugin's import adds."""
    code = ("import json, sys\nimport pytest\nbefore = set(sys.modules)\n"
            "import orbench_pytest.plugin.hooks\n"
            "print(json.dumps(sorted(set(sys.modules) - before)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env={**os.environ, "PYTHONPATH": str(REPO)},
                          timeout=SUBPROCESS_TIMEOUT_S)
    added = set(json.loads(done.stdout))
    # Nothing outside the package (pytest has loaded every standard module the table needs),
    # and of the package only the entry point, the option table and the defaults.
    assert added == ENTRY_MODULES, sorted(added ^ ENTRY_MODULES)
    assert not added & set(HEAVY)


def test_the_dataclasses_a_run_imports_have_docstrings() -> None:
    """A dataclass without one gets a docstring made with inspect.signature as it is created:
    about 80 us of every run's start each."""
    code = ("import dataclasses, json, sys\n"
            "import orbench_pytest.plugin.session, orbench_pytest.run.session_run\n"
            "print(json.dumps(sorted(f'{m}.{n}' for m, module in list(sys.modules.items())\n"
            "    if m.startswith('orbench_pytest') for n, c in vars(module).items()\n"
            "    if dataclasses.is_dataclass(c) and isinstance(c, type) and c.__module__ == m\n"
            "    and (c.__doc__ or '').startswith(c.__name__ + '('))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env={**os.environ, "PYTHONPATH": str(REPO)},
                          timeout=SUBPROCESS_TIMEOUT_S)
    assert json.loads(done.stdout) == []


# Run inside the pytester process: which orbench modules the run has loaded by then.
REPORT_LOADED = """\
import json, sys
def test_loaded():
    print("LOADED " + json.dumps(sorted(m for m in sys.modules
                                        if m.startswith(("orbench_", "aiohttp")))))
"""


def loaded_modules(pytester: pytest.Pytester, plugin_args: list[str], *args: str,
                   passed: int = 1, **run: Any) -> set[str]:
    if not list(pytester.path.rglob("test_probe.py")):
        pytester.makepyfile(test_probe=REPORT_LOADED)
    result = run_orbench(pytester, plugin_args, "-s", *args, suites=None, subprocess=True, **run)
    result.assert_outcomes(passed=passed)
    line = next(line for line in result.outlines if "LOADED " in line)
    return set(json.loads(line.partition("LOADED ")[2]))


@pytest.mark.parametrize("args", [(), ("test_probe.py",), ("test_probe.py::test_loaded",)])
def test_a_run_without_orbench_loads_nothing_more(pytester, plugin_args, args) -> None:
    pytester.makeini("[pytest]\n")  # the rootdir: no ini option of ours set
    loaded = loaded_modules(pytester, plugin_args, *args)
    assert loaded - ENTRY_MODULES <= {"orbench_pytest.catalog", "orbench_pytest.catalog.paths"}, \
        sorted(loaded)
    assert ENTRY_MODULES <= loaded  # the probe sees the plugin (it would pass without it)


@pytest.mark.parametrize("setting", ["option", "ini", "suite folder"])
def test_a_run_using_orbench_registers_the_session(pytester, plugin_args, setting) -> None:
    args: list[str] = []
    pytester.makeini("[pytest]\norbench_cache = read\n" if setting == "ini" else "[pytest]\n")
    if setting == "option":
        args.append("--orbench-cache=read")
    if setting == "suite folder":  # a typed folder holding a suite file
        pytester.mkdir("checks")
        (pytester.path / "checks" / "mine.yaml").write_text(
            "name: mine\nprompts:\n  - {prompt: hi, expect: comply, category: c}\n")
        args += ["checks", "-k", "not mine"]  # the suite collected, its item deselected
        pytester.makepyfile(**{"checks/test_probe": REPORT_LOADED})
    loaded = loaded_modules(pytester, plugin_args, *args)
    assert "orbench_pytest.plugin.session" in loaded


def test_a_cached_rerun_loads_no_http_client_and_no_batch_code(
        pytester: pytest.Pytester, plugin_args: list[str], openai_server: OpenAIServer) -> None:
    """A run that finds every answer in the cache sends nothing: it loads neither aiohttp nor
    code for features it does not use (each import costs every rerun a millisecond or more)."""
    pytester.makeini("[pytest]\n")
    write_suite(pytester, questions(3))
    run = {"url": openai_server.url, "cache": "answers.sqlite3"}
    first = loaded_modules(pytester, plugin_args, "suites", "test_probe.py", passed=4, **run)
    assert "aiohttp" in first and "orbench_pytest.run.runner" in first  # it asked
    rerun = loaded_modules(pytester, plugin_args, "suites", "test_probe.py", passed=4, **run)
    assert "orbench_pytest.run.runner" in rerun  # it ran, from the cache
    assert not {m for m in rerun if m.startswith(("aiohttp", "orbench_pytest.batch"))}, rerun
    # Nor what only batch steps or a judge calibration use.
    unused = {"orbench_pytest.run.batch_steps", "orbench_pytest.gate.calibration"}
    assert not rerun & unused, sorted(rerun & unused)


def test_which_typed_paths_may_hold_suites(tmp_path: Path) -> None:
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "mine.yml").write_text("name: mine\n")
    (tmp_path / "tests" / "deeper").mkdir(parents=True)
    (tmp_path / "tests" / "test_x.py").write_text("")
    (tmp_path / "tests" / "deeper" / "suite.yaml").write_text("name: deeper\n")
    for holds in (["suites"], ["suites/mine.yml::mine[a-1]"], ["x.yaml"], ["tests", "suites"]):
        assert may_hold_suites(holds, tmp_path), holds
    # Only a named folder's own YAML files are suites, never deeper ones.
    for holds_none in ([], ["tests"], ["tests/test_x.py"], ["tests/test_x.py::test_a"]):
        assert not may_hold_suites(holds_none, tmp_path), holds_none
