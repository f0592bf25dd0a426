"""Whether two versions of the offline judge give the very same judgments on every labelled
answer at hand: a speed change must not move a verdict, a reason or a bit of a probability.

    python benchmarks/judge_equality.py --write before.json     # with the judge as it was
    python benchmarks/judge_equality.py --check before.json     # with the changed judge

Answers, each judged with its prompt as a run judges it: tests/data/*_labelled.csv, the
XSTest completions and the six models' Do-Not-Answer answers of ../shared/data (or
$ORBENCH_SHARED_DATA; skipped, and said so, when absent), and 20,000 of
benchmarks/judge_speed.py's synthetic answers. For
each: `OfflineJudge.classify`'s verdict (a fresh judge: the classifier is skipped where the
rules settle it) and `assess`'s (a second judge): the verdict, the rules' verdict, the
classifier's refusal and its probability as `float.hex` (bit for bit).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Iterator
from pathlib import Path

from _common import CATEGORIES, SHARED_DATA, prompt_text

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
SYNTHETIC = 20_000


def rows(path: Path, prompt: str, *answers: str) -> Iterator[tuple[str, str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            for column in answers:
                yield f"{path.name}:{column}", row[prompt], row[column] or ""


def answer_sets() -> Iterator[tuple[str, str, str]]:
    """(set name, prompt, answer) of every labelled answer, then the synthetic ones."""
    import judge_speed

    csv.field_size_limit(sys.maxsize)
    for path in sorted((REPO / "tests" / "data").glob("*_labelled.csv")):
        yield from rows(path, "prompt", "answer")
    xstest = sorted((SHARED_DATA / "xstest" / "labelled").glob("completions_*.csv"))
    dna = SHARED_DATA / "do-not-answer" / "data_en.csv"
    if not xstest or not dna.exists():
        print(f"{SHARED_DATA} lacks XSTest or Do-Not-Answer: those sets are not compared")
    for path in xstest:
        yield from rows(path, "prompt", "completion")
    if dna.exists():
        models = ("GPT4", "ChatGPT", "Claude", "ChatGLM2", "llama2-7b-chat", "vicuna-7b")
        yield from rows(dna, "question", *(f"{model}_response" for model in models))
    namespace: dict[str, object] = {}
    exec(compile(judge_speed.ANSWERS_MODULE, "bench_answers", "exec"), namespace)
    compose = namespace["compose"]
    for i in range(SYNTHETIC):
        prompt = prompt_text(i, CATEGORIES[i % len(CATEGORIES)], False)
        yield "synthetic", prompt, compose(prompt)  # type: ignore[operator]


def judgments() -> dict[str, list[list[object]]]:
    from orbench_pytest.judges.judge import OfflineJudge

    classifying, assessing = OfflineJudge(), OfflineJudge()
    out: dict[str, list[list[object]]] = {"judge_version": [[classifying.version]]}
    for name, prompt, answer in answer_sets():
        verdict = classifying.classify(answer, prompt)
        full = assessing.assess(answer, prompt)
        out.setdefault(name, []).append([
            verdict.label.value, verdict.reason, verdict.confident,
            full.verdict.label.value, full.verdict.reason, full.verdict.confident,
            full.rules.label.value, full.rules.reason, full.rules.confident,
            full.classifier_refusal, full.probability.hex()])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--write", type=Path, help="write this judge's judgments to a file")
    what.add_argument("--check", type=Path, help="compare this judge's with a file's")
    args = ap.parse_args(argv)
    now = judgments()
    if args.write:
        args.write.write_text(json.dumps(now, ensure_ascii=False), encoding="utf-8")
        print(f"wrote {sum(map(len, now.values())) - 1} judgments to {args.write}")
        return 0
    before = json.loads(args.check.read_text(encoding="utf-8"))
    differ = 0
    for name in sorted(before.keys() | now.keys()):
        old, new = before.get(name, []), now.get(name, [])
        changed = [i for i in range(max(len(old), len(new)))
                   if i >= len(old) or i >= len(new) or old[i] != new[i]]
        differ += len(changed)
        print(f"{name}: {len(new)} judgments, {len(changed)} differ"
              + (f" (first: #{changed[0]})" if changed else ""))
    print("identical" if not differ else f"{differ} judgments differ")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
