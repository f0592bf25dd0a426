"""End-to-end speed of a run with the plugin against its floor, and what its speed-ups are worth.

`throughput`: prompt sets `1974`, OR-Bench-Hard-1K + Toxic (the ready suites over the shared
data's orbench folder), and `80k`, the ready suite or-bench-80k over a synthetic 80,359-row
or-bench-80k.csv made from the Hard-1K prompts (`--prompts N`: N such rows instead). The
endpoint is a local OpenAI-compatible server in its own process (no sleeping unless
--latency); it refuses the Toxic prompts and answers the rest. `--answers distinct` (the
default): each prompt gets its own real answer, people's labelled answers of nine models
(common.real_answers: a compliance where answered, a refusal where refused), so the judge
judges every answer as against a real model. `--answers canned`: one canned answer and one
stock refusal, which the judge judges once each.

Each of these is a fresh process, timed for wall and total CPU (user + sys of it and of every
process it waited for), alternated within each repeat so load drifts hit all alike:
  item floor    pytest collecting the same CSV rows as no-op custom Items (a conftest,
                common.ITEM_FLOOR_CONFTEST): the plugin's mechanism, nothing else
  client floor  a bare aiohttp loop sending the same N requests at the plugin's concurrency
                ceiling (64), bodies parsed, aiohttp's import included
  cold run      `pytest` with the plugin over the ready suites, a fresh answer cache
  cached rerun  the same command again: every answer from the cache, nothing sent
floor = item floor + client floor (a run does both jobs, one after the other). Other installed
pytest plugins are off in every run (the plugin by -p), so the floor is pytest alone.

`residue`: what a user waits and holds with a speed-up and without it: a cold run (fresh
cache) then a cached rerun of `--prompts` synthetic prompts (default 80,359) against
`--latency` (default 0.3 s), as shipped and with each `--variant` (VARIANTS: the same pytest,
started by a line that undoes a speed-up first, or with the heap frozen as the plugin did until
issue 45), alternated within each repeat; wall time, CPU and the pytest process's peak RSS.

    python -m benchmarks throughput --sets 1974 --repeat 5
    python -m benchmarks throughput --sets 1974 80k --repeat 3 --answers canned
    python -m benchmarks residue --prompts 80359 --latency 0.3 --repeat 1 --variant freeze
"""

from __future__ import annotations

import argparse
import csv
import os
import resource
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common import (
    OR_BENCH_80K,
    PYTEST,
    SHARED_DATA,
    SUITE_YAML,
    ServerProcess,
    client_floor,
    csv_rows,
    item_floor,
    load,
    median,
    pytest_env,
    run_process,
    server_process,
    summary_counts,
)

HARD, TOXIC, BIG = "or-bench-hard-1k.csv", "or-bench-toxic.csv", "or-bench-80k.csv"
CONCURRENCY = 64  # core/defaults.CONCURRENCY: the plugin's ceiling, the client floor's width
# residue's variants: a line run before pytest starts (`python -c`), or a plugin of benchmarks/.
VARIANTS = {
    "freeze": "-p benchmarks.freeze",  # the heap frozen for the cyclic collector (freeze.py)
    "unbatched": ("import orbench_pytest.judges.stage as stage; "  # each answer judged at once
                  "stage.BATCH_ANSWERS = 1"),
}


@dataclass
class PromptSet:
    name: str
    csv_files: list[Path]  # in the data folder the plugin reads (--orbench-data-dir)
    suite_args: list[str]
    refused: Path | None  # the prompts the server refuses


