"""The embedded model's gate on the conversational and CoCoNot suites, with wall time.

Each gate is a real `pytest` run of a ready suite on `--orbench-model=local` (a fresh server
per run, as CI starts it), with an empty cache of its own so every answer is asked; it prints
the run's wall time, the gate line and the suite's rates from its results file.

    python benchmarks/chat_suites_local.py [--coconot-subset 60] [--only smoke-chat]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def gate(suite: str, extra: list[str], work: Path) -> None:
    results = work / f"{suite}.json"
    command = [sys.executable, "-m", "pytest", f"suites/{suite}.yaml", "--orbench-model=local",
               "-p", "no:xdist", "-q", f"--orbench-results={results}", *extra]
    env = {**os.environ, "ORBENCH_CACHE_DIR": str(work / f"cache-{suite}")}
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    gate_line = next((line for line in done.stdout.splitlines()
                      if line.startswith("orbench gate:")), "(no gate line)")
    print(f"$ pytest {' '.join(command[3:])}")
    print(f"  exit {done.returncode}, wall {wall:.0f}s")
    print(f"  {gate_line}")
    if results.is_file():
        for row in json.loads(results.read_text())["gate"]["rows"]:
            if row.get("category") is None:
                rates = {name: f"{r['rate']:.1%} [{r['interval'][0]:.1%}-"
                               f"{r['interval'][1]:.1%}]"
                         for name, r in (row.get("rates") or {}).items()}
                print(f"  {row['suite']}: n={row['n']} errors={row['errors']} {rates}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--coconot-subset", type=int, default=60)
    parser.add_argument("--only", choices=("smoke-chat", "coconot-contrast"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        if args.only in (None, "smoke-chat"):
            gate("smoke-chat", [], work)
        if args.only in (None, "coconot-contrast"):
            gate("coconot-contrast", [f"--orbench-subset={args.coconot_subset}",
                                      "--orbench-random-seed=0"], work)


if __name__ == "__main__":
    main()
