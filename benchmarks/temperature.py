"""The OR-Bench paper's temperature analysis on the embedded model, with --orbench-samples.

40 prompts (20 of OR-Bench-Hard-1K, safe but seemingly toxic; 20 of OR-Bench-Toxic), drawn with
a fixed seed, each asked 5 times at temperature 0, 0.5 and 1.0, through the same run engine the
plugin uses (samples keyed apart in the response cache, so an interrupted run resumes). Per
setting: the mean per-prompt refusal rate on each set (Hard-1K's is the over-refusal; Toxic's
the refusal of toxic prompts) with its clustered 95% interval, prompts refused by the default
rule (refuse_at 0.5), and the flaky prompts (refused sometimes).

    python -m benchmarks temperature [--samples 5] [--per-set 20] [--max-tokens 64]
        [--threads 2] [--temperatures 0 0.5 1.0] [--cache-path PATH]

The embedded model runs on the CPU (~20 tokens/s on 2 shared cores): expect about half an hour
with the defaults. Figures depend on the machine and its load: report them with the command.
"""

from __future__ import annotations

import argparse
import csv
import random
import time
from pathlib import Path

from benchmarks.common import SHARED_DATA
from orbench_pytest.config.settings import Variant, build_settings
from orbench_pytest.core.defaults import default_cache_dir
from orbench_pytest.core.types import Expectation, PromptCase
from orbench_pytest.gate.decision import OVER_REFUSAL, TOXIC_ACCEPTANCE
from orbench_pytest.gate.thresholds import BUILT_IN
from orbench_pytest.run.runner import Selected, run_selected

DATA = SHARED_DATA / "orbench"
SETS: tuple[tuple[str, Expectation], ...] = (("or-bench-hard-1k", "comply"),
                                             ("or-bench-toxic", "refuse"))
SEED = 17


def draw(per_set: int) -> list[Selected]:
    """A fixed-seed draw of each set's rows, as items of two suites."""
    selected = []
    for suite, expect in SETS:
        with (DATA / f"{suite}.csv").open(newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
        picked = sorted(random.Random(SEED).sample(range(len(rows)), per_set))
        for index in picked:
            row = rows[index]
            case = PromptCase(suite, f"{row['category']}-{index:04d}", row["prompt"], expect,
                              row["category"])
            selected.append(Selected(f"{suite}::{case.case_id}", case, Variant("", None)))
    return selected


def measure(selected: list[Selected], temperature: float, args: argparse.Namespace) -> None:
    settings = build_settings({
        "orbench_model": "local", "orbench_temperature": temperature,
        "orbench_samples": args.samples, "orbench_max_tokens": args.max_tokens,
        "orbench_local_threads": args.threads, "orbench_concurrency": 4,
        "orbench_cache_path": str(args.cache_path), "orbench_timeout": args.timeout,
    })
    started = time.perf_counter()
    def progress(done: int, total: int, errors: int, concurrency: int) -> None:
        if done % 20 == 0 or done == total:
            print(f"  … {done}/{total} answers, {errors} errors, "
                  f"{time.perf_counter() - started:.0f}s", flush=True)

    run = run_selected(selected, settings, BUILT_IN, cache=_cache(args.cache_path),
                       progress=progress)
    wall = time.perf_counter() - started
    report, verdicts = run.report, run.verdicts
    print(f"temperature {temperature:g}: {len(verdicts.answers)} answers "
          f"({report.cache_hits} from cache, {report.requests} requests, "
          f"{len(verdicts.errors)} errors), {wall:.0f}s", flush=True)
    if report.stopped_reason or report.retry_reasons:
        print(f"  stopped: {report.stopped_reason}; failed attempts: {report.retry_reasons}")
    for suite, expect in SETS:
        row = run.gate.rows[(suite, "", None)]
        name = OVER_REFUSAL if expect == "comply" else TOXIC_ACCEPTANCE
        check = row.check(name)
        if check is None or check.rate is None:
            print(f"  {suite}: no answered prompt")
            continue
        low, high = check.interval
        refusal, low, high = ((check.rate, low, high) if expect == "comply"
                              else (1 - check.rate, 1 - high, 1 - low))
        flaky = [s for s in selected if s.case.suite == suite and run.states[s.nodeid].result.flaky]
        print(f"  {suite:<17} refusal rate {refusal * 100:5.1f}% [{low * 100:.1f}–"
              f"{high * 100:.1f}]  refused (refuse_at 0.5): {row.refusals}/{row.n - row.errors}"
              f"  flaky: {len(flaky)}  errors: {row.errors}")
        for s in flaky:
            result = run.states[s.nodeid].result
            print(f"    {s.case.case_id}: refused {result.refusals} of {result.answered} times",
                  flush=True)


_CACHES: dict[Path, object] = {}


def _cache(path: Path):  # type: ignore[no-untyped-def]
    from orbench_pytest.fetch.cache import ResponseCache

    if path not in _CACHES:
        _CACHES[path] = ResponseCache(path)
    return _CACHES[path]


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--per-set", type=int, default=20)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="seconds per request: generous, the CPU is shared")
    parser.add_argument("--temperatures", type=float, nargs="+", default=[0.0, 0.5, 1.0])
    parser.add_argument("--cache-path", type=Path,
                        default=default_cache_dir() / "temperature-benchmark.sqlite3",
                        help="the answers, kept between runs (default: in the cache folder, "
                             "$ORBENCH_CACHE_DIR)")
    args = parser.parse_args(argv)
    selected = draw(args.per_set)
    print(f"{len(selected)} prompts × {args.samples} samples, max_tokens {args.max_tokens}, "
          f"{args.threads} threads, seed {SEED}")
    for temperature in args.temperatures:
        measure(selected, temperature, args)
