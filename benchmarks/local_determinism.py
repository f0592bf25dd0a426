"""Does the embedded model give the same answers twice at temperature 0, and at what speed?

Each run starts a fresh server (as every pytest run does), sends the same prompts with as many
requests in flight as the server has slots, and stops it. Two runs per setting; the answers of
the second are compared with the first's. CPU is the server child's user+sys (reaped).

    python benchmarks/local_determinism.py [-n 8] [--max-tokens 48] [--settings a,b] [--reverse]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from local_model import chat, prompts  # noqa: E402

from orbench_pytest.fetch import local_model as lm  # noqa: E402

# name → (slots, prompt reuse, other llama.cpp settings). "before" is how the plugin started
# the server until the determinism fix; the others isolate one cause each.
SETTINGS: dict[str, tuple[int, bool, dict[str, Any]]] = {
    "before": (4, True, {}),
    "4slots-noreuse": (4, False, {}),
    "1slot": (1, True, {}),
    "1slot-noreuse": (1, False, {}),  # the plugin's server now
}


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_run(cache: Path, slots: int, reuse: bool, tuning: dict[str, Any], batch: list[str],
            max_tokens: int, threads: int) -> tuple[list[str], float, float, int]:
    cpu = children_cpu()
    started = time.perf_counter()
    with lm.start_local_server("local", threads=threads, n_parallel=slots, n_ctx=4096,
                               cache_dir=cache, reuse_prompts=reuse, tuning=tuning) as server:
        with ThreadPoolExecutor(slots) as pool:
            replies = list(pool.map(lambda p: chat(server, p, max_tokens), batch))
    wall = time.perf_counter() - started
    answers = [r["choices"][0]["message"]["content"] for r in replies]
    tokens = sum(r["usage"]["completion_tokens"] for r in replies)
    return answers, wall, children_cpu() - cpu, tokens


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--settings", default=",".join(SETTINGS))
    parser.add_argument("--reverse", action="store_true",
                        help="ask in reverse order in every other run")
    parser.add_argument("--suite", help="take the prompts from this suite file (its first n)")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    if args.suite:
        import yaml

        batch = [row["prompt"] for row in yaml.safe_load(Path(args.suite).read_text())["prompts"]]
        batch = batch[:args.n]
    else:
        batch = prompts(args.n)
    figures = []
    cache = Path(os.environ.get("ORBENCH_CACHE_DIR") or tempfile.mkdtemp(prefix="orbench-det-"))
    for name in args.settings.split(","):
        slots, reuse, tuning = SETTINGS[name]
        runs = []
        for k in range(args.runs):
            # --reverse: every other run asks in the opposite order (another selection, a cache
            # that already holds some answers, xdist): an answer must not depend on the order.
            order = batch[::-1] if args.reverse and k % 2 else batch
            answers, wall, cpu, tokens = one_run(cache, slots, reuse, tuning, order,
                                                 args.max_tokens, args.threads)
            by_prompt = dict(zip(order, answers, strict=True))
            runs.append(([by_prompt[p] for p in batch], wall, cpu, tokens))
        first = runs[0][0]
        changed = [sum(a != b for a, b in zip(first, run[0], strict=True)) for run in runs[1:]]
        walls = sorted(run[1] for run in runs)
        cpus = sorted(run[2] for run in runs)
        row = {"setting": name, "slots": slots, "prompts": len(batch),
               "changed_vs_first": changed, "wall_s": walls, "cpu_s": cpus,
               "completion_tokens": [run[3] for run in runs]}
        figures.append(row)
        print(f"{name:16s} answers changed vs run 1: {changed}  "
              f"wall s {[round(w, 1) for w in walls]}  cpu s {[round(c, 1) for c in cpus]}  "
              f"tokens {row['completion_tokens']}",
              flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