def prompt_sets(root: Path, names: list[str], shared: Path, rows: int) -> list[PromptSet]:
    if not all((shared / name).is_file() for name in (HARD, TOXIC)):
        raise SystemExit(f"needs {shared / HARD} and {shared / TOXIC} (../shared/data, or set "
                         "ORBENCH_SHARED_DATA); absent here")
    data = root / "data"
    data.mkdir()
    for name in (HARD, TOXIC):
        (data / name).symlink_to(shared.resolve() / name)
    sets = []
    if "1974" in names:
        sets.append(PromptSet("1974", [data / HARD, data / TOXIC],
                              ["--orbench-suite=or-bench-hard-1k",
                               "--orbench-suite=or-bench-toxic"], data / TOXIC))
    if "80k" in names and rows == OR_BENCH_80K:
        synthesise(data / HARD, data / BIG, rows)
        sets.append(PromptSet("80k", [data / BIG],
                              ["--orbench-suite=or-bench-80k", "--orbench-subset=all"], None))
    elif "80k" in names:  # the ready suite pins its 80,359 rows: a suite file of the same shape
        synthesise(data / HARD, data / "prompts.csv", rows)
        (data / "bench.yaml").write_text(SUITE_YAML)
        sets.append(PromptSet(f"{rows:,}", [data / "prompts.csv"], [str(data / "bench.yaml")],
                              None))
    return sets


def synthesise(hard: Path, out: Path, n: int) -> None:
    """n distinct rows, each a Hard-1K prompt with a number, in its category."""
    rows = [(row["prompt"], row["category"]) for row in csv_rows([hard])]
    with out.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["prompt", "category"])
        for index in range(n):
            prompt, category = rows[index % len(rows)]
            writer.writerow([f"{prompt} ({index // len(rows)})", category])


@dataclass
class Timed:
    wall_s: float
    cpu_s: float
    server_cpu_s: float = 0.0
    load1: float = 0.0  # 1-minute load average when the run started
    peak_rss_mib: int = 0


def timed_client_floor(server: ServerProcess, files: list[Path], load1: float) -> Timed:
    """Wall: import + loop, as the floor process times them; CPU: that process's whole rusage
    (RUSAGE_CHILDREN around it)."""
    server_cpu, start = server.cpu_seconds(), resource.getrusage(resource.RUSAGE_CHILDREN)
    floor = client_floor(server.url, CONCURRENCY, files)
    end = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = end.ru_utime - start.ru_utime + end.ru_stime - start.ru_stime
    return Timed(floor.total_s, cpu, server.cpu_seconds() - server_cpu, load1)


class Project:
    """A folder of its own for the plugin's runs (a plain `pytest` collects the folder), the
    command, and the environment: the checkout's plugin, other plugins off."""

    def __init__(self, root: Path, prompts: PromptSet) -> None:
        self.root, self.prompts = root, prompts
        self.folder = root / f"product-{prompts.name}"
        self.folder.mkdir(exist_ok=True)
        (self.folder / "pytest.ini").write_text("[pytest]\n")  # keep the repo's settings out
        self.env, _ = pytest_env(root)
        self.env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # pytest alone, plus ours below
        self.cache = root / f"cache-{prompts.name}.sqlite3"

    def command(self, url: str, *extra: str) -> list[str]:
        return [*PYTEST, "-p", "orbench_pytest.plugin.hooks", *self.prompts.suite_args,
                f"--orbench-data-dir={self.root / 'data'}", "--orbench-model=bench",
                f"--orbench-base-url={url}", f"--orbench-cache-path={self.cache}", *extra]

    def fresh_cache(self) -> None:
        for file in self.cache.parent.glob(self.cache.name + "*"):
            file.unlink()

    def warm_up(self, url: str) -> None:
        """Bytecode written once, the server's first connections made."""
        warm = [arg for arg in self.command(url) if not arg.startswith("--orbench-subset")]
        run_process([*warm, "--orbench-subset=20", f"--orbench-cache-path={self.root / 'warm'}"],
                    self.folder, self.env, ok_codes=(0, 1))


