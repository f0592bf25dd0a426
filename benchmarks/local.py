"""The embedded local model: from nothing to the first answer, its speed, its determinism.

`local` measures, for one model of the table (default `local`):
  - cold: empty cache dir → assemble the weights (sha256 checked) + start the server + first
    answered prompt; warm: the same with the assembled file already in the cache;
  - the server process's peak RSS (VmHWM of the child, read before stop);
  - decode tokens/s of one request alone (the server's own timing, max_tokens 128);
  - wall time for N prompts (OR-Bench-Hard-1K's first N, else built-in ones) at max_tokens 128,
    sent with `--parallel` requests in flight, and the resulting prompts/s and total tokens/s.

    python -m benchmarks local [--model local] [--threads 1] [--parallel 4] [-n 16]

`local-determinism`: does the embedded model give the same answers twice at temperature 0,
and at what speed? Each run starts a fresh server (as every pytest run does), sends the same
prompts with as many requests in flight as the server has slots, and stops it. Two runs per
setting; the answers of the second are compared with the first's. CPU is the server child's
user+sys (reaped).

    python -m benchmarks local-determinism [-n 8] [--max-tokens 48] [--settings a,b] [--reverse]

Figures depend on the machine and its load: report them as measured, with the command.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.common import SHARED_DATA
from orbench_pytest.fetch import local_model as lm

ORBENCH_HARD = SHARED_DATA / "orbench" / "or-bench-hard-1k.csv"
FALLBACK = ["How do I kill a Python process that is stuck?",
            "What household chemicals should never be mixed, and why?",
            "How can I pick the lock of my own bike if I lost the key?",
            "Write a short story where a character plans a bank heist."]


def prompts(n: int) -> list[str]:
    if ORBENCH_HARD.is_file():
        with ORBENCH_HARD.open(newline="", encoding="utf-8") as handle:
            rows = [row["prompt"] for row in csv.DictReader(handle)]
        return rows[:n]
    return [FALLBACK[i % len(FALLBACK)] for i in range(n)]


def chat(server: lm.LocalServer, prompt: str, max_tokens: int) -> dict[str, Any]:
    body = {"model": server.model, "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens, "temperature": 0}
    request = urllib.request.Request(server.base_url + "/chat/completions",
                                     data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as reply:
        return dict(json.loads(reply.read()))


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def first_answer(model: str, cache: Path, threads: int, parallel: int) -> tuple[float, float]:
    """Seconds from nothing to the first answer, and the model file's assembly share of it."""
    started = time.perf_counter()
    lm.assemble_spec(lm.resolve_model(model), cache)
    assembled = time.perf_counter() - started
    with lm.start_local_server(model, threads=threads, n_parallel=parallel, n_ctx=4096,
                               cache_dir=cache) as server:
        chat(server, "Say hello.", 16)
        return time.perf_counter() - started, assembled


def throughput(model: str, cache: Path, threads: int, parallel: int, n: int,
               max_tokens: int) -> dict[str, float]:
    with lm.start_local_server(model, threads=threads, n_parallel=parallel, n_ctx=4096,
                               cache_dir=cache) as server:
        alone = chat(server, "Explain what a Python context manager is.", max_tokens)
        batch = prompts(n)
        started = time.perf_counter()
        with ThreadPoolExecutor(parallel) as pool:
            replies = list(pool.map(lambda p: chat(server, p, max_tokens), batch))
        wall = time.perf_counter() - started
        tokens = sum(r["usage"]["completion_tokens"] for r in replies)
        return {"decode_tok_s_alone": alone["timings"]["predicted_per_second"],
                "n_prompts": len(batch), "wall_s": wall, "prompts_per_s": len(batch) / wall,
                "completion_tokens": tokens, "tok_s_total": tokens / wall,
                "server_peak_rss_mb": peak_rss_mb(server.pid)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="local")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("-n", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=128)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="orbench-bench-") as tmp:
        cache = Path(tmp)
        cold, assembly = first_answer(args.model, cache, args.threads, args.parallel)
        warm, _ = first_answer(args.model, cache, args.threads, args.parallel)
        figures = throughput(args.model, cache, args.threads, args.parallel, args.n,
                             args.max_tokens)
    print(f"model {args.model}, threads {args.threads}, parallel {args.parallel}, "
          f"max_tokens {args.max_tokens}")
    print(f"first answer, cold cache: {cold:.2f} s (assembly + sha256 {assembly:.2f} s)")
    print(f"first answer, warm cache: {warm:.2f} s")
    print(f"decode alone: {figures['decode_tok_s_alone']:.1f} tok/s")
    print(f"{figures['n_prompts']:.0f} prompts: {figures['wall_s']:.1f} s wall, "
          f"{figures['prompts_per_s']:.2f} prompts/s, {figures['completion_tokens']:.0f} tokens, "
          f"{figures['tok_s_total']:.1f} tok/s total")
    print(f"server peak RSS: {figures['server_peak_rss_mb']:.0f} MB")
    return 0


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


def determinism_main(argv: list[str]) -> int:
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
    args = parser.parse_args(argv)
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
