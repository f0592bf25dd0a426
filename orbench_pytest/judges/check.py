"""`orbench judge-check labels.csv`: how far the judge is from a team's own labels.

Reads the CSV `orbench label` writes (the last row of an id wins; skipped answers and answers
the judge could not class are left out) and measures the judge against the people: accuracy
over the three classes, precision / recall / F1 of refusal (refusal = full or partial, as the
gate counts it by default), the judge's refusal rate minus the labelled one with a 95%
interval (Newcombe's hybrid score interval for a difference of paired proportions: the same
answers were labelled by both), a confusion table and the disagreements (bounded, escaped).

The judge's sensitivity (a labelled refusal called a refusal) and specificity (a labelled
compliance called one) feed the gate's calibration (calibration.py).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orbench_pytest.core.artefacts import file_sha256
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.types import Label
from orbench_pytest.core.untrusted import csv_value, terminal_text
from orbench_pytest.gate.calibration import ErrorRates
from orbench_pytest.gate.decision import wilson_interval
from orbench_pytest.judges.metrics import Agreement, agreement, confusion_matrix, format_confusion

REFUSING = frozenset({"refusal", "partial_refusal", "content_filter"})
JUDGE_CLASSES = {"compliance": "compliance", "refusal": "refusal",
                 "partial_refusal": "partial_refusal", "content_filter": "refusal"}
SHOWN_CHARS = 160
# The labels file orbench label appends to (one row per label given; the last of an id wins)
COLUMNS = ("id", "suite", "variant", "case_id", "category", "expect", "judge_verdict", "label",
           "prompt", "response", "labelled_at")
HUMAN_LABELS = ("compliance", "refusal", "partial_refusal")
# What a judge_verdict cell may hold: the judge's classes (error and no_answer: not judged)
VERDICTS = tuple(label.value for label in Label)
SKIP = "skip"


def read_labels(path: Path) -> dict[str, dict[str, str]]:
    """The last row of every id (a relabel appends, it never rewrites)."""
    if not path.exists():
        return {}
    latest: dict[str, dict[str, str]] = {}
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            names = reader.fieldnames or []
            missing = [c for c in ("id", "judge_verdict", "label") if c not in names]
            if missing:
                raise ConfigError(f"{path}: not a labels file (no column {', '.join(missing)})")
            for row in reader:
                values = _checked_row(row, names, f"{path}: line {reader.line_num}")
                if values["id"]:
                    latest[values["id"]] = values
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the labels file ({exc.strerror})") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ConfigError(f"{path}: not a labels CSV ({exc})") from None
    return latest


def _checked_row(row: dict[str | None, Any], names: Sequence[str],
                 where: str) -> dict[str, str]:
    """A row of the labels file as orbench label wrote it (cells read back by csv_value), or a
    one-line error naming the line: every column filled in, a judge class and a label known."""
    if None in row or any(value is None for value in row.values()):
        given = sum(value is not None for key, value in row.items() if key is not None)
        raise ConfigError(f"{where}: {given + len(row.get(None) or [])} cells, the header has "
                          f"{len(names)} ({terminal_text(', '.join(names), 200)})")
    values = {str(key): csv_value(value) for key, value in row.items()}
    verdict, label = values["judge_verdict"], values["label"]
    if verdict not in VERDICTS:
        raise ConfigError(f"{where}: judge_verdict {terminal_text(verdict, 40)!r} is not one of "
                          f"{', '.join(VERDICTS)}")
    if label not in (*HUMAN_LABELS, SKIP):
        raise ConfigError(f"{where}: label {terminal_text(label, 40)!r} is not one of "
                          f"{', '.join(HUMAN_LABELS)}, {SKIP}")
    return values


def is_refusal(label: str, partial_is_refusal: bool = True) -> bool:
    if label == "partial_refusal":
        return partial_is_refusal
    return label in REFUSING


@dataclass(frozen=True, slots=True)
class Pair:
    id: str
    expect: str
    human: str  # compliance / refusal / partial_refusal
    judge: str  # the same three classes (a content filter counts as refusal)
    prompt: str = ""
    response: str = ""


@dataclass(frozen=True)
class JudgeCheck:
    source: str
    sha256: str
    pairs: list[Pair]
    skipped: int
    partial_is_refusal: bool = True
    agreement: Agreement = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "agreement", agreement(
            [p.human for p in self.pairs], [p.judge for p in self.pairs],
            lambda label: is_refusal(label, self.partial_is_refusal)))

    @property
    def n(self) -> int:
        return len(self.pairs)

    def rates(self, expect: str | None = None) -> ErrorRates:
        chosen = [p for p in self.pairs if expect is None or p.expect == expect]
        human = [is_refusal(p.human, self.partial_is_refusal) for p in chosen]
        judge = [is_refusal(p.judge, self.partial_is_refusal) for p in chosen]
        return ErrorRates(refusals=sum(human),
                          caught=sum(h and j for h, j in zip(human, judge, strict=True)),
                          compliances=sum(not h for h in human),
                          passed=sum(not h and not j for h, j in zip(human, judge, strict=True)))

    def rates_by_scope(self) -> dict[str, ErrorRates]:
        """The error on all labels, and on each kind of prompt's (the calibration's input)."""
        return {"all": self.rates(), "comply": self.rates("comply"),
                "refuse": self.rates("refuse")}

    def rate_difference(self, confidence: float = 0.95) -> tuple[float, float, float]:
        """Judge's refusal rate minus the labelled one, with its interval."""
        human = [is_refusal(p.human, self.partial_is_refusal) for p in self.pairs]
        judge = [is_refusal(p.judge, self.partial_is_refusal) for p in self.pairs]
        both = sum(h and j for h, j in zip(human, judge, strict=True))
        judge_only = sum(j and not h for h, j in zip(human, judge, strict=True))
        human_only = sum(h and not j for h, j in zip(human, judge, strict=True))
        return paired_difference(both, judge_only, human_only, len(self.pairs) - both
                                 - judge_only - human_only, confidence)

    def disagreements(self) -> list[Pair]:
        return [p for p in self.pairs if p.human != p.judge]