def measure(prompts: PromptSet, root: Path, args: argparse.Namespace) -> list[str]:
    project = Project(root, prompts)
    floor_dir = item_floor(root / f"floor-{prompts.name}", prompts.csv_files)
    (floor_dir / "pytest.ini").write_text("[pytest]\n")
    runs: dict[str, list[Timed]] = {"item": [], "client": [], "cold": [], "rerun": []}
    notes: list[str] = []
    counts: dict[str, str] = {}
    n = len(csv_rows(prompts.csv_files))
    load_before = load()
    real = prompts.csv_files if args.answers == "distinct" else None
    with server_process(args.latency, refuse=prompts.refused, real=real) as server:
        run_process(PYTEST, floor_dir, project.env)
        client_floor(server.url, CONCURRENCY, prompts.csv_files)
        project.warm_up(server.url)
        for _ in range(args.repeat):
            load1 = os.getloadavg()[0]
            done = run_process(PYTEST, floor_dir, project.env)
            runs["item"].append(Timed(done.wall_s, done.cpu_s, 0.0, load1))
            counts["item"] = summary_counts(done.output).split(" in ")[0]
            runs["client"].append(timed_client_floor(server, prompts.csv_files, load1))
            project.fresh_cache()
            for kind in ("cold", "rerun"):
                before, server_cpu = server.stats()["requests"], server.cpu_seconds()
                # Exit 1 is a gate that failed: real answers the judge reads otherwise than
                # people did (shown in the outcomes).
                done = run_process(project.command(server.url), project.folder, project.env,
                                   ok_codes=(0, 1))
                runs[kind].append(Timed(done.wall_s, done.cpu_s,
                                        server.cpu_seconds() - server_cpu, load1))
                counts[kind] = summary_counts(done.output).split(" in ")[0]
                sent = server.stats()["requests"] - before
                if sent != (n if kind == "cold" else 0):
                    notes.append(f"{kind} run sent {sent} requests, expected "
                                 f"{n if kind == 'cold' else 0}")
    if counts["cold"] != counts["rerun"]:
        notes.append(f"the rerun's outcomes differ from the cold run's: {counts}")

    cpu = {kind: median([t.cpu_s for t in timed]) for kind, timed in runs.items()}
    wall = {kind: median([t.wall_s for t in timed]) for kind, timed in runs.items()}
    served = {kind: median([t.server_cpu_s for t in runs[kind]]) for kind in ("client", "cold")}
    floor_cpu, floor_wall = cpu["item"] + cpu["client"], wall["item"] + wall["client"]

    def row(label: str, kind: str) -> str:
        each = " ".join(f"{t.cpu_s:.2f}/{t.wall_s:.2f}" for t in runs[kind])
        return f"  {label:26} {cpu[kind]:7.2f} {wall[kind]:8.2f}   ({each})"

    return [
        f"{n:,} prompts ({prompts.name}), concurrency {CONCURRENCY}, latency "
        f"{args.latency:g} s, {args.answers} answers, medians of {args.repeat}; load "
        f"(1/5/15 min) before: {load_before}, after: {load()}; 1-min load at each repeat: "
        f"{', '.join(f'{t.load1:.1f}' for t in runs['item'])}",
        f"  {'':26} {'CPU s':>7} {'wall s':>8}   (each run: CPU/wall)",
        row("item floor (custom Items)", "item"),
        row("client floor (aiohttp)", "client"),
        f"  {'floor = item + client':26} {floor_cpu:7.2f} {floor_wall:8.2f}",
        row("cold run, plugin", "cold"),
        row("cached rerun, plugin", "rerun"),
        f"  cold / floor:       CPU {cpu['cold'] / floor_cpu:.2f} ×, "
        f"wall {wall['cold'] / floor_wall:.2f} ×",
        f"  rerun / item floor: CPU {cpu['rerun'] / cpu['item']:.2f} ×, "
        f"wall {wall['rerun'] / wall['item']:.2f} ×",
        f"  server CPU (median): {served['client']:.2f} s for the client floor, "
        f"{served['cold']:.2f} s for the cold run; outcomes: cold {counts['cold']}; "
        f"item floor {counts['item']}",
        *([f"  NOTE: {note}" for note in dict.fromkeys(notes)] or ["  checks: OK"]),
    ]


