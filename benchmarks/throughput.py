"""End-to-end speed of a run with the plugin against its floor, on the ready suites' rows.

Prompt sets: `1974`, OR-Bench-Hard-1K + Toxic (the ready suites over ../shared/data/orbench);
`80k`, the ready suite or-bench-80k over a synthetic 80,359-row or-bench-80k.csv made from the
Hard-1K prompts (the real file is not in ../shared/data). The endpoint is a local
OpenAI-compatible server in its own process (tests/openai_server.py, no sleeping unless
--latency): it refuses the Toxic prompts and answers the rest, so every item passes. It refuses
with one stock text (as models refuse: "I'm sorry, but I can't help with that.") and, by
default, answers every other prompt with one canned text too, so the offline judge, which
judges an answer once whatever prompt it answers unless its verdict depends on the prompt,
judges two answers in a cold run. `--distinct-answers`: each answered prompt gets its own
answer (the canned text restating the prompt, about 100-300 characters, no prompt-aware
shape), so the judge judges every one of them as a run against a real model does; shorter
than most real answers, so still a low estimate of judging.

Each of these is a fresh process, timed for wall and total CPU (user + sys of it and of every
process it waited for, from wait4), alternated within each repeat so load drifts hit all alike:
  item floor    pytest collecting the same CSV rows as no-op custom Items (a conftest,
                _common.ITEM_FLOOR_CONFTEST): the plugin's mechanism, nothing else
  client floor  a bare aiohttp loop sending the same N requests at the plugin's concurrency
                ceiling (64), bodies parsed, aiohttp's import included
  cold run      `pytest` with the plugin over the ready suites, a fresh answer cache
  cached rerun  the same command again: every answer from the cache, nothing sent
floor = item floor + client floor (a run does both jobs, one after the other).
Targets: cold run ≤ 1.15 × floor; cached rerun ≤ 1.05 × item floor. The verdicts are taken on
CPU (less sensitive to a loaded machine); wall ratios are shown beside them. The server's CPU is
shown apart (the same requests in floor and product). Other installed pytest plugins are off in
every run (PYTEST_DISABLE_PLUGIN_AUTOLOAD; the plugin by -p), so the floor is pytest alone.
Unless --no-idle, benchmarks/idle_cost.py follows (`pytest --version` with the plugin: ≤ 20 ms).

    python benchmarks/throughput.py --quick      # 1,974 prompts, 5 repeats, idle cost 7 repeats
    python benchmarks/throughput.py              # 1,974 and 80K prompts, 5 repeats each
    python benchmarks/throughput.py --sets 80k --repeat 7 --latency 0.3 --no-idle
    python benchmarks/throughput.py --quick --no-idle --distinct-answers
"""

from __future__ import annotations

import argparse
import csv
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from _common import (
    OR_BENCH_80K,
    PYTEST,
    SHARED_DATA,
    Run,
    ServerProcess,
    client_floor,
    item_floor,
    load,
    median,
    pytest_env,
    run_process,
    server_process,
    summary_counts,
)

DATA = SHARED_DATA / "orbench"
HARD, TOXIC, BIG = "or-bench-hard-1k.csv", "or-bench-toxic.csv", "or-bench-80k.csv"
CONCURRENCY = 64  # core/defaults.CONCURRENCY: the plugin's ceiling, the client floor's width
CPU_TARGET, RERUN_TARGET = 1.15, 1.05


@dataclass
class PromptSet:
    name: str
    csv_files: list[Path]  # in the data folder the plugin reads (--orbench-data-dir)
    suite_args: list[str]
    refused: Path | None  # the prompts the server refuses


def prompt_sets(root: Path, names: list[str], shared: Path) -> list[PromptSet]:
    if not all((shared / name).is_file() for name in (HARD, TOXIC)):
        raise SystemExit(f"needs {shared / HARD} and {shared / TOXIC} (../shared/data, see "
                         "its README); absent here")
    data = root / "data"
    data.mkdir()
    for name in (HARD, TOXIC):
        (data / name).symlink_to(shared.resolve() / name)
    sets = []
    if "1974" in names:
        sets.append(PromptSet("1974", [data / HARD, data / TOXIC],
                              ["--orbench-suite=or-bench-hard-1k",
                               "--orbench-suite=or-bench-toxic"], data / TOXIC))
    if "80k" in names:
        synthesise_80k(data / HARD, data / BIG)
        sets.append(PromptSet("80k", [data / BIG],
                              ["--orbench-suite=or-bench-80k", "--orbench-subset=all"], None))
    return sets


