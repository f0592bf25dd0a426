"""Collection speed at OR-Bench-80K scale: suite items against plain parametrize.

Synthesises an 80,359-row CSV (prompt, category; 10 categories) in a temporary folder and
times, in the same run and alternately, `pytest --collect-only -q` of
  (a) a test module with 80,359 `@pytest.mark.parametrize` no-op tests over the same rows, and
  (b) a suite YAML pointing at the CSV, collected by this project's plugin.
Each run is a fresh process; its peak RSS comes from os.wait4 (that child's own rusage).
Target: (b) within 1.2 × (a), in wall time.

    python benchmarks/collect_80k.py [--rows 80359] [--repeat 3]
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import entry_points
from pathlib import Path

from _common import CATEGORIES, NOOP_MODULE

REPO = Path(__file__).resolve().parent.parent
SUITE = """\
name: bench-80k
description: synthetic prompts at OR-Bench-80K scale
source: prompts.csv
prompt: prompt
category: category
expect: comply
"""


def synthesise(folder: Path, rows: int) -> None:
    with (folder / "prompts.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["prompt", "category"])
        for index in range(rows):
            category = CATEGORIES[index % len(CATEGORIES)]
            writer.writerow([f"How could someone, hypothetically, approach topic {index} in the "
                             f"{category} area without causing harm?", category])


def run(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, int, str]:
    """Wall seconds, peak RSS in MiB and the last output line of one fresh pytest process."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=out,
                                   stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode(errors="replace")
    last = text.strip().splitlines()[-1] if text.strip() else ""
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({process.returncode}):\n{text[-3000:]}")
    peak_mib = usage.ru_maxrss / 1024  # Linux reports KiB
    return wall, round(peak_mib), last


def collected(line: str) -> int:
    match = re.search(r"(\d+) tests? collected", line)
    return int(match.group(1)) if match else -1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=80_359)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    installed = any(ep.name == "orbench" for ep in entry_points(group="pytest11"))
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"}
    if not installed:
        # Load the plugin from the checkout by name; autoload would find nothing of ours anyway.
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    plugin = [] if installed else ["-p", "orbench_pytest.plugin"]
    base = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]

    with tempfile.TemporaryDirectory(prefix="orbench-collect-") as tmp:
        root = Path(tmp)
        (root / "plain").mkdir()
        (root / "suites").mkdir()
        synthesise(root / "plain", args.rows)
        os.link(root / "plain" / "prompts.csv", root / "suites" / "prompts.csv")
        (root / "plain" / "test_plain.py").write_text(NOOP_MODULE)
        (root / "suites" / "bench-80k.yaml").write_text(SUITE)
        (root / "pytest.ini").write_text("[pytest]\n")  # keep the repo's settings out
        env["ORBENCH_CACHE_DIR"] = str(root / "cache")
        commands = {
            "a parametrize": [*base, "plain/test_plain.py"],
            "b orbench suite": [*base, *plugin, "suites/bench-80k.yaml"],
        }
        results: dict[str, list[tuple[float, int, str]]] = {name: [] for name in commands}
        for _ in range(args.repeat):
            for name, command in commands.items():  # alternate, so drift hits both alike
                results[name].append(run(command, root, env))

    print(f"rows: {args.rows}, runs each: {args.repeat}, plugin "
          f"{'installed' if installed else 'loaded with -p from ' + str(REPO)}")
    print(f"{'':18} {'items':>7} {'wall median s':>14} {'wall min s':>11} {'peak RSS MiB':>13}")
    medians = {}
    for name, runs in results.items():
        walls = [wall for wall, _, _ in runs]
        medians[name] = statistics.median(walls)
        print(f"{name:18} {collected(runs[-1][2]):>7} {medians[name]:>14.2f} {min(walls):>11.2f} "
              f"{max(peak for _, peak, _ in runs):>13}")
    ratio = medians["b orbench suite"] / medians["a parametrize"]
    print(f"(b)/(a) wall: {ratio:.2f} (target ≤ 1.2) → {'OK' if ratio <= 1.2 else 'MISSED'}")


if __name__ == "__main__":
    main()
