"""The judge's fresh test set: new answers of the embedded models, to label before any verdict.

    python scripts/fresh_set.py select                 # the chosen prompt ids, per model
    python scripts/fresh_set.py generate [--model M]   # ask them through the plugin itself
    python scripts/fresh_set.py keys LABELS MODEL      # the labels as `orbench label` keys

The prompts are new to the judge's checks: none is in tests/data/*_labelled.csv (the two
labelled sets of the embedded models), in the smoke suite, or among the three XSTest prompts
whose verdicts were seen while timing the model. They are drawn per model, seeded and stratified
by category (XSTest: by type, so safe and contrasting unsafe prompts both come in), from
OR-Bench-Hard-1K, OR-Bench-Toxic and XSTest v2 as they are in ../shared/data (ORBENCH_DATA_DIR),
each model getting prompts no other model got (more prompts, one answer each).

`generate` runs pytest with the ready suites' node ids and `--orbench-model=<model>` at the
plugin's defaults (temperature 0, the embedded model's 128 tokens, one slot: deterministic), so
the answers are what a user of the product gets. pytest's own output, which shows passes and
failures and so the judge's verdicts, goes to a log file under OUT and is not printed; the
results file goes there too. The full answers are read back from the run's response cache
(the results file keeps an excerpt) into OUT/answers-<model>.csv: id, suite, model, prompt,
answer, finish_reason and nothing of a verdict: the file the labels were made from.

OUT is scripts/fresh-set-out/ (not committed: it holds the prompts' texts), the cache
OUT/cache unless ORBENCH_CACHE_DIR is set. Re-running is cheap once the answers are cached,
and re-judges them with the judge of the checkout, which is how the "after" figure is made:

    python scripts/fresh_set.py generate          # answers + results of today's judge
    python scripts/fresh_set.py keys benchmarks/data/fresh_local_labels.csv local \\
        | orbench label scripts/fresh-set-out/results-local.json --n 1000 \\
              --suite or-bench-hard-1k --suite or-bench-toxic --suite xstest -o labels.csv
    orbench judge-check labels.csv

The labels themselves (benchmarks/data/fresh_local_labels.csv) keep the prompts' ids and
sha256, not their text: `python -m benchmarks judge` joins the text back from ../shared/data.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from orbench_pytest.catalog.sampling import stratified_sample  # noqa: E402
from orbench_pytest.cli.label import LABELS, _rank  # noqa: E402
from orbench_pytest.fetch.cache import ResponseCache, cache_key  # noqa: E402
from orbench_pytest.fetch.targets import GenerationParams, model_identity  # noqa: E402

SEED = 34
DATA = Path(os.environ.get("ORBENCH_SHARED_DATA") or ROOT.parent / "shared" / "data")
OUT = ROOT / "scripts" / "fresh-set-out"
LOCAL_MAX_TOKENS = 128  # the plugin's default for the embedded model (core/defaults.py)


@dataclass(frozen=True, slots=True)
class SuiteSource:
    name: str  # the ready suite
    file: str  # under DATA
    prompt: str
    category: str
    id_column: str | None  # None: the plugin's ids, <category>-<row index:04d>
    labelled_prefix: str  # how tests/data/*_labelled.csv name this suite's ids


SUITES = (
    SuiteSource("or-bench-hard-1k", "orbench/or-bench-hard-1k.csv", "prompt", "category", None,
                "hard-1k/"),
    SuiteSource("or-bench-toxic", "orbench/or-bench-toxic.csv", "prompt", "category", None,
                "toxic/"),
    SuiteSource("xstest", "xstest/xstest_prompts.csv", "prompt", "type", "id", "xstest/"),
)
# Answers per suite for each model: the 0.5B default gets the most, the slow 1.5B fewer, and
# SmolLM2 (a plumbing check that refuses almost nothing) a small share.
QUOTAS: dict[str, dict[str, int]] = {
    "local": {"or-bench-hard-1k": 50, "or-bench-toxic": 40, "xstest": 30},
    "local:qwen1.5b": {"or-bench-hard-1k": 36, "or-bench-toxic": 30, "xstest": 24},
    "local:smollm2": {"or-bench-hard-1k": 12, "or-bench-toxic": 10, "xstest": 8},
}
# XSTest prompts whose answers and verdicts were seen while timing the model: never in the set.
SEEN_WHILE_TIMING = {("xstest", "1"), ("xstest", "2"), ("xstest", "3")}


@dataclass(frozen=True, slots=True)
class Prompt:
    suite: str
    case_id: str
    category: str
    text: str

    @property
    def sha256(self) -> str:
        return prompt_sha256(self.text)

    @property
    def nodeid(self) -> str:
        return f"orbench:{self.suite}.yaml::{self.suite}[{self.case_id}]"


def prompt_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def load_prompts(source: SuiteSource, data: Path = DATA) -> list[Prompt]:
    path = data / source.file
    if not path.exists():
        raise SystemExit(f"{path}: missing (the fresh set's prompts come from ../shared/data; "
                         "set ORBENCH_SHARED_DATA to its folder)")
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    out = []
    for index, row in enumerate(rows):
        category = row[source.category].strip()
        case_id = row[source.id_column] if source.id_column else f"{category}-{index:04d}"
        out.append(Prompt(source.name, case_id, category, row[source.prompt]))
    return out


def already_labelled() -> set[tuple[str, str]]:
    """(suite, case id) of every prompt in the earlier labelled sets of the embedded models."""
    prefixes = {s.labelled_prefix: s.name for s in SUITES}
    used: set[tuple[str, str]] = set(SEEN_WHILE_TIMING)
    for path in sorted((ROOT / "tests" / "data").glob("*_labelled.csv")):
        with path.open(newline="", encoding="utf-8") as fh:
            for rec in csv.DictReader(fh):
                for prefix, suite in prefixes.items():
                    if rec["id"].startswith(prefix):
                        used.add((suite, rec["id"].removeprefix(prefix)))
    return used


def select(data: Path = DATA) -> dict[str, list[Prompt]]:
    """model → its prompts: per suite, one seeded stratified draw per model from what is left."""
    used = already_labelled()
    chosen: dict[str, list[Prompt]] = {model: [] for model in QUOTAS}
    for source in SUITES:
        pool = [p for p in load_prompts(source, data) if (p.suite, p.case_id) not in used]
        for model, quota in QUOTAS.items():
            picked = set(stratified_sample([p.category for p in pool], quota[source.name],
                                           SEED))
            chosen[model] += [p for i, p in enumerate(pool) if i in picked]
            pool = [p for i, p in enumerate(pool) if i not in picked]
    return chosen


def slug(model: str) -> str:
    return model.replace(":", "-")


def generate(model: str, prompts: Sequence[Prompt], out: Path) -> Path:
    """Ask the prompts through pytest and the plugin; write OUT/answers-<model>.csv."""
    out.mkdir(parents=True, exist_ok=True)
    cache_dir = Path(os.environ.get("ORBENCH_CACHE_DIR", out / "cache"))
    env = {**os.environ, "ORBENCH_CACHE_DIR": str(cache_dir),
           "ORBENCH_DATA_DIR": os.pathsep.join(str(DATA / d) for d in ("orbench", "xstest"))}
    args_file = out / f"nodeids-{slug(model)}.txt"
    args_file.write_text("".join(f"{p.nodeid}\n" for p in prompts), encoding="utf-8")
    results = out / f"results-{slug(model)}.json"
    log = out / f"pytest-{slug(model)}.log"  # shows verdicts: not printed
    command = [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider",
               "-q", f"@{args_file}", f"--orbench-model={model}", "--orbench-timeout=1800",
               f"--orbench-results={results}"]
    with log.open("w", encoding="utf-8") as fh:
        code = subprocess.run(command, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT,
                              check=False).returncode
    # The gate may fail (that is the model's rates, not the run): what matters is every answer.
    identity = model_identity(model, None, GenerationParams(0.0, LOCAL_MAX_TOKENS, None))
    keys = {cache_key(identity, None, p.text): p for p in prompts}
    cache = ResponseCache(cache_dir / "responses.sqlite3", writable=False)
    try:
        answers = cache.get_many(keys)
    finally:
        cache.close()
    missing = [p.nodeid for k, p in keys.items() if k not in answers]
    if missing:
        raise SystemExit(f"{model}: {len(missing)} answers not in the cache (pytest exit "
                         f"{code}; see {log}), first {missing[0]}")
    target = out / f"answers-{slug(model)}.csv"
    with target.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["id", "suite", "model", "prompt_sha256", "prompt", "answer",
                         "finish_reason"])
        for key, p in keys.items():
            r = answers[key]
            writer.writerow([f"{p.suite}[{p.case_id}]", p.suite, model, p.sha256, p.text,
                             r.text or "", r.finish_reason or ""])
    print(f"{model}: {len(prompts)} answers in {target} (pytest exit {code}, log {log})")
    return target


def label_keys(labels: Path, model: str, seed: int = 0) -> str:
    """The keys `orbench label --seed SEED --n <all>` needs for this model's answers, in the
    order it shows them (a keyed hash of the id, independent of the verdict)."""
    key_of = {name: key for key, name in LABELS.items()}
    with labels.open(newline="", encoding="utf-8") as fh:
        mine = {r["id"]: r["label"] for r in csv.DictReader(fh) if r["model"] == model}
    order = sorted(mine, key=lambda item_id: _rank(seed, item_id))
    return "".join(key_of[mine[item_id]] for item_id in order) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("select", help="print the chosen prompt ids per model")
    gen = sub.add_parser("generate", help="ask the chosen prompts; write the answers")
    gen.add_argument("--model", choices=list(QUOTAS), action="append")
    gen.add_argument("--out", type=Path, default=OUT)
    keys = sub.add_parser("keys", help="labels as keys for orbench label (stdin)")
    keys.add_argument("labels", type=Path)
    keys.add_argument("model", choices=list(QUOTAS))
    keys.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.command == "keys":
        sys.stdout.write(label_keys(args.labels, args.model, args.seed))
        return 0
    chosen = select()
    if args.command == "select":
        for model, prompts in chosen.items():
            print(f"{model} ({len(prompts)}): "
                  + " ".join(f"{p.suite}[{p.case_id}]" for p in prompts))
        return 0
    for model in args.model or list(QUOTAS):
        generate(model, chosen[model], args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
