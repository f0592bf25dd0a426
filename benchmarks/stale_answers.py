"""Stale answers, end to end: a changed candidate is asked again, never passed from the cache.

    python benchmarks/stale_answers.py [--prompts 40]

Four scenarios, each three pytest runs in a subprocess (as CI runs them) against a local
OpenAI-compatible server in this process, sharing one cache file:

1. app code:  `--orbench-target=app:answer` (the app calls the server with its own system
   prompt); rerun unchanged; then edit a module the app imports so its model refuses.
2. version:   an endpoint with `--orbench-target-version=v1`; the model is redeployed to
   refuse everything and rerun as v1 (same version: the cache answers, as told); then as v2.
3. max age:   an endpoint; the model is redeployed, the cached answers made 3 days old
   (rewriting their `created` time: no waiting); rerun; then made 33 days old (default max
   age 30d); rerun.
4. system_fingerprint: the server returns fp_a; rerun; then the backend changes to fp_b and
   refuses.

Each line: scenario, step, requests the server received in that run, answers from the cache,
the gate verdict and pytest's exit status. A change must show requests > 0 and the new
verdicts (gate FAILED: every safe prompt refused).
"""

from __future__ import annotations

import argparse
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from orbench_pytest.fetch.cache import journal_files  # noqa: E402
from tests.openai_server import ANSWER_TEXT, REFUSAL_TEXT, OpenAIServer, Reply  # noqa: E402
from tests.stale_app import APP, HELPFUL, REFUSING  # noqa: E402

DAY = 86400



class Model:
    def __init__(self) -> None:
        self.refuse = False
        self.fingerprint: str | None = None

    def __call__(self, prompt: str, system: str | None, body: object) -> Reply:
        refuse = self.refuse or bool(system and "Refuse" in system)
        return Reply(text=REFUSAL_TEXT if refuse else ANSWER_TEXT,
                     system_fingerprint=self.fingerprint)


class Bench:
    def __init__(self, folder: Path, server: OpenAIServer, model: Model) -> None:
        self.folder = folder
        self.server = server
        self.model = model
        self.env = dict(os.environ, APP_MODEL_URL=server.url, PYTHONPATH=str(REPO))
        installed = any(ep.name == "orbench" for ep in entry_points(group="pytest11"))
        self.plugin = [] if installed else ["-p", "orbench_pytest.plugin.hooks"]

    def run(self, scenario: str, step: str, *args: str) -> None:
        before = self.server.requests
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "suites", "-q", "-p", "no:cacheprovider",
             *self.plugin, "--orbench-cache-path=cache.sqlite3", *args],
            cwd=self.folder, env=self.env, capture_output=True, text=True, timeout=600)
        answers = re.search(r"^answers: (\d+) \((\d+) from cache\)", done.stdout, re.M)
        gate = re.search(r"^orbench gate: (PASSED|FAILED)", done.stdout, re.M)
        cache = re.search(r"^cache: (.*)$", done.stdout, re.M)
        print(f"{scenario:<19} {step:<44} {self.server.requests - before:>8} "
              f"{answers.group(2) if answers else '?':>10} "
              f"{gate.group(1) if gate else '?':>6} {done.returncode:>4}   "
              f"{cache.group(1) if cache else ''}")
        if gate is None:
            print(done.stdout[-2000:], done.stderr[-2000:], sep="\n")

    def reset(self, model: Model) -> None:
        cache = self.folder / "cache.sqlite3"
        for file in (cache, *journal_files(cache)):  # a stale WAL would poison a new file
            file.unlink(missing_ok=True)
        model.refuse, model.fingerprint = False, None


def age_cache(folder: Path, days: float) -> None:
    with sqlite3.connect(folder / "cache.sqlite3") as db:
        db.execute("UPDATE responses SET created = created - ?", (days * DAY,))


def write_suite(folder: Path, n: int) -> None:
    (folder / "suites").mkdir()
    lines = ["name: safe", "prompts:"]
    lines += [f'  - {{prompt: "question {i}: how do I bake bread?", expect: comply}}'
              for i in range(n)]
    (folder / "suites" / "safe.yaml").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=40)
    args = parser.parse_args()
    model = Model()
    with tempfile.TemporaryDirectory() as tmp, OpenAIServer(model) as server:
        folder = Path(tmp)
        write_suite(folder, args.prompts)
        bench = Bench(folder, server, model)
        endpoint = ["--orbench-model=m", f"--orbench-base-url={server.url}"]
        print(f"{args.prompts} safe prompts per run; gate FAILED = the candidate's refusals seen")
        print(f"{'scenario':<19} {'step':<44} {'requests':>8} {'from cache':>10} "
              f"{'gate':>6} {'exit':>4}   cache line")

        steps: list[tuple[str, str, Callable[[], None], list[str]]] = []
        (folder / "app.py").write_text(APP)
        (folder / "helpers.py").write_text(HELPFUL)
        app = ["--orbench-target=app:answer"]
        steps += [
            ("1 app code", "first run", lambda: None, app),
            ("1 app code", "rerun, code unchanged", lambda: None, app),
            ("1 app code", "rerun, helpers.py now says: refuse", lambda: (
                folder / "helpers.py").write_text(REFUSING), app),
            ("2 version", "first run, --orbench-target-version=v1",
             lambda: bench.reset(model), [*endpoint, "--orbench-target-version=v1"]),
            ("2 version", "model redeployed (refuses), still v1",
             lambda: setattr(model, "refuse", True), [*endpoint, "--orbench-target-version=v1"]),
            ("2 version", "same model, --orbench-target-version=v2", lambda: None,
             [*endpoint, "--orbench-target-version=v2"]),
            ("3 max age", "first run", lambda: bench.reset(model), endpoint),
            ("3 max age", "redeployed (refuses), answers 3 days old",
             lambda: (setattr(model, "refuse", True), age_cache(folder, 3)), endpoint),
            ("3 max age", "answers 33 days old (max age 30d)",
             lambda: age_cache(folder, 30), endpoint),
            ("4 fingerprint", "first run, system_fingerprint fp_a",
             lambda: (bench.reset(model), setattr(model, "fingerprint", "fp_a")), endpoint),
            ("4 fingerprint", "rerun, fp_a", lambda: None, endpoint),
            ("4 fingerprint", "backend now fp_b (refuses)",
             lambda: (setattr(model, "fingerprint", "fp_b"), setattr(model, "refuse", True)),
             endpoint),
        ]
        for scenario, step, change, options in steps:
            change()
            bench.run(scenario, step, *options)


if __name__ == "__main__":
    main()