def measure_residue(prompts: PromptSet, root: Path, args: argparse.Namespace) -> list[str]:
    project = Project(root, prompts)
    labels = ["as shipped", *(args.variant or VARIANTS)]
    runs: dict[tuple[str, str], list[Timed]] = {(label, kind): [] for label in labels
                                                for kind in ("cold", "rerun")}
    real = prompts.csv_files if args.answers == "distinct" else None
    with server_process(args.latency, refuse=prompts.refused, real=real) as server:
        project.warm_up(server.url)
        for _ in range(args.repeat):
            for label in labels:
                command = project.command(server.url)
                variant = VARIANTS.get(label, "")
                if variant.startswith("-p "):
                    command = [*command[:3], *variant.split(), *command[3:]]
                elif variant:  # the same command, started by the variant's line
                    start = f"{variant}; import sys, pytest; sys.exit(pytest.main())"
                    command = [command[0], "-c", start, *command[3:]]
                project.fresh_cache()
                for kind in ("cold", "rerun"):
                    load1 = os.getloadavg()[0]
                    done = run_process(command, project.folder, project.env, ok_codes=(0, 1))
                    runs[(label, kind)].append(Timed(done.wall_s, done.cpu_s, 0.0, load1,
                                                     done.peak_rss_mib))
    n = len(csv_rows(prompts.csv_files))
    lines = [f"{n:,} prompts, latency {args.latency:g} s, {args.answers} answers, medians of "
             f"{args.repeat} (alternated)",
             f"  {'':28} {'wall s':>8} {'CPU s':>7} {'peak RSS MiB':>13}   (1-min load)"]
    for (label, kind), timed in runs.items():
        lines.append(f"  {f'{label}, {kind}':28} {median([t.wall_s for t in timed]):8.1f} "
                     f"{median([t.cpu_s for t in timed]):7.2f} "
                     f"{median([t.peak_rss_mib for t in timed]):13.0f}   "
                     f"({', '.join(f'{t.load1:.1f}' for t in timed)})")
    return lines


def parser_for(doc: str, residue: bool) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=doc)
    parser.add_argument("--repeat", type=int, default=1 if residue else 5)
    parser.add_argument("--latency", type=float, default=0.3 if residue else 0.0,
                        help="server latency, seconds")
    parser.add_argument("--answers", choices=["distinct", "canned"], default="distinct",
                        help="each prompt its own real answer, or one canned text")
    parser.add_argument("--data", type=Path, default=SHARED_DATA / "orbench",
                        help=f"folder of {HARD} and {TOXIC} (default: %(default)s)")
    if residue:
        parser.add_argument("--variant", choices=list(VARIANTS), action="append",
                            help="beside the run as shipped (repeatable; default: each)")
    else:
        parser.add_argument("--sets", nargs="+", choices=["1974", "80k"], default=["1974"])
    parser.add_argument("--prompts", type=int, default=OR_BENCH_80K,
                        help="rows of the synthetic set (80k; default %(default)s)")
    return parser


def run(argv: list[str], residue: bool) -> None:
    args = parser_for(__doc__.split("\n\n")[0], residue).parse_args(argv)
    # --prompts alone (the tiny run) asks for the synthetic set of that size
    names = ["80k"] if residue or ("--prompts" in argv and "--sets" not in argv) else args.sets
    root = Path(tempfile.mkdtemp(prefix="orbench-throughput-"))
    try:
        for prompts in prompt_sets(root, names, args.data, args.prompts):
            for line in (measure_residue if residue else measure)(prompts, root, args):
                print(line, flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str]) -> None:
    run(argv, residue=False)


def residue_main(argv: list[str]) -> None:
    run(argv, residue=True)
