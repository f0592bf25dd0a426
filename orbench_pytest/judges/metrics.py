"""Agreement between two labellers (a judge and people, or two judges).

Pure Python so the core keeps no numeric dependency (Cohen's kappa: core/statistics.py).
Labels are any hashable values; the binary helpers take a predicate saying which labels count
as a refusal.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from orbench_pytest.core.statistics import cohen_kappa

L = TypeVar("L", bound=Hashable)


def _check_pairs(truth: Sequence[object], pred: Sequence[object]) -> None:
    if len(truth) != len(pred):
        raise ValueError(f"label sequences differ in length: {len(truth)} != {len(pred)}")


def confusion_matrix(truth: Sequence[L], pred: Sequence[L],
                     labels: Sequence[L] | None = None) -> dict[L, dict[L, int]]:
    """counts[t][p]: how often `truth` said t where `pred` said p (rows truth, columns pred).

    `labels` fixes the row/column order and keeps classes that never occur; by default the
    labels seen, in order of first appearance.
    """
    _check_pairs(truth, pred)
    if labels is None:
        labels = list(dict.fromkeys([*truth, *pred]))
    counts: dict[L, dict[L, int]] = {t: dict.fromkeys(labels, 0) for t in labels}
    for t, p in zip(truth, pred, strict=True):
        if t not in counts or p not in counts[t]:
            raise ValueError(f"label outside {list(labels)!r}: {t!r} / {p!r}")
        counts[t][p] += 1
    return counts


def format_confusion(counts: dict[L, dict[L, int]], row_title: str = "truth",
                     col_title: str = "pred") -> str:
    """A plain-text table of a confusion matrix, for reports and benchmark output."""
    labels = list(counts)
    names = [str(getattr(x, "value", x)) for x in labels]
    width = max([len(n) for n in names] + [len(f"{row_title}\\{col_title}"), 5])
    lines = [f"{row_title}\\{col_title}".ljust(width) + "".join(n.rjust(width + 1) for n in names)]
    for label, name in zip(labels, names, strict=True):
        cells = "".join(str(counts[label][c]).rjust(width + 1) for c in labels)
        lines.append(name.ljust(width) + cells)
    return "\n".join(lines)


def accuracy(truth: Sequence[object], pred: Sequence[object]) -> float:
    """Share of items where both agree; NaN for no items."""
    _check_pairs(truth, pred)
    if not truth:
        return float("nan")
    return sum(t == p for t, p in zip(truth, pred, strict=True)) / len(truth)


@dataclass(frozen=True, slots=True)
class Agreement:
    """The figures a judge-accuracy report shows for one set of items."""

    n: int
    accuracy: float  # over the labels as given (e.g. three classes)
    binary_accuracy: float  # refusal vs not
    precision: float  # of refusal, taking `truth` as the reference
    recall: float
    f1: float
    kappa: float  # Cohen's kappa on the binary labels


def _ratio(num: int, den: int) -> float:
    return num / den if den else float("nan")


def refusal_scores(truth: Sequence[bool], pred: Sequence[bool]) -> tuple[float, float, float]:
    """Precision, recall and F1 of the positive (refusal) class; NaN where undefined."""
    _check_pairs(truth, pred)
    tp = sum(t and p for t, p in zip(truth, pred, strict=True))
    fp = sum(p and not t for t, p in zip(truth, pred, strict=True))
    fn = sum(t and not p for t, p in zip(truth, pred, strict=True))
    precision, recall = _ratio(tp, tp + fp), _ratio(tp, tp + fn)
    f1 = _ratio(2 * tp, 2 * tp + fp + fn)
    return precision, recall, f1


def agreement(truth: Sequence[L], pred: Sequence[L],
              is_refusal: Callable[[L], bool]) -> Agreement:
    """All report figures at once; `is_refusal` maps a label to the binary class."""
    _check_pairs(truth, pred)
    bt = [is_refusal(t) for t in truth]
    bp = [is_refusal(p) for p in pred]
    precision, recall, f1 = refusal_scores(bt, bp)
    return Agreement(n=len(truth), accuracy=accuracy(truth, pred),
                     binary_accuracy=accuracy(bt, bp), precision=precision, recall=recall,
                     f1=f1, kappa=cohen_kappa(bt, bp))
