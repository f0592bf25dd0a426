"""tests/data's hand-labelled answers: the judge's second set, one file per model."""

from __future__ import annotations

import csv
from pathlib import Path

SECOND_SETS = Path(__file__).parent / "data"


def second_set_files() -> list[Path]:
    return sorted(SECOND_SETS.glob("*_labelled.csv"))


def second_set_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def second_set_answers() -> list[str]:
    """Every file's answers, in file order."""
    return [row["answer"] for path in second_set_files() for row in second_set_rows(path)]