def synthesise_80k(hard: Path, out: Path) -> None:
    """80,359 distinct rows, each a Hard-1K prompt with a number, in its category."""
    with hard.open(newline="", encoding="utf-8") as handle:
        rows = [(row["prompt"], row["category"]) for row in csv.DictReader(handle)]
    with out.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["prompt", "category"])
        for index in range(OR_BENCH_80K):
            prompt, category = rows[index % len(rows)]
            writer.writerow([f"{prompt} ({index // len(rows)})", category])


@dataclass
class Timed:
    wall_s: float
    cpu_s: float
    server_cpu_s: float = 0.0
    load1: float = 0.0  # 1-minute load average when the run started


def timed_client_floor(server: ServerProcess, files: list[Path], load1: float) -> Timed:
    """Wall: import + loop, as the floor process times them; CPU: that process's whole rusage
    (RUSAGE_CHILDREN around it)."""
    server_cpu, start = server.cpu_seconds(), resource.getrusage(resource.RUSAGE_CHILDREN)
    floor = client_floor(server.url, CONCURRENCY, files)
    end = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = end.ru_utime - start.ru_utime + end.ru_stime - start.ru_stime
    return Timed(floor.total_s, cpu, server.cpu_seconds() - server_cpu, load1)


def measure(prompts: PromptSet, root: Path, args: argparse.Namespace) -> list[str]:
    env, _ = pytest_env(root)
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # pytest alone in the floor, plus ours below
    plugin = ["-p", "orbench_pytest.plugin.hooks"]
    # Two projects, each run from its own folder (a plain `pytest` collects the folder: the
    # product's must not collect the floor's conftest and CSV links).
    floor_dir = item_floor(root / f"floor-{prompts.name}", prompts.csv_files)
    product_dir = root / f"product-{prompts.name}"
    for folder in (floor_dir, product_dir):
        folder.mkdir(exist_ok=True)
        (folder / "pytest.ini").write_text("[pytest]\n")  # keep the repo's settings out
    floor_cmd = list(PYTEST)
    cache = root / f"cache-{prompts.name}.sqlite3"

    def product(url: str) -> list[str]:
        return [*PYTEST, *plugin, *prompts.suite_args, f"--orbench-data-dir={root / 'data'}",
                "--orbench-model=bench", f"--orbench-base-url={url}",
                f"--orbench-cache-path={cache}"]

    runs: dict[str, list[Timed]] = {"item": [], "client": [], "cold": [], "rerun": []}
    notes: list[str] = []
    last: dict[str, Run] = {}
    load_before = load()
    with server_process(args.latency, refuse=prompts.refused,
                        distinct_answers=args.distinct_answers) as server:
        # warm-up: bytecode written once, the server's first connections made
        run_process(floor_cmd, floor_dir, env)
        client_floor(server.url, CONCURRENCY, prompts.csv_files)
        warm = [arg for arg in product(server.url) if not arg.startswith("--orbench-subset")]
        run_process([*warm, "--orbench-subset=20", f"--orbench-cache-path={root / 'warm'}"],
                    product_dir, env)
        for _ in range(args.repeat):
            load1 = os.getloadavg()[0]
            done = run_process(floor_cmd, floor_dir, env)
            runs["item"].append(Timed(done.wall_s, done.cpu_s, 0.0, load1))
            last["item"] = done
            runs["client"].append(timed_client_floor(server, prompts.csv_files, load1))
            for file in cache.parent.glob(cache.name + "*"):
                file.unlink()
            for kind in ("cold", "rerun"):
                before, server_cpu = server.stats()["requests"], server.cpu_seconds()
                done = run_process(product(server.url), product_dir, env)
                runs[kind].append(Timed(done.wall_s, done.cpu_s,
                                        server.cpu_seconds() - server_cpu, load1))
                last[kind] = done
                sent = server.stats()["requests"] - before
                expected = sum(1 for _ in csv_rows(prompts.csv_files)) if kind == "cold" else 0
                if sent != expected:
                    notes.append(f"{kind} run sent {sent} requests, expected {expected}")
    counts = {kind: summary_counts(run.output).split(" in ")[0] for kind, run in last.items()}
    if len({counts["item"], counts["cold"], counts["rerun"]}) != 1:
        notes.append(f"outcomes differ: {counts}")

    cpu = {kind: median([t.cpu_s for t in timed]) for kind, timed in runs.items()}
    wall = {kind: median([t.wall_s for t in timed]) for kind, timed in runs.items()}
    server_cpu_by_kind = {kind: median([t.server_cpu_s for t in runs[kind]])
                          for kind in ("client", "cold")}
    floor_cpu, floor_wall = cpu["item"] + cpu["client"], wall["item"] + wall["client"]
    n = sum(1 for _ in csv_rows(prompts.csv_files))

    def row(label: str, kind: str) -> str:
        each = " ".join(f"{t.cpu_s:.2f}/{t.wall_s:.2f}" for t in runs[kind])
        return f"  {label:26} {cpu[kind]:7.2f} {wall[kind]:8.2f}   ({each})"

    def verdict(ratio: float, target: float) -> str:
        return f"{ratio:.2f} × (target ≤ {target}) → {'OK' if ratio <= target else 'MISSED'}"

    return [
        f"{n:,} prompts ({prompts.name}), concurrency {CONCURRENCY}, latency "
        f"{args.latency:g} s, {'distinct answers' if args.distinct_answers else 'one answer'}"
        f", medians of {args.repeat}; load (1/5/15 min) before: "
        f"{load_before}, after: {load()}; 1-min load at each repeat: "
        f"{', '.join(f'{t.load1:.1f}' for t in runs['item'])}",
        f"  {'':26} {'CPU s':>7} {'wall s':>8}   (each run: CPU/wall)",
        row("item floor (custom Items)", "item"),
        row("client floor (aiohttp)", "client"),
        f"  {'floor = item + client':26} {floor_cpu:7.2f} {floor_wall:8.2f}",
        row("cold run, plugin", "cold"),
        row("cached rerun, plugin", "rerun"),
        f"  cold / floor:        CPU {verdict(cpu['cold'] / floor_cpu, CPU_TARGET)};"
        f" wall {wall['cold'] / floor_wall:.2f} ×",
        f"  rerun / item floor:  CPU {verdict(cpu['rerun'] / cpu['item'], RERUN_TARGET)};"
        f" wall {wall['rerun'] / wall['item']:.2f} ×",
        f"  server CPU (median): {server_cpu_by_kind['client']:.2f} s for the client floor, "
        f"{server_cpu_by_kind['cold']:.2f} s for the cold run; outcomes: {counts['cold']}",
        *([f"  NOTE: {note}" for note in dict.fromkeys(notes)] or ["  checks: OK"]),
    ]


