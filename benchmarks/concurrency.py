"""Adaptive concurrency: the default run against a slow server, and against one that rate-limits
by concurrency.

(1) N prompts (default 1,000) at --latency (default 0.2 s) through `pytest` with this plugin,
    at default settings (adaptive, ceiling 64), next to runs pinned with
    --orbench-fixed-concurrency at 16 (the old default) and at 64. Target: the default run
    ≤ about 5 s (half of promptfoo's best, 9.7 s, as measured in issue 18).
(2) The same against a server that answers 429 to a request arriving while --limit (default
    24) are in flight: the 429s the server sent and the wall time, adaptive (ceiling 64) next
    to fixed at 64 (the same ceiling) and fixed at the limit. Target: no more 429s than fixed.

Each configuration runs --repeat times in turn (so load drift hits all alike); medians shown.

    python -m benchmarks concurrency [--prompts 1000] [--latency 0.2] [--limit 24]
                                              [--repeat 3]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from benchmarks.common import (
    PYTEST,
    load,
    median,
    pytest_env,
    run_process,
    server_process,
    summary_counts,
    synthesise,
)

CONFIGS = {
    "adaptive (default, ceiling 64)": [],
    "fixed 16 (the old default)": ["--orbench-concurrency=16", "--orbench-fixed-concurrency"],
    "fixed 64": ["--orbench-concurrency=64", "--orbench-fixed-concurrency"],
}


def command(plugin: list[str], url: str, cache: Path, extra: list[str]) -> list[str]:
    return [*PYTEST, *plugin, "suites/bench.yaml", "--orbench-model=bench",
            f"--orbench-base-url={url}", f"--orbench-cache-path={cache}", "--orbench-cache=off",
            *extra]


def measure(root: Path, plugin: list[str], env: dict[str, str], latency: float,
            limit: int | None, configs: dict[str, list[str]],
            repeat: int) -> dict[str, tuple[list[float], list[int], str]]:
    seen: dict[str, tuple[list[float], list[int], str]] = {
        name: ([], [], "") for name in configs}
    with server_process(latency, limit) as server:
        for _ in range(repeat):
            for name, extra in configs.items():
                before = server.stats().get("rate_limited", 0)
                run = run_process(command(plugin, server.url, root / "c.sqlite3", extra),
                                  root, env, (0, 1))
                walls, rate_limited, _ = seen[name]
                walls.append(run.wall_s)
                rate_limited.append(server.stats()["rate_limited"] - before)
                seen[name] = (walls, rate_limited, summary_counts(run.output))
    return seen


def show(seen: dict[str, tuple[list[float], list[int], str]], with_429s: bool) -> None:
    for name, (walls, rate_limited, counts) in seen.items():
        line = (f"  {name:32} {median(walls):6.2f} s (runs: "
                f"{', '.join(f'{w:.2f}' for w in walls)})")
        if with_429s:
            line += f"  429s: {median(rate_limited):g} (runs: {rate_limited})"
        print(f"{line}  {counts}", flush=True)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--limit", type=int, default=24)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="orbench-adaptive-"))
    try:
        synthesise(root, args.prompts)
        env, plugin = pytest_env(root)
        print(f"(1) {args.prompts} prompts, {args.latency:g} s latency, runs each: "
              f"{args.repeat}, load before: {load()}", flush=True)
        show(measure(root, plugin, env, args.latency, None, CONFIGS, args.repeat), False)
        print(f"    load after: {load()}", flush=True)
        limited = {**CONFIGS, f"fixed {args.limit} (the server's limit)": [
            f"--orbench-concurrency={args.limit}", "--orbench-fixed-concurrency"]}
        del limited["fixed 16 (the old default)"]
        print(f"(2) the same, the server answers 429 beyond {args.limit} in flight, "
              f"load before: {load()}", flush=True)
        show(measure(root, plugin, env, args.latency, args.limit, limited, args.repeat), True)
        print(f"    load after: {load()}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
