"""End-to-end speed of the fetch-and-judge phase against its two floors.

For each N, a synthetic suite (CSV + YAML) goes through `pytest` with this plugin, against an
OpenAI-compatible server (tests/openai_server.py) in its own process, and is compared with
  (a) the client floor: a bare aiohttp loop sending the same N requests at the same concurrency,
  (b) the pytest floor: pytest running N no-op parametrised tests over the same rows.
Targets: cold run ≤ 1.1 × (a + b); with --latency L, ≤ 1.1 × (N × L / concurrency + b);
rerun from a full cache ≤ 1.0 × b. With --xdist, the same cold run under `-n 2` (its own cache):
its gate table and outcome counts must equal the serial run's, and the server must see N
requests. With --fail-every K, every K-th prompt is refused (a failed item).

    python benchmarks/throughput.py [--sizes 1000 10000 80359] [--concurrency 64]
                                    [--latency 0] [--repeat 1] [--xdist] [--fail-every 0]
"""

from __future__ import annotations

import argparse
import re
import shutil
import tempfile
from pathlib import Path

from _common import (
    OR_BENCH_80K,
    ClientFloor,
    Run,
    client_floor,
    load,
    median,
    noop_command,
    orbench_command,
    pytest_env,
    run_process,
    server_process,
    summary_counts,
    synthesise,
    warm_up,
)

from orbench_pytest.fetch.cache import journal_files


def gate_table(output: str) -> list[str]:
    """The gate lines of a run, less the ones that carry timings or request counts."""
    lines = output.splitlines()
    start = next((i for i, line in enumerate(lines) if "orbench gate" in line and "=" in line),
                 None)
    if start is None:
        return []
    table = []
    for line in lines[start + 1:]:
        if line.startswith("answers:") or line.startswith("target:"):
            continue
        table.append(line)
        if line.startswith("orbench gate:"):
            break
    return table


def outcome_counts(output: str) -> str:
    return re.sub(r" in [\d.]+s.*$", "", summary_counts(output))


def fresh_cache(root: Path, name: str) -> Path:
    path = root / name
    for file in (path, *journal_files(path)):
        file.unlink(missing_ok=True)
    return path


def measure(n: int, args: argparse.Namespace) -> list[str]:
    root = Path(tempfile.mkdtemp(prefix=f"orbench-throughput-{n}-"))
    notes: list[str] = []
    try:
        synthesise(root, n, args.fail_every)
        env, plugin = pytest_env(root)
        ok = (0, 1) if args.fail_every else (0,)
        floors_a: list[ClientFloor] = []
        floors_b: list[float] = []
        colds: list[Run] = []
        warms: list[Run] = []
        xdist: list[Run] = []
        with server_process(args.latency) as server:
            warm_up(env, plugin, server.url)
            for _ in range(args.repeat):  # alternate, so load drift hits all alike
                floors_a.append(client_floor(server.url, root, args.concurrency))
                floors_b.append(run_process(noop_command(), root, env).wall_s)
                cache = fresh_cache(root, "cold.sqlite3")
                before = server.stats()["requests"]
                colds.append(run_process(orbench_command(plugin, server.url, args.concurrency,
                                                         cache), root, env, ok))
                sent = server.stats()["requests"] - before
                if sent != n:
                    notes.append(f"cold run sent {sent} requests for {n} prompts")
                before = server.stats()["requests"]
                warms.append(run_process(orbench_command(plugin, server.url, args.concurrency,
                                                         cache), root, env, ok))
                if server.stats()["requests"] != before:
                    notes.append("rerun from a full cache sent requests")
                if args.xdist:
                    cache = fresh_cache(root, "xdist.sqlite3")
                    before = server.stats()["requests"]
                    xdist.append(run_process(orbench_command(
                        plugin, server.url, args.concurrency, cache, "-n", "2"), root, env, ok))
                    sent = server.stats()["requests"] - before
                    if sent != n:
                        notes.append(f"-n 2 sent {sent} requests for {n} prompts")
                    if gate_table(xdist[-1].output) != gate_table(colds[-1].output):
                        notes.append("-n 2 gate table differs from the serial run's")
                    if outcome_counts(xdist[-1].output) != outcome_counts(colds[-1].output):
                        notes.append(f"-n 2 outcomes differ: {outcome_counts(xdist[-1].output)}"
                                     f" vs {outcome_counts(colds[-1].output)}")
            server_cpu = server.cpu_seconds()
    finally:
        shutil.rmtree(root, ignore_errors=True)

    a, b = median([f.total_s for f in floors_a]), median(floors_b)
    cold, warm = median([r.wall_s for r in colds]), median([r.wall_s for r in warms])
    ideal = n * args.latency / args.concurrency if args.latency else a
    target = 1.1 * (ideal + b)
    lines = [
        f"N={n}  concurrency={args.concurrency}  latency={args.latency:g}s  "
        f"runs each={args.repeat}  load before: {args.load_before}  after: {load()}",
        f"  (a) client floor, bare aiohttp    {a:8.2f} s   (runs, import + loop: "
        f"{', '.join(f'{x.import_s:.2f} + {x.loop_s:.2f}' for x in floors_a)})",
        f"  (b) pytest floor, N no-op tests   {b:8.2f} s   (runs: "
        f"{', '.join(f'{x:.2f}' for x in floors_b)})",
        f"  cold run with the plugin          {cold:8.2f} s   (runs: "
        f"{', '.join(f'{r.wall_s:.2f}' for r in colds)}), peak RSS "
        f"{max(r.peak_rss_mib for r in colds)} MiB, {outcome_counts(colds[-1].output)}",
        f"      target 1.1 × ({'N×L/c' if args.latency else 'a'} {ideal:.2f} + b) = "
        f"{target:.2f} s → {cold / (ideal + b):.2f} × → "
        f"{'OK' if cold <= target else 'MISSED'}",
        f"  rerun from a full cache           {warm:8.2f} s   (runs: "
        f"{', '.join(f'{r.wall_s:.2f}' for r in warms)}), peak RSS "
        f"{max(r.peak_rss_mib for r in warms)} MiB → {warm / b:.2f} × b → "
        f"{'OK' if warm <= b else 'MISSED'}",
    ]
    if xdist:
        lines.append(
            f"  -n 2 cold run                     {median([r.wall_s for r in xdist]):8.2f} s   "
            f"(runs: {', '.join(f'{r.wall_s:.2f}' for r in xdist)}), "
            f"{outcome_counts(xdist[-1].output)}")
    lines.append(f"  server process CPU: {server_cpu:.1f} s over the whole measurement")
    lines += [f"  NOTE: {note}" for note in dict.fromkeys(notes)] or ["  checks: OK"]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, OR_BENCH_80K])
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.0, help="server latency, seconds")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--xdist", action="store_true", help="also run with -n 2")
    parser.add_argument("--fail-every", type=int, default=0,
                        help="every K-th prompt is refused, so fails (0: all pass)")
    args = parser.parse_args()
    for n in args.sizes:
        args.load_before = load()
        for line in measure(n, args):
            print(line, flush=True)


if __name__ == "__main__":
    main()
