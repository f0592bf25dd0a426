"""What the plugin costs a pytest run that runs no suite: `pytest --version` with the plugin
against the same with `-p no:orbench`, median of several fresh processes.

Target: ≤ 20 ms. Needs the package installed (its pytest11 entry point).

    python benchmarks/idle_cost.py [--repeat 15]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import entry_points

from _common import load


def timed(args: list[str], cwd: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest", *args], cwd=cwd, check=True,
                   capture_output=True)
    return time.perf_counter() - start


def plugin_import_ms() -> float:
    """Cumulative import time of the plugin module once pytest is loaded (-X importtime):
    less sensitive to machine load than whole-process wall time."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c",
                           "import pytest; import orbench_pytest.plugin"],
                          capture_output=True, text=True, check=True)
    for line in done.stderr.splitlines():
        fields = [field.strip() for field in line.split("|")]
        if len(fields) == 3 and fields[2] == "orbench_pytest.plugin":
            return int(fields[1]) / 1000
    raise SystemExit("no import time reported for orbench_pytest.plugin")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    if not any(ep.name == "orbench" for ep in entry_points(group="pytest11")):
        raise SystemExit("install the package first (pip install -e .)")
    print(f"load before: {load()}")
    with tempfile.TemporaryDirectory() as cwd:
        with_plugin, without = [], []
        for _ in range(args.repeat):  # alternated, so load drifts hit both alike
            with_plugin.append(timed(["--version"], cwd))
            without.append(timed(["--version", "-p", "no:orbench"], cwd))
    on, off = statistics.median(with_plugin), statistics.median(without)
    cost_ms = (on - off) * 1000
    print(f"pytest --version: with the plugin {on * 1000:.0f} ms, with -p no:orbench "
          f"{off * 1000:.0f} ms (medians of {args.repeat})")
    print(f"plugin cost: {cost_ms:.1f} ms (target ≤ 20) → {'OK' if cost_ms <= 20 else 'MISSED'}")
    imports = sorted(plugin_import_ms() for _ in range(args.repeat))
    print(f"import orbench_pytest.plugin after pytest: median {statistics.median(imports):.1f} "
          f"ms, min {imports[0]:.1f} ms ({args.repeat} processes)")
    print(f"load after: {load()}")


if __name__ == "__main__":
    main()
