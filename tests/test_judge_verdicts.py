"""The offline judge's verdicts on every shipped labelled answer (tests/data/*_labelled.csv),
each judged with its prompt as a run judges it, frozen in tests/data/keyword_judge_verdicts.json:
a change of rules, text preparation or
classifier that changes a verdict fails here, and one meant to is recorded by writing the file
again (`python -m tests.test_judge_verdicts`) with the judge's new version.

The file was written by the judge with its fast paths (a judge process, packed integer sums,
guarded patterns) before the plain implementation replaced them: the plain judge gives the
very same verdicts (docs/design/judge-speed.md).
"""

from __future__ import annotations

import json
from pathlib import Path

from orbench_pytest.judges.judge import OfflineJudge
from tests.helpers import second_set_files, second_set_rows

FROZEN = Path(__file__).parent / "data" / "keyword_judge_verdicts.json"


def verdicts() -> dict[str, object]:
    """The judge's version and, file by file, each answer's [label, reason, confident]."""
    judge = OfflineJudge()
    return {"judge_version": judge.version,
            "files": {path.name: [[v.label.value, v.reason, v.confident]
                                  for v in (judge.classify(row["answer"], row["prompt"])
                                            for row in second_set_rows(path))]
                      for path in second_set_files()}}


def test_the_judge_gives_the_frozen_verdict_on_every_shipped_answer() -> None:
    frozen = json.loads(FROZEN.read_text(encoding="utf-8"))
    now = verdicts()
    assert now["judge_version"] == frozen["judge_version"], (
        "the judge's version changed: write the verdicts again (python -m "
        "tests.test_judge_verdicts) if its verdicts are meant to change")
    assert sorted(now["files"]) == sorted(frozen["files"])  # type: ignore[call-overload]
    for name, expected in frozen["files"].items():
        got = now["files"][name]  # type: ignore[index]
        assert len(got) == len(expected) >= 300, name
        changed = [(index, want, have) for index, (want, have)
                   in enumerate(zip(expected, got, strict=True)) if want != have]
        assert not changed, f"{name}: {len(changed)} verdicts changed, first {changed[:3]}"


if __name__ == "__main__":
    FROZEN.write_text(json.dumps(verdicts(), indent=0, ensure_ascii=False) + "\n",
                      encoding="utf-8")
    print(f"wrote {FROZEN}")
