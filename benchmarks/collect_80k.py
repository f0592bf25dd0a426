"""Collection speed at OR-Bench-80K scale: suite items against pytest's item floor.

Synthesises an 80,359-row CSV (prompt, category; 10 categories) in a temporary folder and
times, in the same run and alternately, `pytest --collect-only -q` of
  (a) the item floor: a conftest collecting the same CSV as 80,359 no-op custom pytest Items
      (the plugin's own mechanism; _common.ITEM_FLOOR_CONFTEST), and
  (b) a suite YAML pointing at the CSV, collected by this project's plugin.
Each run is a fresh process; its peak RSS comes from os.wait4 (that child's own rusage).
Target: (b) within 1.2 × (a), in wall time.

    python benchmarks/collect_80k.py [--rows 80359] [--repeat 3]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

from _common import Run, median, pytest_env, run_process, synthesise


def collected(line: str) -> int:
    match = re.search(r"(\d+) tests? collected", line)
    return int(match.group(1)) if match else -1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=80_359)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="orbench-collect-") as tmp:
        root = synthesise(Path(tmp), args.rows)
        env, plugin = pytest_env(root)
        # The same plugins in both: an installed plugin is loaded into every pytest run.
        base = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                *plugin]
        commands = {
            "a item floor": [*base, "floor"],
            "b orbench suite": [*base, "suites/bench.yaml"],
        }
        runs: dict[str, list[Run]] = {name: [] for name in commands}
        for _ in range(args.repeat):
            for name, command in commands.items():  # alternate, so drift hits both alike
                runs[name].append(run_process(command, root, env))

    loaded = "installed" if not plugin else "loaded with -p from the checkout"
    print(f"rows: {args.rows}, runs each: {args.repeat}, plugin {loaded}")
    print(f"{'':18} {'items':>7} {'wall median s':>14} {'wall min s':>11} {'peak RSS MiB':>13}")
    medians = {}
    for name, done in runs.items():
        walls = [run.wall_s for run in done]
        medians[name] = median(walls)
        print(f"{name:18} {collected(done[-1].last_line):>7} {medians[name]:>14.2f} "
              f"{min(walls):>11.2f} {max(run.peak_rss_mib for run in done):>13}")
    ratio = medians["b orbench suite"] / medians["a item floor"]
    print(f"(b)/(a) wall: {ratio:.2f} (target ≤ 1.2) → {'OK' if ratio <= 1.2 else 'MISSED'}")


if __name__ == "__main__":
    main()
