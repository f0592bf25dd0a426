"""What the keyword judge's text preparation and rules cost per answer, and (with --reference)
whether another checkout's judge gives the very same verdicts.

    python benchmarks/judge_rules_speed.py [--n 20000] [--repeat 5] [--reference /work/main]

Answers: judge_speed.py's synthetic ones (its ANSWERS_MODULE, for its first N prompts) and
the labelled ones (tests/data/*_labelled.csv, ../shared/data/xstest/labelled).
Per answer, process time, the best of --repeat passes: `judge_text.prepared_parts(answer,
closing=False)` (what a run prepares) and `judge_rules.RulesJudge.classify_prepared`.

--reference DIR loads DIR/orbench_pytest under another name (its classifier file is read from
this checkout's package: the model file is the same for both) and checks, for every answer,
that `judges.OfflineJudge().classify` gives an equal Verdict and `assess` an equal Assessment
(the classifier probability within 1e-12), and that the preparation and the rules' verdict
are equal; its costs are measured in alternation with this checkout's.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from _common import CATEGORIES, SHARED_DATA, load, prompt_text

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
XSTEST = SHARED_DATA / "xstest" / "labelled"
SECOND_SETS = REPO / "tests" / "data"


def synthetic_answers(n: int) -> list[str]:
    import judge_speed

    namespace: dict[str, Any] = {}
    exec(compile(judge_speed.ANSWERS_MODULE, "bench_answers", "exec"), namespace)
    compose = namespace["compose"]
    return [compose(prompt_text(i, CATEGORIES[i % len(CATEGORIES)], False)) for i in range(n)]


def labelled_answers() -> list[str]:
    csv.field_size_limit(sys.maxsize)
    answers: list[str] = []
    for path in sorted(SECOND_SETS.glob("*_labelled.csv")):
        with path.open(newline="", encoding="utf-8") as handle:
            answers += [row["answer"] for row in csv.DictReader(handle)]
    for path in sorted(XSTEST.glob("completions_*.csv")):
        with path.open(newline="", encoding="utf-8") as handle:
            answers += [row["completion"] or "" for row in csv.DictReader(handle)]
    return answers


def load_checkout(directory: Path, name: str) -> ModuleType:
    """DIR/orbench_pytest imported as package `name` (relative imports resolve inside it)."""
    package = directory / "orbench_pytest"
    spec = importlib.util.spec_from_file_location(
        name, package / "__init__.py", submodule_search_locations=[str(package)])
    if spec is None or spec.loader is None:
        raise SystemExit(f"--reference: no package at {package}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def per_answer_us(function: Callable[[str], object], items: Sequence[str]) -> float:
    started = time.process_time()
    for item in items:
        function(item)
    return (time.process_time() - started) / len(items) * 1e6


def _class(module: Any, name: str) -> Any:
    """A judge class by its name, or by `KeywordJudge` in a checkout from before the rename."""
    return getattr(module, name, None) or module.KeywordJudge


def costs(judge_text: Any, judge_rules: Any, answers: list[str]) -> tuple[float, float]:
    rules = _class(judge_rules, "RulesJudge")()
    texts = [judge_text.prepared_parts(a, False)[0] for a in answers]
    return (per_answer_us(lambda a: judge_text.prepared_parts(a, False), answers),
            per_answer_us(rules.classify_prepared, texts))


def differences(this: dict[str, Any], other: dict[str, Any], answers: list[str]) -> list[str]:
    """What differs between the two checkouts' judges on these answers (empty: nothing)."""
    found = []
    judge, reference = (_class(this["judges"], "OfflineJudge")(),
                        _class(other["judges"], "OfflineJudge")())
    if judge.version != reference.version:
        found.append(f"judge version {judge.version} != {reference.version}")
    rules, reference_rules = (_class(this["rules"], "RulesJudge")(),
                              _class(other["rules"], "RulesJudge")())
    for answer in answers:
        parts = this["text"].prepared_parts(answer)
        if parts != other["text"].prepared_parts(answer):
            found.append(f"preparation differs: {answer[:60]!r}")
            continue
        a, b = rules.classify_prepared(parts[0]), reference_rules.classify_prepared(parts[0])
        if (a.label.value, a.reason, a.judge, a.confident) != (
                b.label.value, b.reason, b.judge, b.confident):
            found.append(f"rules: {a} != {b}")
        a, b = judge.classify(answer), reference.classify(answer)
        if (a.label.value, a.reason, a.judge, a.confident) != (
                b.label.value, b.reason, b.judge, b.confident):
            found.append(f"classify: {a} != {b}")
        x, y = judge.assess(answer), reference.assess(answer)
        if ((x.verdict.label.value, x.verdict.reason, x.verdict.confident, x.rules.label.value,
             x.rules.reason, x.rules.confident, x.classifier_refusal)
                != (y.verdict.label.value, y.verdict.reason, y.verdict.confident,
                    y.rules.label.value, y.rules.reason, y.rules.confident,
                    y.classifier_refusal) or abs(x.probability - y.probability) > 1e-12):
            found.append(f"assess: {x} != {y}")
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=20_000, help="synthetic answers (default 20,000)")
    ap.add_argument("--repeat", type=int, default=5, help="passes; the best counts (default 5)")
    ap.add_argument("--reference", type=Path, help="a checkout to compare with, e.g. /work/main")
    args = ap.parse_args(argv)

    from orbench_pytest.judges import judge as judges
    from orbench_pytest.judges import rules as judge_rules
    from orbench_pytest.judges import text as judge_text
    this = {"text": judge_text, "rules": judge_rules, "judges": judges}
    checkouts = {"this checkout": this}
    if args.reference is not None:
        load_checkout(args.reference, "reference_orbench")
        import reference_orbench.judge_rules as ref_rules  # type: ignore[import-not-found]
        import reference_orbench.judge_text as ref_text  # type: ignore[import-not-found]
        import reference_orbench.judges as ref_judges  # type: ignore[import-not-found]

        checkouts[str(args.reference)] = {"text": ref_text, "rules": ref_rules,
                                          "judges": ref_judges}
    sets = {"synthetic": synthetic_answers(args.n), "labelled": labelled_answers()}
    print(f"answers: {len(sets['synthetic'])} synthetic, {len(sets['labelled'])} labelled; "
          f"load {load()}")
    if args.reference is not None:
        other = checkouts[str(args.reference)]
        found = differences(this, other, [a for answers in sets.values() for a in answers])
        print(f"equality with {args.reference}: {len(found)} differences over "
              f"{sum(map(len, sets.values()))} answers (classify, assess, preparation, rules)")
        for line in found[:20]:
            print(f"  {line}")
    for name, answers in sets.items():
        best: dict[str, tuple[float, float]] = {}
        for _ in range(args.repeat):  # alternating, so that load falls on both alike
            for label, modules in checkouts.items():
                prep, rules = costs(modules["text"], modules["rules"], answers)
                old = best.get(label, (float("inf"), float("inf")))
                best[label] = (min(old[0], prep), min(old[1], rules))
        for label, (prep, rules) in best.items():
            print(f"{name}, {label}: text preparation {prep:.1f} µs, rules {rules:.1f} µs, "
                  f"together {prep + rules:.1f} µs per answer")
    print(f"load {load()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
