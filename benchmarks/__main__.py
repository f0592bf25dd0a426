"""The benchmarks' one runner: each figure in the docs comes from a scenario named here.

    python -m benchmarks                         # the scenarios, each with the page citing it
    python -m benchmarks NAME [FLAGS]            # FLAGS: python -m benchmarks NAME --help
    python -m benchmarks NAME --tiny [FLAGS]     # its smallest run (pytest -m bench runs each)

Run from the checkout. The figures depend on the machine and its load: report them as
measured, with the command.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Scenario:
    runs: str  # "module:function" in benchmarks/, called with the flags
    page: str  # the docs page that quotes its figures (and this runner's command)
    about: str
    tiny: tuple[str, ...] = ()  # the smallest flags that still run every part of it


SCENARIOS = {
    "throughput": Scenario(
        "throughput:main", "docs/design/throughput.md",
        "a run against its floor: distinct real answers (default) or one canned answer",
        ("--prompts", "60", "--repeat", "1")),
    "residue": Scenario(
        "throughput:residue_main", "docs/design/throughput.md",
        "wall time and peak memory of a large run with and without each speed-up",
        ("--prompts", "60", "--latency", "0.01", "--repeat", "1")),
    "idle": Scenario("idle:main", "docs/design/dependencies.md",
                     "what the plugin costs a pytest run that runs no suite",
                     ("--repeat", "1")),
    "install": Scenario("install:main", "docs/design/dependencies.md",
                        "the core install's disk, distributions and import time",
                        ("--repeat", "1")),
    "concurrency": Scenario(
        "concurrency:main", "docs/design/adaptive-concurrency.md",
        "adaptive concurrency against a slow and a rate-limiting server",
        ("--prompts", "20", "--latency", "0.01", "--limit", "4", "--repeat", "1")),
    "judge-concurrency": Scenario(
        "judge_concurrency:main", "docs/fetch-engine.md",
        "an LLM judge as slow as the target: does judging hold back the fetch?",
        ("--prompts", "6", "--latency", "0.01", "--judge-concurrency", "default",
         "--judge-concurrency", "2")),
    "large-runs": Scenario(
        "large_runs:main", "docs/design/large-runs.md",
        "shards side by side against one run, and a Batch API round trip",
        ("--shard-size", "40", "--shards", "2", "--latency", "0", "--concurrency", "4",
         "--batch-size", "40")),
    "html-report": Scenario(
        "report:main", "docs/html-report.md",
        "the HTML report's size, build and opening time in Chromium",
        ("--sizes", "20", "--repeats", "1", "--answer-chars", "80")),
    "judge": Scenario(
        "judge:main", "docs/judges.md",
        "the judges against people's labels: fresh set, XSTest, second set, Do-Not-Answer",
        ("--fresh-only",)),
    "calibration": Scenario(
        "calibration:main", "docs/judge-check.md",
        "coverage of the calibrated gate's intervals: simulated and replayed",
        ("--draws", "3", "--labels", "30")),
    "rewordings": Scenario(
        "rewordings:main", "docs/design/rewordings.md",
        "the rewording search: found triggers, shrinking, requests",
        ("--tries", "2")),
    "local": Scenario(
        "local:main", "docs/embedded-model.md",
        "the embedded model: start-up, speed, determinism",
        ("-n", "1", "--max-tokens", "8")),
    "local-determinism": Scenario(
        "local:determinism_main", "docs/design/local-determinism.md",
        "the embedded model's answers twice at temperature 0, per server setting",
        ("-n", "1", "--max-tokens", "8", "--settings", "1slot-noreuse")),
    "temperature": Scenario(
        "temperature:main", "docs/design/temperature.md",
        "the OR-Bench paper's temperature analysis on the embedded model",
        ("--samples", "1", "--per-set", "1", "--max-tokens", "8", "--temperatures", "0")),
}


def main(argv: list[str]) -> int:
    if argv == ["--list"]:  # for tests/test_benchmarks.py: name, page
        for name, listed in SCENARIOS.items():
            print(name, listed.page)
        return 0
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        for name, listed in SCENARIOS.items():
            print(f"  {name:17} {listed.about} ({listed.page})")
        return 0
    name, flags = argv[0], argv[1:]
    scenario = SCENARIOS.get(name)
    if scenario is None:
        print(f"python -m benchmarks: no scenario {name!r}; the scenarios: "
              f"{', '.join(SCENARIOS)}", file=sys.stderr)
        return 2
    if "--tiny" in flags:
        flags = [*scenario.tiny, *(flag for flag in flags if flag != "--tiny")]
    module, function = scenario.runs.split(":")
    run = getattr(importlib.import_module(f"benchmarks.{module}"), function)
    sys.argv[0] = f"python -m benchmarks {name}"  # argparse's usage line
    return int(run(flags) or 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
