"""Large runs: N shards side by side against one run, and a Batch API round trip at 80K.

Shards: a synthetic suite of --shard-size prompts (every 50th refused) against the local
OpenAI-compatible server (tests/openai_server.py, in its own process) with --latency seconds
per request: one unsharded run, each of the --shards shard runs alone (what a CI matrix job
on its own runner takes), then all of them started together on this machine (each with its
own cache), `orbench cache merge`, and the gate over the merged cache with
--orbench-cache=read. The merged gate must give the unsharded run's table and counts.

Batch round trip: --batch-size prompts (OR-Bench 80K's size by default): the export run
(--orbench-batch-export), answers written outside (tests/batch_files.answer_file, timed apart:
it stands in for the provider), and the import run (--orbench-batch-import) that gates with
the endpoint dead.

    python -m benchmarks large-runs [--shard-size 10000] [--shards 4] [--latency 0.2]
                                    [--concurrency 16] [--batch-size 80359] [--skip-batch]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import (
    OR_BENCH_80K,
    PYTEST,
    load,
    orbench_command,
    pytest_env,
    run_process,
    server_process,
    summary_counts,
    synthesise,
)

DEAD = "http://127.0.0.1:9/v1"
ALL = "--orbench-subset=all"  # a suite this large is sampled unless told otherwise


def verdicts(output: str) -> list[str]:
    """The gate table and verdict, less the lines that carry timings, request counts or the
    answers' age (they differ between the runs compared)."""
    lines = output.splitlines()
    start = next((i for i, line in enumerate(lines) if "orbench gate" in line and "=" in line),
                 len(lines))
    table = []
    for line in lines[start + 1:]:
        if not line.startswith(("answers:", "target:", "cache:", "cost:", "judged:")):
            table.append(line)
        if line.startswith("orbench gate:"):
            break
    return table


def outcome_counts(output: str) -> str:
    """pytest's summary counts, less the wall time."""
    return re.sub(r" in [\d.]+s.*$", "", summary_counts(output))


def shards(size: int, count: int, latency: float, concurrency: int) -> None:
    root = synthesise(Path(tempfile.mkdtemp(prefix="orbench-shards-")), size, fail_every=50)
    env, plugin = pytest_env(root)
    with server_process(latency) as server:
        whole = run_process(orbench_command(plugin, server.url, concurrency,
                                            root / "whole.sqlite3", ALL), root, env, (0, 1))
        alone = [run_process(orbench_command(plugin, server.url, concurrency,
                                             root / f"alone{k}.sqlite3",
                                             f"--orbench-shard={k}/{count}", ALL), root, env)
                 for k in range(1, count + 1)]
        commands = [orbench_command(plugin, server.url, concurrency, root / f"s{k}.sqlite3",
                                    f"--orbench-shard={k}/{count}", ALL)
                    for k in range(1, count + 1)]
        asked_alone = server.stats()["requests"]
        started = time.perf_counter()
        processes = [subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True)
                     for command in commands]
        outputs = [process.communicate()[0] for process in processes]
        sharded_s = time.perf_counter() - started
        asked = server.stats()["requests"]
    if any(process.returncode != 0 for process in processes):
        raise SystemExit("a shard run failed:\n" + "\n".join(o[-2000:] for o in outputs))
    merged = root / "all.sqlite3"
    merge = run_process([sys.executable, "-m", "orbench_pytest.cli.main", "cache", "merge",
                         *(str(root / f"s{k}.sqlite3") for k in range(1, count + 1)),
                         "-o", str(merged)], root, env)
    gate = run_process([*orbench_command(plugin, server.url, concurrency, merged, ALL),
                        "--orbench-cache=read"], root, env, (0, 1))
    same = (verdicts(gate.output) == verdicts(whole.output)
            and outcome_counts(gate.output) == outcome_counts(whole.output)
            and gate.returncode == whole.returncode)
    print(f"shards: {size} prompts, {latency * 1000:.0f} ms a request, concurrency "
          f"{concurrency}, load {load()}")
    print(f"  unsharded run:           {whole.wall_s:7.1f} s   ({summary_counts(whole.output)})")
    slowest = max(run.wall_s for run in alone)
    print(f"  each shard alone:        {slowest:7.1f} s   (the slowest of "
          f"{', '.join(f'{run.wall_s:.1f}' for run in alone)} s: a matrix job on its own "
          f"runner; {whole.wall_s / slowest:.1f}× faster)")
    print(f"  {count} shards side by side: {sharded_s:7.1f} s   "
          f"({whole.wall_s / sharded_s:.1f}× faster on this one machine; the shards asked "
          f"{asked - asked_alone} requests, each prompt once)")
    print(f"  orbench cache merge:     {merge.wall_s:7.1f} s   ({merge.last_line})")
    print(f"  gate over the merge:     {gate.wall_s:7.1f} s   (same outcome as unsharded: "
          f"{same})")
    if not same:
        raise SystemExit("the merged gate differs from the unsharded run")


def batch_round_trip(size: int) -> None:
    from tests.batch_files import answer_file
    from tests.openai_server import REFUSAL_TEXT, Reply

    root = synthesise(Path(tempfile.mkdtemp(prefix="orbench-batch-")), size, fail_every=50)
    env, plugin = pytest_env(root)
    base = [*PYTEST, *plugin, "suites/bench.yaml", "--orbench-model=bench",
            f"--orbench-base-url={DEAD}", f"--orbench-cache-path={root / 'c.sqlite3'}",
            "--orbench-max-retries=0", ALL]
    exported = run_process([*base, "--orbench-batch-export=requests.jsonl"], root, env)
    started = time.perf_counter()
    answer_file(root / "requests.jsonl", root / "output.jsonl",
                lambda body: Reply(text=REFUSAL_TEXT if "(refuse me)" in
                                   body["messages"][-1]["content"] else "Sure, here it is."))
    outside_s = time.perf_counter() - started
    imported = run_process([*base, "--orbench-batch-import=output.jsonl"], root, env, (0, 1))
    if "requests: 0," not in imported.output:
        raise SystemExit("the import run asked the endpoint:\n" + imported.output[-2000:])
    rerun = run_process(base, root, env, (0, 1))  # the same gate from the cache alone
    mib = (root / "requests.jsonl").stat().st_size / 2**20
    out_mib = (root / "output.jsonl").stat().st_size / 2**20
    print(f"batch round trip: {size} prompts, load {load()}")
    print(f"  export run:  {exported.wall_s:6.1f} s, peak RSS {exported.peak_rss_mib} MiB "
          f"({mib:.1f} MiB of requests)")
    print(f"  (answers written outside by tests/batch_files.py: {outside_s:.1f} s, "
          f"{out_mib:.1f} MiB)")
    print(f"  import run:  {imported.wall_s:6.1f} s, peak RSS {imported.peak_rss_mib} MiB, "
          f"endpoint dead ({summary_counts(imported.output)})")
    print(f"  the same gate from the cache alone: {rerun.wall_s:6.1f} s (the import's own "
          f"cost: {imported.wall_s - rerun.wall_s:.1f} s)")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shard-size", type=int, default=10_000)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=OR_BENCH_80K)
    parser.add_argument("--skip-batch", action="store_true")
    parser.add_argument("--skip-shards", action="store_true")
    args = parser.parse_args(argv)
    if not args.skip_shards:
        shards(args.shard_size, args.shards, args.latency, args.concurrency)
    if not args.skip_batch:
        batch_round_trip(args.batch_size)