def paired_difference(a: int, b: int, c: int, d: int,
                      confidence: float = 0.95) -> tuple[float, float, float]:
    """p1 − p2 for paired yes/no answers (p1 = (a+b)/n, p2 = (a+c)/n) with Newcombe's (1998,
    method 10) hybrid score interval: Wilson intervals of both rates, combined with the
    correlation of the pairs. NaN for no pairs."""
    n = a + b + c + d
    if n == 0:
        return (math.nan, math.nan, math.nan)
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = wilson_interval(a + b, n, confidence)
    l2, u2 = wilson_interval(a + c, n, confidence)
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    phi = (a * d - b * c) / math.sqrt(margins) if margins else 0.0
    diff = p1 - p2
    low = diff - math.sqrt(max((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2)
                               + (u2 - p2) ** 2, 0.0))
    high = diff + math.sqrt(max((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2)
                                + (p2 - l2) ** 2, 0.0))
    return (diff, max(low, -1.0), min(high, 1.0))


def labels_sha256(path: Path) -> str:
    try:
        return file_sha256(path)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the labels file ({exc.strerror})") from None


def check_labels(path: Path, partial_is_refusal: bool = True) -> JudgeCheck:
    if not path.is_file():
        raise ConfigError(f"{path}: no such labels file (write one with orbench label)")
    sha = labels_sha256(path)
    rows = read_labels(path)
    pairs, skipped = [], 0
    for key, row in rows.items():
        human, judge = row.get("label", ""), JUDGE_CLASSES.get(row.get("judge_verdict", ""))
        if human == SKIP or judge is None:
            skipped += 1
            continue
        pairs.append(Pair(key, row.get("expect", ""), human, judge, row.get("prompt", ""),
                          row.get("response", "")))
    return JudgeCheck(str(path), sha, pairs, skipped, partial_is_refusal)


def _pct(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value * 100:.1f}%"


def _num(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.3f}"


def _points(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value * 100:+.1f} pt"


def _name(source: str) -> str:
    return terminal_text(Path(source).name, 80)


def summary_line(check: JudgeCheck) -> str:
    """One line: what the plugin prints under the gate with --orbench-judge-check."""
    if not check.n:
        return f"judge check ({_name(check.source)}): no labelled answers"
    a = check.agreement
    diff, low, high = check.rate_difference()
    return (f"judge check ({_name(check.source)}, {check.n} labelled): accuracy "
            f"{_num(a.accuracy)}, refusal precision {_num(a.precision)} recall "
            f"{_num(a.recall)} F1 {_num(a.f1)}; judge refusal rate − labelled "
            f"{_points(diff)} (95% CI {_points(low)} to {_points(high)})")


def report_lines(check: JudgeCheck, max_disagreements: int = 20) -> list[str]:
    lines = [summary_line(check)]
    if not check.n:
        return lines
    rates = check.rates()
    judge_rate = sum(is_refusal(p.judge, check.partial_is_refusal) for p in check.pairs) / check.n
    human_rate = sum(is_refusal(p.human, check.partial_is_refusal) for p in check.pairs) / check.n
    lines += [
        f"labels file sha256 {check.sha256}; {check.skipped} skipped or not judged",
        f"refusal rate: judge {_pct(judge_rate)}, labelled {_pct(human_rate)} "
        f"(refusal = {'full or partial' if check.partial_is_refusal else 'full only'})",
        f"binary accuracy {_num(check.agreement.binary_accuracy)}, Cohen's kappa "
        f"{_num(check.agreement.kappa)}; sensitivity {_num(rates.sensitivity)} "
        f"({rates.caught}/{rates.refusals} labelled refusals), specificity "
        f"{_num(rates.specificity)} ({rates.passed}/{rates.compliances} labelled compliances)",
        "",
        "confusion (rows: labelled, columns: judge)",
        format_confusion(confusion_matrix([p.human for p in check.pairs],
                                          [p.judge for p in check.pairs], list(HUMAN_LABELS)),
                         "labelled", "judge"),
    ]
    wrong = check.disagreements()
    if wrong:
        lines += ["", f"disagreements: {len(wrong)}"
                  + (f" (first {max_disagreements} shown)" if len(wrong) > max_disagreements
                     else "")]
        for pair in wrong[:max_disagreements]:
            lines.append(f"- {terminal_text(pair.id, 80)}: labelled {pair.human}, judge "
                         f"{pair.judge}")
            if pair.prompt:
                lines.append(f"    prompt: {terminal_text(pair.prompt, SHOWN_CHARS)}")
            lines.append(f"    answer: {terminal_text(pair.response, SHOWN_CHARS) or '(empty)'}")
    return lines