def csv_rows(files: list[Path]) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = []
    for path in files:
        with path.open(newline="", encoding="utf-8") as handle:
            rows += csv.DictReader(handle)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="1,974 prompts only, idle cost with 7 repeats")
    parser.add_argument("--sets", nargs="+", choices=["1974", "80k"], default=None)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.0, help="server latency, seconds")
    parser.add_argument("--no-idle", action="store_true", help="skip benchmarks/idle_cost.py")
    parser.add_argument("--distinct-answers", action="store_true",
                        help="each answered prompt its own answer (refusals: one stock text)")
    parser.add_argument("--data", type=Path, default=DATA,
                        help=f"folder of {HARD} and {TOXIC} (default: %(default)s)")
    args = parser.parse_args()
    names = args.sets or (["1974"] if args.quick else ["1974", "80k"])
    root = Path(tempfile.mkdtemp(prefix="orbench-throughput-"))
    try:
        for prompts in prompt_sets(root, names, args.data):
            for line in measure(prompts, root, args):
                print(line, flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if not args.no_idle:
        print("idle cost (benchmarks/idle_cost.py):", flush=True)
        subprocess.run([sys.executable, str(Path(__file__).with_name("idle_cost.py")),
                        "--repeat", "7" if args.quick else "21"], check=True)


if __name__ == "__main__":
    main()
