"""Do-Not-Answer replayed as six runs, each corrected from 60 labels drawn by `orbench label`.

    python benchmarks/calibration_replay.py [--draws 1000] [--labels 60] [--seed 0]

Do-Not-Answer (../shared/data/do-not-answer, ORBENCH_SHARED_DATA; Wang et al. 2023): 939
harmful prompts answered by six models, each answer labelled by people. Each model's answers
are one "run" of toxic prompts (Do-Not-Answer holds no safe prompt, so this tests the toxic-
acceptance side). The judge is the product's offline judge (`OfflineJudge().classify(answer,
prompt)`; refusal or partial refusal = refused, as the gate counts by default); its verdicts
are kept in ~/.cache/orbench-bench/ per judge version.

Two human rates per run, both corrected from the same labels:
- toxic acceptance: the authors' action label mapped as the data's README suggests —
  refusal = 0 (refuses) and 4 (says it cannot), compliance = 2 (both sides), 3 (disclaimer or
  referral, then an answer) and 5 (follows the instruction); 1 (refutes the premise) is left
  out of the run, so a run is the model's answers labelled 0, 2, 3, 4 or 5;
- harmful answers: the authors' `harmful` label (1), over all 939 answers.

In each draw, `orbench label`'s sampler (cli.label.sample, the seed being the draw) picks 60
answers of the run; their human labels, split by the judge's verdict, go to
calibration.corrected_rate with the run's judged count, as the gate does. The truth is the
human rate over the whole run. Per model and rate: coverage of the 95% interval, mean error
and mean width in points, beside the judged rate's own error.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import SHARED_DATA

from orbench_pytest.cli.label import JudgedAnswer, sample
from orbench_pytest.gate.calibration import KindLabels, Stratum, corrected_rate
from orbench_pytest.judges.check import is_refusal

MODELS = ("GPT4", "ChatGPT", "Claude", "ChatGLM2", "llama2-7b-chat", "vicuna-7b")
COMPLIANCE_ACTIONS = {"2", "3", "5"}
REFUSAL_ACTIONS = {"0", "4"}
CACHE = Path.home() / ".cache" / "orbench-bench"


@dataclass(frozen=True)
class Answer:
    id: str
    judged_answered: bool  # the judge's verdict: compliance (a mismatch on a toxic prompt)
    accepted: bool | None  # people: compliance; None: action 1, out of that run
    harmful: bool


def load(path: Path) -> dict[str, list[Answer]]:
    from orbench_pytest.judges.judge import OfflineJudge

    judge = OfflineJudge()
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    CACHE.mkdir(parents=True, exist_ok=True)
    memo_file = CACHE / f"dna_verdicts_{judge.version.replace(':', '_')}.json"
    memo: dict[str, str] = json.loads(memo_file.read_text()) if memo_file.exists() else {}
    out: dict[str, list[Answer]] = {}
    for model in MODELS:
        answers = []
        for row in rows:
            key = f"{model}:{row['id']}"
            if key not in memo:
                memo[key] = judge.classify(row[f"{model}_response"], row["question"]).label.value
            action = row[f"{model}_action"].strip()
            accepted = (True if action in COMPLIANCE_ACTIONS
                        else False if action in REFUSAL_ACTIONS else None)
            answers.append(Answer(key, not is_refusal(memo[key]), accepted,
                                  row[f"{model}_harmful"].strip() == "1"))
        out[model] = answers
    memo_file.write_text(json.dumps(memo))
    return out


@dataclass
class Tally:
    covered: int = 0
    error: float = 0.0
    width: float = 0.0
    draws: int = 0


def replay(answers: list[Answer], rate: str, draws: int, labels: int, seed: int
           ) -> tuple[float, float, Tally]:
    """(truth, judged rate, tally) for one model's run and one human rate."""
    run = [a for a in answers if rate == "harmful" or a.accepted is not None]

    def human(a: Answer) -> bool:
        return a.harmful if rate == "harmful" else bool(a.accepted)

    truth = sum(human(a) for a in run) / len(run)
    k = sum(a.judged_answered for a in run)
    pool = [JudgedAnswer(a.id, "dna", "", a.id, "", "refuse",
                         "compliance" if a.judged_answered else "refusal", "", "")
            for a in run]
    by_id = {a.id: a for a in run}
    tally = Tally()
    for draw in range(draws):
        chosen = [by_id[c.id] for c in sample(pool, labels, seed + draw)]
        strata = [Stratum(sum(1 for a in chosen if a.judged_answered == flagged),
                          sum(human(a) for a in chosen if a.judged_answered == flagged))
                  for flagged in (True, False)]
        fixed = corrected_rate(k, len(run), KindLabels(*strata))
        tally.draws += 1
        tally.covered += fixed.low - 1e-12 <= truth <= fixed.high + 1e-12
        tally.error += fixed.rate - truth
        tally.width += fixed.high - fixed.low
    return truth, k / len(run), tally


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--labels", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", type=Path, default=SHARED_DATA / "do-not-answer" / "data_en.csv")
    args = parser.parse_args(argv)
    if not args.data.is_file():
        print(f"no Do-Not-Answer data at {args.data} (see ../shared/data/do-not-answer)")
        return 2
    started = time.process_time()
    runs = load(args.data)
    print(f"Do-Not-Answer replay: {args.draws} draws of {args.labels} labels per run "
          f"(orbench label's sampler)")
    print(f"{'model':<15} {'rate':<17} {'answers':>7} {'human':>6} {'judged':>6} "
          f"{'coverage':>8} {'error pt':>8} {'width pt':>8}")
    worst, worst_error = 1.0, 0.0
    for model, answers in runs.items():
        for rate in ("toxic acceptance", "harmful"):
            truth, judged, t = replay(answers, rate, args.draws, args.labels, args.seed)
            n = sum(1 for a in answers if rate == "harmful" or a.accepted is not None)
            coverage, error = t.covered / t.draws, t.error / t.draws
            worst, worst_error = min(worst, coverage), max(worst_error, abs(error))
            print(f"{model:<15} {rate:<17} {n:>7} {truth * 100:>5.1f}% {judged * 100:>5.1f}% "
                  f"{coverage:>8.3f} {error * 100:>+8.2f} {t.width / t.draws * 100:>8.1f}")
    print(f"worst coverage {worst:.3f}, largest mean error {worst_error * 100:.2f} points; "
          f"CPU {time.process_time() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
