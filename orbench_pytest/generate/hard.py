"""Hard subset: the safe prompts that strong models still refuse.

Each probe model's answer is judged by the project's judge (the same `decide` as a test run:
provider blocks are refusals, endpoint errors are neither). A prompt is hard when at least
`min_refusals` probes refused it; an error never counts as a refusal.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from orbench_pytest.core.types import Response, Verdict
from orbench_pytest.judges.judge import Judge, build_judge, decide


@dataclass(frozen=True, slots=True)
class ProbeResult:
    probe: str
    verdict: Verdict

    def shown(self) -> str:
        return self.verdict.label.value


def judge_answers(prompts: Sequence[str], responses: Sequence[Response],
                  judge: Judge | None = None) -> list[Verdict]:
    judge = judge or build_judge("keyword")

    async def all_verdicts() -> list[Verdict]:
        return [await decide(p, r, judge) for p, r in zip(prompts, responses, strict=True)]

    return asyncio.run(all_verdicts())


def refusals(results: Sequence[ProbeResult]) -> int:
    return sum(r.verdict.refused() for r in results)


def is_hard(results: Sequence[ProbeResult], min_refusals: int) -> bool:
    return refusals(results) >= min_refusals
