"""The cached rerun against the item floor in instructions, and where its excess goes.

CPU seconds on a shared host move by 30-80% between identical runs (the same item floor read
0.79 and 1.43 s in one sitting), more than the 5% the rerun target allows. Instructions executed,
counted by valgrind (cachegrind, no cache simulation) with a fixed hash seed and every command in
a folder of its own (the import system lists the working directory), repeat to the instruction
and do not depend on what else the machine does. They are not time (a cache miss costs more than an
add), so this complements benchmarks/throughput.py, whose CPU figures stay the target's measure.

Over the 1,974 rows of OR-Bench-Hard-1K + Toxic, against the local scripted server:
  item floor     pytest collecting the rows as no-op custom Items (as throughput.py)
  cached rerun   pytest with the plugin, every answer and verdict from the cache
and the rerun's excess split into
  libraries      importing what the rerun imports beyond pytest from the standard library
                 and PyPI (sqlite3, yaml, asyncio, hashlib, ...)
  the package    importing the package's modules the rerun imports (their module bodies:
                 classes, dataclasses, compiled patterns)
  the run's work the rest: reading the suites, the answers and the verdicts, the gate, the
                 results file, and the per-item hooks.

    python benchmarks/rerun_instructions.py        # about 2 minutes
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import PYTEST, item_floor, pytest_env, server_process
from throughput import DATA, RERUN_TARGET, prompt_sets

PYTEST_BASE = "import pytest, _pytest.terminal, _pytest.junitxml"  # what the floor imports too
VALGRIND = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]


def instructions(command: list[str], cwd: Path, env: dict[str, str]) -> int:
    done = subprocess.run([*VALGRIND, *command], cwd=cwd, env=env, capture_output=True, text=True)
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"{command[:4]} under valgrind failed ({done.returncode}): "
                         f"{done.stderr.strip()[-300:]}")
    return int(found.group(1).replace(",", ""))


def imported(command: list[str], cwd: Path, env: dict[str, str]) -> list[str]:
    """The modules a command imports, in order (from `python -X importtime`)."""
    done = subprocess.run([sys.executable, "-X", "importtime", *command[1:]], cwd=cwd, env=env,
                          capture_output=True, text=True)
    return [line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines()
            if line.startswith("import time:") and "|" in line]


def top_level(names: list[str]) -> set[str]:
    return {name.split(".")[0] for name in names if not name.startswith(("_", "orbench_pytest"))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("needs valgrind (apt-get install valgrind)")
    root = Path(tempfile.mkdtemp(prefix="orbench-instructions-"))
    try:
        (prompts,) = prompt_sets(root, ["1974"], args.data)
        env, _ = pytest_env(root)
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        env["PYTHONHASHSEED"] = "0"  # set and dict layouts, hence instruction counts, repeat
        floor_dir = item_floor(root / "floor", prompts.csv_files)
        product_dir = root / "product"
        product_dir.mkdir()
        for folder in (floor_dir, product_dir):
            (folder / "pytest.ini").write_text("[pytest]\n")
        with server_process(refuse=prompts.refused) as server:
            rerun = [*PYTEST, "-p", "orbench_pytest.plugin.hooks", *prompts.suite_args,
                     f"--orbench-data-dir={root / 'data'}", "--orbench-model=bench",
                     f"--orbench-base-url={server.url}",
                     f"--orbench-cache-path={root / 'cache.sqlite3'}"]
            for command, cwd in ((rerun, product_dir), (PYTEST, floor_dir)):  # cache, bytecode
                subprocess.run(command, cwd=cwd, env=env, capture_output=True, check=False)
            names = imported(rerun, product_dir, env)
            package = [name for name in names if name.startswith("orbench_pytest.")]
            # the libraries the rerun imports and the floor does not
            others = sorted(top_level(names) - top_level(imported(list(PYTEST), floor_dir, env))
                            - {"conftest"})
            floor = instructions(list(PYTEST), floor_dir, env)
            product = instructions(rerun, product_dir, env)
            sent = server.stats()["requests"]
        python = [sys.executable, "-c"]
        libraries = f"{PYTEST_BASE}; import {', '.join(others)}"
        base = instructions([*python, PYTEST_BASE], root, env)
        with_libraries = instructions([*python, libraries], root, env)
        package_imports = f"import {', '.join(package)}"
        with_package = instructions([*python, f"{libraries}; {package_imports}"], root, env)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    excess = product - floor
    parts = {"libraries": with_libraries - base, "the package": with_package - with_libraries}
    parts["the run's work"] = excess - sum(parts.values())
    print(f"1,974 prompts, instructions (valgrind cachegrind); {sent} requests in all "
          "(the cold run's)")
    print(f"  item floor      {floor / 1e6:8,.0f} M")
    print(f"  cached rerun    {product / 1e6:8,.0f} M   {product / floor:.3f} × the floor "
          f"(target ≤ {RERUN_TARGET}: excess ≤ {floor * (RERUN_TARGET - 1) / 1e6:,.0f} M)")
    print(f"  excess          {excess / 1e6:8,.0f} M")
    for label, value in parts.items():
        print(f"    {label:14} {value / 1e6:6,.0f} M  ({value / floor:.1%} of the floor)")
    print(f"  the package's modules imported: {len(package)}; libraries: {', '.join(others)}")


if __name__ == "__main__":
    main()
