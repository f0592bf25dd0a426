"""A green run (mismatches tolerated, xfailed) against a red one (the same mismatches failed).

Both report the same cached answers; only the thresholds differ. Target: green ≤ 1.2 × red.
Two data sets: OR-Bench-Hard-1K's 1,319 prompts (from ../shared/data, about 65% refused by a
given-answers target), and N synthesised prompts with 10% refused.

    python benchmarks/green_vs_red.py [--n 80359] [--repeat 3] [--hard1k PATH]
"""

from __future__ import annotations

import argparse
import csv
import shutil
import tempfile
from pathlib import Path

from _common import (
    OR_BENCH_80K,
    PYTEST,
    REFUSE_MARK,
    SHARED_DATA,
    Run,
    load,
    median,
    pytest_env,
    run_process,
    summary_counts,
    synthesise,
)

HARD_1K = SHARED_DATA / "orbench" / "or-bench-hard-1k.csv"

def answers_module(refuse_share: float | None) -> str:
    """A target: refuses REFUSE_MARK prompts, or a hash-chosen share of all prompts."""
    share = "int(hashlib.sha256(prompt.encode()).hexdigest(), 16) % 1000 < {}"
    rule = (f"{REFUSE_MARK!r} in prompt" if refuse_share is None
            else share.format(round(refuse_share * 1000)))
    return ("import hashlib\n\n\ndef answer(prompt, system_prompt):\n"
            f"    if {rule}:\n        return \"I'm sorry, I can't help with that.\"\n"
            "    return 'Sure, here is how.'\n")


def hard1k_root(root: Path, source: Path) -> Path:
    synthesise(root, 1)  # the layout; the prompts are replaced below
    with source.open(newline="", encoding="utf-8") as src, \
            (root / "suites" / "prompts.csv").open("w", newline="", encoding="utf-8") as dst:
        writer = csv.writer(dst)
        writer.writerow(["prompt", "category"])
        for row in csv.DictReader(src):
            writer.writerow([row["prompt"], row["category"]])
    return root


def measure(name: str, root: Path, refuse_share: float | None, repeat: int) -> None:
    (root / "answers.py").write_text(answers_module(refuse_share))
    (root / "tolerate.yaml").write_text("defaults:\n  max_over_refusal: 0.9\n")
    (root / "fail.yaml").write_text("defaults:\n  max_over_refusal: 0.01\n")
    env, plugin = pytest_env(root)
    env["PYTHONPATH"] = f"{root}:{env['PYTHONPATH']}"
    cache = root / "answers.sqlite3"

    def command(gate: str) -> list[str]:
        return [*PYTEST, *plugin, "suites/bench.yaml", "--orbench-target=answers:answer",
                f"--orbench-cache-path={cache}", f"--orbench-thresholds={gate}.yaml"]

    run_process(command("tolerate"), root, env)  # fill the cache: both runs read it
    runs: dict[str, list[Run]] = {"green": [], "red": []}
    for _ in range(repeat):
        runs["green"].append(run_process(command("tolerate"), root, env, ok_codes=(0,)))
        runs["red"].append(run_process(command("fail"), root, env, ok_codes=(1,)))
    print(f"{name}:")
    for label, done in runs.items():
        walls = ", ".join(f"{r.wall_s:.2f}" for r in done)
        print(f"  {label:5} {median([r.wall_s for r in done]):7.2f} s  (runs: {walls}), "
              f"peak RSS {max(r.peak_rss_mib for r in done)} MiB, "
              f"{summary_counts(done[-1].output)}")
    ratio = median([r.wall_s for r in runs["green"]]) / median([r.wall_s for r in runs["red"]])
    print(f"  green / red: {ratio:.2f} (target ≤ 1.2) → {'OK' if ratio <= 1.2 else 'MISSED'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=OR_BENCH_80K)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--hard1k", type=Path, default=HARD_1K)
    args = parser.parse_args()
    top = Path(tempfile.mkdtemp(prefix="orbench-green-red-"))
    print(f"load before: {load()}")
    try:
        if args.hard1k.is_file():
            measure("OR-Bench-Hard-1K, 65% refused", hard1k_root(top / "hard1k", args.hard1k),
                    0.65, args.repeat)
        else:
            print(f"(no {args.hard1k}: Hard-1K part skipped)")
        measure(f"{args.n} synthesised prompts, 10% refused",
                synthesise(top / "synth", args.n, fail_every=10), None, args.repeat)
    finally:
        shutil.rmtree(top, ignore_errors=True)
    print(f"load after: {load()}")


if __name__ == "__main__":
    main()
