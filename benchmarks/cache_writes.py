"""What writing the answers costs a fetch: one commit a loop turn against one an interval.

The fetch engine alone (no judge: the sink `orbench generate` uses) asks --prompts prompts of
the local OpenAI-compatible server (benchmarks/_common.py, its own process, no latency unless
--latency) and writes each answer to a fresh cache. For each commit interval (0: a write at the
end of every loop turn the answers arrive in) a fresh process runs the fetch; printed: its total
CPU, the CPU and count of its writes (timed inside the writer), medians of --repeat, the
intervals alternated within each repeat.

    python benchmarks/cache_writes.py [--prompts 20000] [--repeat 3] [--intervals 0,0.05]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO, median, server_process

sys.path.insert(0, str(REPO))


def fetch_once(url: str, prompts: int, interval: float) -> dict[str, float]:
    """One fetch in this process; what it cost."""
    from orbench_pytest.fetch.cache import ResponseCache, cache_key
    from orbench_pytest.fetch.engine import (
        CacheWriter,
        FetchEngine,
        FetchSettings,
        Job,
        Unjudged,
        request_layer,
        run_in_new_loop,
    )
    from orbench_pytest.fetch.targets import GenerationParams, OpenAICompatibleTarget

    class TimedWriter(CacheWriter):
        cpu_s = 0.0
        writes = 0

        def flush(self, *, final: bool = False) -> None:
            started = time.thread_time()
            try:
                super().flush(final=final)
            finally:
                self.cpu_s += time.thread_time() - started
                self.writes += 1

    started = time.process_time()
    settings = FetchSettings(concurrency=64)
    requests = request_layer(settings)
    with tempfile.TemporaryDirectory() as folder:
        cache = ResponseCache(Path(folder) / "cache.sqlite3")
        writer = TimedWriter(cache, requests, interval)
        target = OpenAICompatibleTarget(url, "bench", None, GenerationParams(), 64)
        engine = FetchEngine(target, cache, settings, requests, writer)
        sink = Unjudged()
        jobs = [Job(cache_key({"bench": interval}, None, f"prompt {i}"), f"prompt {i}", None)
                for i in range(prompts)]
        run_in_new_loop(lambda: engine.run(jobs, sink, {}))
        stored = len(cache.get_many([job.key for job in jobs]))
        cache.close()
    if sink.errors or stored != prompts:
        raise SystemExit(f"{len(sink.errors)} errors, {stored} of {prompts} stored")
    return {"cpu_s": time.process_time() - started, "write_cpu_s": writer.cpu_s,
            "writes": writer.writes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--intervals", default="0,0.05", help="commit intervals, seconds")
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--once", nargs=2, metavar=("URL", "INTERVAL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.once:
        print(json.dumps(fetch_once(args.once[0], args.prompts, float(args.once[1]))))
        return
    intervals = [float(x) for x in args.intervals.split(",")]
    results: dict[float, list[dict[str, float]]] = {i: [] for i in intervals}
    with server_process(args.latency) as server:
        for _ in range(args.repeat):
            for interval in intervals:
                done = subprocess.run(
                    [sys.executable, __file__, "--prompts", str(args.prompts),
                     "--once", server.url, str(interval)],
                    capture_output=True, text=True, check=True)
                results[interval].append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"{args.prompts:,} prompts, latency {args.latency:g} s, medians of {args.repeat}:")
    for interval, runs in results.items():
        print(f"  interval {interval:g} s: fetch CPU {median([r['cpu_s'] for r in runs]):.2f} s,"
              f" writing {median([r['write_cpu_s'] for r in runs]):.3f} s in"
              f" {median([r['writes'] for r in runs]):.0f} writes")


if __name__ == "__main__":
    main()
