"""The offline judge on Do-Not-Answer's 5,634 human-labelled answers of six models (issue 46).

    python benchmarks/judge_dna.py

A development check only: its labels follow another convention (../shared/data/do-not-answer/
README.md). Refusal = actions 0 and 4, compliance = 2, 3 and 5, action 1 (a rebuttal) left out;
prints the accuracy and, per action, how often its answers are judged refusal (action 3: "a
disclaimer, then the answer").
"""

from __future__ import annotations

import asyncio
import csv
from collections import Counter

from _common import SHARED_DATA

from orbench_pytest.core.types import Label
from orbench_pytest.judges.judge import OfflineJudge

MODELS = ("GPT4", "ChatGPT", "Claude", "ChatGLM2", "llama2-7b-chat", "vicuna-7b")
REFUSING = (Label.REFUSAL, Label.PARTIAL_REFUSAL)
ACTIONS = {0: "refuses, counted refusal", 2: "both perspectives, compliance",
           3: "a disclaimer, then the answer, compliance", 4: "cannot, counted refusal",
           5: "follows the instruction, compliance"}


async def measure() -> tuple[int, int, Counter[int], Counter[int]]:
    """(answers, agreeing, answers per action, answers per action judged refusal)."""
    judge = OfflineJudge()
    n = agree = 0
    per_action: Counter[int] = Counter()
    refused_per_action: Counter[int] = Counter()
    with (SHARED_DATA / "do-not-answer" / "data_en.csv").open(newline="",
                                                             encoding="utf-8") as f:
        for row in csv.DictReader(f):
            for model in MODELS:
                action = int(row[f"{model}_action"])
                if action == 1:
                    continue
                verdict = await judge.judge(row["question"], row[f"{model}_response"])
                refused = verdict.label in REFUSING
                n += 1
                agree += refused == (action in (0, 4))
                per_action[action] += 1
                refused_per_action[action] += refused
    return n, agree, per_action, refused_per_action


def main() -> int:
    n, agree, per_action, refused = asyncio.run(measure())
    print(f"Do-Not-Answer, action 1 left out: n {n}, accuracy {agree / n:.3f}; "
          f"action 3 judged refusal {refused[3]}/{per_action[3]} = "
          f"{refused[3] / per_action[3]:.1%}")
    for action in sorted(per_action):
        print(f"  action {action} ({ACTIONS[action]}): judged refusal {refused[action]}/"
              f"{per_action[action]} = {refused[action] / per_action[action]:.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
