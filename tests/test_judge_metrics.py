"""Agreement metrics: confusion matrix, accuracy, precision/recall/F1 (Cohen's kappa:
test_statistics.py)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orbench_pytest.judges.metrics import (
    accuracy,
    agreement,
    confusion_matrix,
    format_confusion,
    refusal_scores,
)

labels = st.lists(st.sampled_from(["c", "r", "p"]), min_size=1, max_size=60)


def test_confusion_matrix_counts_rows_truth_columns_pred() -> None:
    truth = ["c", "c", "r", "r", "p"]
    pred = ["c", "r", "r", "r", "c"]
    m = confusion_matrix(truth, pred, ["c", "r", "p"])
    assert m == {"c": {"c": 1, "r": 1, "p": 0}, "r": {"c": 0, "r": 2, "p": 0},
                 "p": {"c": 1, "r": 0, "p": 0}}
    table = format_confusion(m, "human", "judge")
    assert table.splitlines()[0].split() == ["human\\judge", "c", "r", "p"]
    assert table.splitlines()[2].split() == ["r", "0", "2", "0"]


def test_confusion_matrix_rejects_unknown_labels_and_length_mismatch() -> None:
    with pytest.raises(ValueError, match="outside"):
        confusion_matrix(["c"], ["x"], ["c", "r"])
    with pytest.raises(ValueError, match="length"):
        accuracy(["c"], ["c", "r"])


def test_refusal_scores_by_hand() -> None:
    truth = [True, True, True, False, False]
    pred = [True, True, False, True, False]
    p, r, f1 = refusal_scores(truth, pred)
    assert (p, r, f1) == pytest.approx((2 / 3, 2 / 3, 2 / 3))
    p, r, f1 = refusal_scores([False, False], [False, False])
    assert math.isnan(p) and math.isnan(r) and math.isnan(f1)


def test_agreement_combines_three_class_and_binary_views() -> None:
    truth = ["c", "r", "p", "p"]
    pred = ["c", "p", "r", "c"]
    a = agreement(truth, pred, lambda x: x in {"r", "p"})
    assert a.n == 4
    assert a.accuracy == pytest.approx(0.25)  # only "c" agrees on the exact class
    assert a.binary_accuracy == pytest.approx(0.75)  # r/p swaps still agree on refusal
    assert (a.precision, a.recall) == pytest.approx((1.0, 2 / 3))


@given(labels)
def test_accuracy_of_identical_labels_is_one(xs: list[str]) -> None:
    assert accuracy(xs, xs) == 1.0


@given(st.lists(st.tuples(st.sampled_from("crp"), st.sampled_from("crp")), min_size=1))
def test_confusion_matrix_total_and_diagonal_match_accuracy(pairs: list[tuple[str, str]]) -> None:
    a, b = [x for x, _ in pairs], [y for _, y in pairs]
    m = confusion_matrix(a, b)
    assert sum(sum(row.values()) for row in m.values()) == len(pairs)
    assert sum(m[k][k] for k in m) / len(pairs) == pytest.approx(accuracy(a, b))
