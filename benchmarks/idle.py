"""What the plugin costs a pytest run that runs no suite: `pytest --version`, and a plain
`pytest` collecting and running one ordinary test file, each with the plugin against the same
without it, medians of many fresh processes (alternated, so load drifts hit both).
Both the wall time and the CPU time (user + system, from the child's rusage) are shown; on a
shared machine the CPU time is the steadier figure (pytest's start-up is single-threaded, so on
an idle machine the two agree), and the verdict is taken on it. Other installed plugins are
not loaded (PYTEST_DISABLE_PLUGIN_AUTOLOAD, the plugin by its entry point name `-p orbench`):
hypothesis's alone costs about 2 s of CPU per start here and would drown a 20 ms difference.

Target: ≤ 20 ms. Needs the package installed (its pytest11 entry point).

    python -m benchmarks idle [--repeat 21]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from benchmarks.common import PYCACHE, load

# Other plugins off (see above); bytecode cached outside the checkout, as an installed package
# has it, rather than every start compiling the plugin from source (PYTHONDONTWRITEBYTECODE).
ENV = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONPYCACHEPREFIX": str(PYCACHE)}
ENV.pop("PYTHONDONTWRITEBYTECODE", None)


def timed(args: list[str], cwd: str) -> tuple[float, float]:
    """Wall and CPU seconds of one fresh pytest process."""
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "pytest", *args], cwd=cwd, env=ENV,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"pytest {' '.join(args)} failed in {cwd}")
    return wall, usage.ru_utime + usage.ru_stime


def plugin_import_ms() -> float:
    """Cumulative import time of the plugin module once pytest is loaded (-X importtime):
    less sensitive to machine load than whole-process wall time."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c",
                           "import pytest; import orbench_pytest.plugin.hooks"],
                          capture_output=True, text=True, check=True, env=ENV)
    for line in done.stderr.splitlines():
        fields = [field.strip() for field in line.split("|")]
        if len(fields) == 3 and fields[2] == "orbench_pytest.plugin.hooks":
            return int(fields[1]) / 1000
    raise SystemExit("no import time reported for orbench_pytest.plugin.hooks")


def own_ms(args: list[str], cwd: str) -> float:
    """The plugin's own time inside one pytest process, from a profile: its import and its
    hooks (pytest_addoption, pytest_configure), cumulative. Steadier on a loaded machine than
    the difference of two whole processes, as it times only the plugin's code."""
    import pstats

    with tempfile.NamedTemporaryFile(suffix=".prof") as out:
        subprocess.run([sys.executable, "-m", "cProfile", "-o", out.name, "-m", "pytest",
                        "-p", "orbench", *args], cwd=cwd, env=ENV, check=True,
                       capture_output=True)
        stats: dict[Any, Any] = pstats.Stats(out.name).stats  # type: ignore[attr-defined]
    total = 0.0
    for (filename, _, function), (_, _, _, cumulative, _) in stats.items():
        hooks = filename.endswith(os.path.join("orbench_pytest", "plugin", "hooks.py"))
        package = "orbench_pytest" in filename and filename.endswith("__init__.py")
        if ((hooks and function in ("<module>", "pytest_addoption", "pytest_configure"))
                or (package and function == "<module>")):  # the zone packages imported first
            total += cumulative
    return total * 1000


def cost(label: str, args: list[str], cwd: str, repeat: int, profile: bool = True) -> float:
    timed(["-p", "orbench", *args], cwd)  # warm-up: bytecode written once
    with_plugin, without = [], []
    for _ in range(repeat):  # alternated, so load drifts hit both alike
        with_plugin.append(timed(["-p", "orbench", *args], cwd))
        without.append(timed(args, cwd))
    wall_on, wall_off = (statistics.median(w for w, _ in runs) for runs in (with_plugin, without))
    cpu_on, cpu_off = (statistics.median(c for _, c in runs) for runs in (with_plugin, without))
    cost_ms = (cpu_on - cpu_off) * 1000
    profiles = min(repeat, 9) if profile else 0
    print(f"{label} (medians of {repeat}):\n"
          f"  wall: with the plugin {wall_on * 1000:.0f} ms, without {wall_off * 1000:.0f} "
          f"ms, difference {(wall_on - wall_off) * 1000:.1f} ms\n"
          f"  CPU:  with the plugin {cpu_on * 1000:.0f} ms, without {cpu_off * 1000:.0f} "
          f"ms, plugin cost {cost_ms:.1f} ms (target ≤ 20) → "
          f"{'OK' if cost_ms <= 20 else 'MISSED'}")
    if profiles:
        own = statistics.median(own_ms(args, cwd) for _ in range(profiles))
        print(f"  profiled: the plugin's import and hooks {own:.1f} ms (median of {profiles}, "
              "under cProfile)")
    return cost_ms


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=21)
    args = parser.parse_args(argv)
    if not any(ep.name == "orbench" for ep in entry_points(group="pytest11")):
        raise SystemExit("install the package first (pip install -e .)")
    print(f"load before: {load()}")
    with tempfile.TemporaryDirectory() as cwd:
        Path(cwd, "pytest.ini").write_text("[pytest]\n")
        Path(cwd, "test_plain.py").write_text("def test_one():\n    assert 1 + 1 == 2\n")
        cost("pytest --version", ["--version"], cwd, args.repeat, profile=False)
        cost("pytest test_plain.py", ["-q", "-p", "no:cacheprovider", "test_plain.py"], cwd,
             args.repeat)
        cost("pytest (no arguments)", ["-q", "-p", "no:cacheprovider"], cwd, args.repeat)
    imports = sorted(plugin_import_ms() for _ in range(args.repeat))
    print(f"import orbench_pytest.plugin.hooks after pytest: "
          f"median {statistics.median(imports):.1f} ms, min {imports[0]:.1f} ms "
          f"({args.repeat} processes)")
    print(f"load after: {load()}")
