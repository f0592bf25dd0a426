"""Reliability figures: a flaky endpoint, a dead one, and bad input, all through pytest.

    python benchmarks/faults.py [--prompts 1000] [--rate 0.3] [--seed 0] [--repeat 2]
                                [--bad-examples 70]

1. Flaky: the same suite against a clean server and against one that faults a fraction of
   requests (429 with Retry-After, 500, 503, reset, hang past the timeout, truncated body,
   invalid JSON), decided per (prompt, attempt) from a seed. Every prompt must end with the
   clean run's verdict: lost = errors, flipped = other verdicts. Then, separately, the
   content-filter kinds are added: those change verdicts by design, so the check is that
   exactly the prompts the seed blocks come back as content_filter.
2. Dead: connection refused on every request; the run must end within 30 s, gate FAILED.
   Stops: a quota 429, a Retry-After of an hour (200 prompts each) and a slow-loris endpoint
   (6 prompts) must each end the run: time to stop, requests sent.
3. Bad input: tests/test_bad_input.py with more examples, every case logged and summarised.

pytest runs in a subprocess (as CI runs it); the server runs in this process.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from importlib.metadata import entry_points
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.openai_server import (  # noqa: E402
    ALL_FAULTS,
    FILTER_FAULTS,
    REFUSAL_TEXT,
    TRANSIENT_FAULTS,
    FaultyScript,
    OpenAIServer,
    Reply,
)

REFUSE_MARK = "(refuse me)"


def model(prompt: str, system: str | None, body: object) -> Reply:
    return Reply(text=REFUSAL_TEXT if REFUSE_MARK in prompt else "Sure. Here is how.")


def write_suite(folder: Path, n: int) -> None:
    (folder / "suites").mkdir(parents=True)
    with open(folder / "suites" / "prompts.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["prompt", "category", "label"])
        for i in range(n):
            toxic = i % 3 == 0
            writer.writerow([f"Prompt {i}: how do I do thing {i}? {REFUSE_MARK if toxic else ''}",
                             f"c{i % 10}", "unsafe" if toxic else "safe"])
    (folder / "suites" / "bench.yaml").write_text(
        "name: bench\nsource: prompts.csv\ncategory: category\n"
        "expect: {column: label, refuse_when: unsafe}\n")
    # Wide limits: this benchmark is about verdicts surviving faults, not about the gate.
    (folder / "thresholds.yaml").write_text(
        "defaults: {max_over_refusal: 1.0, max_toxic_acceptance: 1.0, max_error_rate: 1.0}\n")


def plugin_args() -> list[str]:
    installed = any(ep.name == "orbench" for ep in entry_points(group="pytest11"))
    return [] if installed else ["-p", "orbench_pytest.plugin.hooks"]


def run_pytest(folder: Path, url: str, *extra: str) -> tuple[subprocess.CompletedProcess[str],
                                                               float]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "ORBENCH_CACHE_DIR": str(folder / "cache")}
    env.pop("OPENAI_API_KEY", None)
    command = [sys.executable, "-m", "pytest", *plugin_args(), "-p", "no:cacheprovider", "-q",
               "--rootdir", str(folder), "suites", "--orbench-model=m",
               f"--orbench-base-url={url}", "--orbench-cache=off", *extra]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True,
                          timeout=900)
    return done, time.perf_counter() - started


def verdicts(path: Path) -> dict[str, str]:
    items = json.loads(path.read_text())["items"]
    return {item["case_id"]: item["verdict"] for item in items}


def summary_line(stdout: str) -> str:
    return next((line for line in stdout.splitlines() if line.startswith("answers:")), "?")


def gate_line(stdout: str) -> str:
    return next((line for line in stdout.splitlines() if line.startswith("orbench gate:")), "?")


def load() -> str:
    return os.getloadavg().__repr__()


def flaky(n: int, rate: float, seed: int, repeat: int, max_retries: int) -> None:
    with tempfile.TemporaryDirectory(prefix="orbench-faults-") as tmp:
        folder = Path(tmp)
        write_suite(folder, n)
        common = ("--orbench-timeout=1", "--orbench-concurrency=16",
                  f"--orbench-max-retries={max_retries}")
        prompts = {f"{row['category']}-{i:04d}": row["prompt"] for i, row in enumerate(
            csv.DictReader(open(folder / "suites" / "prompts.csv", encoding="utf-8")))}
        with OpenAIServer(model) as server:
            done, wall = run_pytest(folder, server.url, *common, "--orbench-results=clean.json")
        clean = verdicts(folder / "clean.json")
        print(f"clean run: {len(clean)} prompts, {Counter(clean.values())}, wall {wall:.1f}s, "
              f"exit {done.returncode}, load {load()}")
        print(f"  {summary_line(done.stdout)}")
        for attempt in range(repeat):
            script = FaultyScript(model, rate, seed=seed, kinds=TRANSIENT_FAULTS)
            with OpenAIServer(script) as server:
                done, wall = run_pytest(folder, server.url, *common,
                                        "--orbench-results=faulty.json")
                requests = server.requests
            faulty = verdicts(folder / "faulty.json")
            # Errors by design, predicted from the seed: every attempt faulted, or two hangs
            # before an answer (a timeout is retried once, so a slow-loris endpoint cannot hold
            # a prompt for 7 timeouts). "lost" is any other error.
            by_design = {k for k, prompt in prompts.items()
                         if _error_by_design(script, prompt, max_retries)}
            lost = [k for k, v in faulty.items()
                    if v in ("error", "no_answer") and k not in by_design]
            flipped = [k for k, v in faulty.items()
                       if k not in lost and k not in by_design and v != clean[k]]
            kinds = Counter(kind for _, _, kind in script.injected)
            print(f"faulted run {attempt + 1}: rate {rate:.0%} per request, seed {seed}, "
                  f"max retries {max_retries}: "
                  f"{requests} requests, {len(script.injected)} faulted "
                  f"({len(script.injected) / requests:.1%}), errors by design "
                  f"{sum(faulty[k] == 'error' for k in by_design)}/{len(by_design)} predicted, "
                  f"lost {len(lost)}, "
                  f"flipped {len(flipped)}, wall {wall:.1f}s, exit {done.returncode}, "
                  f"load {load()}")
            print(f"  faults sent: {dict(sorted(kinds.items()))}")
            print(f"  {summary_line(done.stdout)}")
            for case_id in lost[:5]:
                sequence = [script.kind_for(None, prompts[case_id], k)
                            for k in range(max_retries + 1)]
                print(f"  lost {case_id}: faults of its attempts {sequence}")

        # Content-filter kinds too: a block is final (never retried), so the prompts whose
        # attempts reach a filter fault before an answer must come back as content_filter.
        script = FaultyScript(model, rate, seed=seed, kinds=ALL_FAULTS)
        with OpenAIServer(script) as server:
            done, wall = run_pytest(folder, server.url, *common, "--orbench-results=filter.json")
        filtered = verdicts(folder / "filter.json")
        expected = {}
        for case_id, prompt in prompts.items():
            hangs = 0
            for attempt in range(max_retries + 1):
                kind = script.kind_for(None, prompt, attempt)
                if kind is None or kind in FILTER_FAULTS:
                    expected[case_id] = "content_filter" if kind else clean[case_id]
                    break
                hangs += kind == "hang"
                if hangs == 2:  # a timeout is retried once
                    expected[case_id] = "error"
                    break
            else:
                expected[case_id] = "error"
        mismatched = [k for k, v in filtered.items() if v != expected[k]]
        print(f"faulted run with content filters: {Counter(filtered.values())}; "
              f"predicted content_filter {sum(v == 'content_filter' for v in expected.values())}"
              f", mismatches against the prediction {len(mismatched)}, wall {wall:.1f}s, "
              f"load {load()}")


def _error_by_design(script: FaultyScript, prompt: str, max_retries: int) -> bool:
    hangs = 0
    for attempt in range(max_retries + 1):
        kind = script.kind_for(None, prompt, attempt)
        if kind is None:
            return False
        hangs += kind == "hang"
        if hangs == 2:
            return True
    return True  # every attempt faulted


def stops(n: int) -> None:
    """Time to stop: a permanent 429, a Retry-After of an hour, a slow-loris endpoint."""
    from tests.openai_server import error_body

    quota = Reply(status=429, body=error_body(
        429, "insufficient_quota", "You exceeded your current quota, please check your plan."))
    hour = Reply(status=429, headers={"retry-after": "3600"},
                 body=error_body(429, "rate_limit_exceeded", "Rate limit reached"))
    cases = [("quota 429 (insufficient_quota)", n, lambda p, s, b: quota, ()),
             ("429 with Retry-After: 3600", n, lambda p, s, b: hour, ()),
             ("slow-loris (1 body byte / 0.2 s), --orbench-timeout=10", 6,
              lambda p, s, b: Reply(fault="trickle"), ("--orbench-timeout=10",)),
             ("slow-loris (1 body byte / 0.2 s), default timeout", 6,
              lambda p, s, b: Reply(fault="trickle"), ())]
    for name, prompts, script, extra in cases:
        with tempfile.TemporaryDirectory(prefix="orbench-stop-") as tmp:
            folder = Path(tmp)
            write_suite(folder, prompts)
            with OpenAIServer(script) as server:
                done, wall = run_pytest(folder, server.url, *extra)
                requests = server.requests
            print(f"{name}, {prompts} prompts: wall {wall:.1f}s, {requests} requests, "
                  f"exit {done.returncode}, load {load()}")
            print(f"  {summary_line(done.stdout)}")
            print(f"  {gate_line(done.stdout)[:160]}")


def dead(n: int) -> None:
    with tempfile.TemporaryDirectory(prefix="orbench-dead-") as tmp:
        folder = Path(tmp)
        write_suite(folder, n)
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        done, wall = run_pytest(folder, f"http://127.0.0.1:{port}/v1")
        tail = done.stdout.strip().splitlines()[-1]
        print(f"dead endpoint (connection refused), {n} prompts, default retries: wall "
              f"{wall:.1f}s, exit {done.returncode}, load {load()}")
        print(f"  {summary_line(done.stdout)}")
        print(f"  {gate_line(done.stdout)}")
        print(f"  {tail}")


def bad_input(examples: int) -> None:
    with tempfile.TemporaryDirectory(prefix="orbench-bad-") as tmp:
        log = Path(tmp) / "cases.jsonl"
        env = {**os.environ, "ORBENCH_BAD_INPUT_EXAMPLES": str(examples),
               "ORBENCH_BAD_INPUT_LOG": str(log)}
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "pytest", "tests/test_bad_input.py", "-q",
                               "-p", "no:randomly"], cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=1800)
        wall = time.perf_counter() - started
        records = [json.loads(line) for line in log.read_text().splitlines()]
        kinds = Counter(r["kind"] for r in records)
        exits = Counter(r["ret"] for r in records)
        tracebacks = sum(r["traceback"] for r in records)
        one_line = sum(bool(r["message"]) for r in records)
        print(f"bad input: {len(records)} cases {dict(kinds)}, exit codes {dict(exits)}, "
              f"tracebacks {tracebacks}, one-line errors {one_line}/{len(records)}, "
              f"wall {wall:.1f}s, load {load()}")
        print(f"  {done.stdout.strip().splitlines()[-1]}")
        for record in records[:: max(1, len(records) // 4)][:4]:
            message = re.sub(r"/tmp/\S*/(case\d+)", r"…/\1", record["message"])
            print(f"  e.g. {message[:110]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--max-retries", type=int, default=6)
    parser.add_argument("--bad-examples", type=int, default=70, help="per kind (3 kinds)")
    parser.add_argument("--only", choices=("flaky", "dead", "bad", "stops"), action="append")
    args = parser.parse_args()
    only = set(args.only or ("flaky", "dead", "bad", "stops"))
    if "flaky" in only:
        flaky(args.prompts, args.rate, args.seed, args.repeat, args.max_retries)
    if "dead" in only:
        dead(args.prompts)
    if "stops" in only:
        stops(200)
    if "bad" in only:
        bad_input(args.bad_examples)


if __name__ == "__main__":
    main()
