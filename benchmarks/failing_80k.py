"""80K prompts of which half fail, against the same 80K all passing: pytest's failure summary.

pytest's summary looks up the teardown sections of each failure by scanning every stored
setup/teardown report (pytest-dev/pytest#13360), O(failures × items); the plugin keeps its items'
passed setup/teardown reports out of that list. Target: half-failing wall ≤ 1.5 × all-passing.
Both runs are cold (fresh cache), same server in its own process, alternated when repeated.

    python benchmarks/failing_80k.py [--n 80359] [--concurrency 64] [--repeat 1]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from _common import (
    OR_BENCH_80K,
    Run,
    load,
    median,
    orbench_command,
    pytest_env,
    run_process,
    server_process,
    summary_counts,
    synthesise,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=OR_BENCH_80K)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()

    top = Path(tempfile.mkdtemp(prefix="orbench-failing-"))
    runs: dict[str, list[Run]] = {"all pass": [], "half fail": []}
    load_before = load()
    try:
        roots = {"all pass": synthesise(top / "pass", args.n, 0),
                 "half fail": synthesise(top / "fail", args.n, 2)}
        with server_process() as server:
            for attempt in range(args.repeat):
                for name, root in roots.items():
                    env, plugin = pytest_env(root)
                    cache = root / f"cache-{attempt}.sqlite3"
                    runs[name].append(run_process(
                        orbench_command(plugin, server.url, args.concurrency, cache),
                        root, env, ok_codes=(0, 1)))
    finally:
        shutil.rmtree(top, ignore_errors=True)

    print(f"N={args.n}  concurrency={args.concurrency}  runs each={args.repeat}  "
          f"load before: {load_before}  after: {load()}")
    for name, done in runs.items():
        walls = ", ".join(f"{r.wall_s:.2f}" for r in done)
        print(f"  {name:10} {median([r.wall_s for r in done]):8.2f} s  (runs: {walls}), "
              f"peak RSS {max(r.peak_rss_mib for r in done)} MiB, output "
              f"{len(done[-1].output) / 1e6:.1f} MB, {summary_counts(done[-1].output)}")
    ratio = (median([r.wall_s for r in runs["half fail"]])
             / median([r.wall_s for r in runs["all pass"]]))
    print(f"  half fail / all pass: {ratio:.2f} (target ≤ 1.5) → "
          f"{'OK' if ratio <= 1.5 else 'MISSED'}")


if __name__ == "__main__":
    main()
