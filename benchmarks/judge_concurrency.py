"""An LLM judge as slow as the target: does judging hold back the fetch?

N prompts (default 200) through `pytest` with this plugin and `--orbench-judge=llm`, against
two local servers answering in --latency seconds each (default 0.3): the target, and a judge
model replying with a JSON verdict. Fixed concurrency (--orbench-fixed-concurrency) at
--concurrency (default 4), so the figures do not depend on how far the adaptive limit grows.
For each judge limit in --judge-concurrency (repeatable; "default" sends no option, as a
checkout without --orbench-judge-concurrency needs) it prints the wall time of the run and
the most requests each server had in flight at once.

    python -m benchmarks judge-concurrency [--prompts 200] [--latency 0.3] [--concurrency 4]
                                           [--judge-concurrency default] [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.common import (
    PYTEST,
    load,
    median,
    pytest_env,
    run_process,
    summary_counts,
    synthesise,
)
from tests.openai_server import OpenAIServer, Reply


def judge_reply(prompt: str, system: str | None, body: dict[str, Any]) -> Reply:
    return Reply(text=json.dumps({"verdict": "direct_answer", "reason": "benchmark"}))


def command(plugin: list[str], target: str, judge: str, cache: Path, concurrency: int,
            judge_limit: str) -> list[str]:
    limit = [] if judge_limit == "default" else [f"--orbench-judge-concurrency={judge_limit}"]
    return [*PYTEST, *plugin, "suites/bench.yaml", "--orbench-model=bench",
            f"--orbench-base-url={target}", f"--orbench-cache-path={cache}",
            "--orbench-cache=off", f"--orbench-concurrency={concurrency}",
            "--orbench-fixed-concurrency", "--orbench-judge=llm",
            "--orbench-judge-model=judge", f"--orbench-judge-base-url={judge}", *limit]


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--judge-concurrency", action="append", default=None,
                        help='a judge limit to run with, or "default" (repeatable)')
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="orbench-judge-concurrency-"))
    try:
        synthesise(root, args.prompts)
        env, plugin = pytest_env(root)
        print(f"{args.prompts} prompts, target and judge {args.latency:g} s each, "
              f"--orbench-concurrency={args.concurrency} (fixed), load before: {load()}",
              flush=True)
        for judge_limit in args.judge_concurrency or ["default"]:
            walls: list[float] = []
            for _ in range(args.repeat):
                with OpenAIServer(latency_s=args.latency) as target, \
                        OpenAIServer(judge_reply, latency_s=args.latency) as judge:
                    run = run_process(command(plugin, target.url, judge.url,
                                              root / "c.sqlite3", args.concurrency,
                                              judge_limit), root, env, (0, 1))
                    walls.append(run.wall_s)
                    if judge.requests != args.prompts:
                        raise SystemExit(f"the judge was asked {judge.requests} times, not "
                                         f"{args.prompts}:\n{run.output[-2000:]}")
            print(f"  judge limit {judge_limit:>7}: {median(walls):6.2f} s (runs: "
                  f"{', '.join(f'{w:.2f}' for w in walls)}), max in flight: target "
                  f"{target.max_in_flight}, judge {judge.max_in_flight}  "
                  f"{summary_counts(run.output)}", flush=True)
        print(f"  load after: {load()}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
