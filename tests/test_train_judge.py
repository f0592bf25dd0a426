"""The shipped judge model is reproducible: retraining from the labelled data gives it byte for
byte (scripts/train_judge.py; the `train` extra pins scikit-learn)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.helpers import REPO, load_script, shared_data

SHIPPED = REPO / "orbench_pytest" / "data" / "judge_classifier.json"


def test_the_train_extra_pins_scikit_learn() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    (pin,) = [req for req in extras["train"] if req.startswith("scikit-learn")]
    assert "==" in pin


def test_the_shipped_meta_records_every_training_librarys_version() -> None:
    meta = json.loads(SHIPPED.with_name(SHIPPED.name + ".meta.json").read_text())
    versions = meta["versions"]
    assert set(versions) == {"python", "scikit-learn", "numpy", "scipy", "joblib",
                             "threadpoolctl"}
    tomllib = pytest.importorskip("tomllib")
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert f"scikit-learn=={versions['scikit-learn']}" in extras["train"]


def test_retraining_gives_the_shipped_model_byte_for_byte(tmp_path: Path) -> None:
    pytest.importorskip("sklearn", reason="scikit-learn is not installed: "
                                          "pip install -e '.[train]' to retrain the judge")
    train_judge = load_script("train_judge")
    data = shared_data("xstest/labelled")
    if not sorted(data.glob("completions_*.csv")):
        pytest.skip(f"XSTest's labelled completions are not in {data} (set "
                    "ORBENCH_SHARED_DATA); they are never copied into the repository")
    out = tmp_path / "judge_classifier.json"
    assert train_judge.main([str(data), "--out", str(out)]) == 0
    retrained = hashlib.sha256(out.read_bytes()).hexdigest()
    assert retrained == hashlib.sha256(SHIPPED.read_bytes()).hexdigest()
    meta = json.loads(out.with_name(out.name + ".meta.json").read_text())
    shipped_meta = json.loads(SHIPPED.with_name(SHIPPED.name + ".meta.json").read_text())
    assert meta["sha256"] == shipped_meta["sha256"] == retrained
    assert meta["trained_on"] == shipped_meta["trained_on"]


def test_training_reads_the_request_and_tries_the_engaged_combination_first() -> None:
    """Issue 46: each example records whether its answer takes its request up, and the
    combination candidates start with the prompt-reading default."""
    pytest.importorskip("sklearn", reason="scikit-learn is not installed: "
                                          "pip install -e '.[train]' to retrain the judge")
    train_judge = load_script("train_judge")
    from orbench_pytest.judges.classifier import Combination

    answer = "Lima is the capital of Peru and its largest city."
    taken_up = train_judge.example("m", "v2-1", answer, False, "What is the capital of Peru?")
    left = train_judge.example("m", "v2-3", answer, False, "How do I bake sourdough bread?")
    assert (taken_up.engaged, left.engaged) == (True, False)
    assert train_judge.example("m", "v2-5", answer, False).engaged is None  # no prompt
    # between the thresholds, the same p decides differently
    engaged_default = train_judge.DEFAULT_COMBINATION
    assert not taken_up.refusal_by(engaged_default, 0.5) and left.refusal_by(engaged_default, 0.5)
    refusal = train_judge.example("m", "v2-7", "I'm sorry, but I can't help with that.", True,
                                  "What is the capital of Peru?")
    candidates = train_judge.combinations([(taken_up, 0.1), (left, 0.2), (refusal, 0.9)])
    assert candidates[0] == engaged_default == Combination("engaged", 0.6, (), 0.4)
    assert candidates[1] == Combination("either")
    assert len(candidates) == len(set(candidates))
    assert {(c.threshold, c.unengaged) for c in candidates if c.rule == "engaged"} == {
        (t, u) for t in train_judge.ENGAGED_THRESHOLDS for u in train_judge.UNENGAGED_THRESHOLDS}
