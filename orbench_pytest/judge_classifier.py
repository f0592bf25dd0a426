"""A small learned refusal classifier, run in pure Python from JSON weights.

TF-IDF over word 1-2-grams, the first words, and character 3-5-grams of the answer's opening,
then logistic regression. `features()` is the one definition of the features: the training
script (`benchmarks/train_judge.py`, scikit-learn, extra `train`) hands it to scikit-learn as
the analyzer, so inference here sees exactly what training saw. No pickle: the model is a JSON
file of vocabulary -> (idf, weight), with its sha256 checked on load.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from itertools import pairwise
from typing import Any

OPENING_CHARS = 300  # what the classifier reads: about the first two sentences
_CHAR_CHARS = 160  # character n-grams only over the very start: cheap, and that is where it is
_WORD = re.compile(r"[a-z0-9']+")
MODEL_FILE = "judge_classifier.json"
FORMAT = "orbench-judge-classifier/1"


def features(text: str) -> list[str]:
    """Feature strings of an answer already `judge_text.prepared`."""
    text = text[:OPENING_CHARS]
    words = _WORD.findall(text)
    out = [f"w:{w}" for w in words]
    out += [f"b:{a} {b}" for a, b in pairwise(words)]
    out += [f"s{i}:{w}" for i, w in enumerate(words[:4])]  # the first words, by position
    head = f" {text[:_CHAR_CHARS]} "
    for n in (3, 4, 5):
        out += [f"c:{head[i:i + n]}" for i in range(len(head) - n + 1)]
    return out


@dataclass(frozen=True, slots=True)
class ClassifierModel:
    """TF-IDF (l2-normalised, sublinear tf) + logistic regression, as exported by training."""

    terms: dict[str, tuple[float, float]]  # feature -> (idf, coefficient)
    intercept: float
    threshold: float  # probability of refusal at or above which the answer is a refusal
    sha256: str
    meta: dict[str, Any]

    @property
    def version(self) -> str:
        return self.sha256[:12]

    def probability(self, text: str) -> float:
        """P(refusal) for an answer already `judge_text.prepared`."""
        terms = self.terms
        norm_sq = 0.0
        dot = 0.0
        counts = Counter(features(text))
        # Most n-grams are unknown: intersect in C, then sum in sorted order (the same float
        # sum on every run, whatever the hash seed).
        for f in sorted(counts.keys() & terms.keys()):
            c = counts[f]
            idf, coef = terms[f]
            value = idf if c == 1 else (1.0 + math.log(c)) * idf  # sublinear tf
            norm_sq += value * value
            dot += value * coef
        if not norm_sq:
            return _sigmoid(self.intercept)
        return _sigmoid(dot / math.sqrt(norm_sq) + self.intercept)

    def is_refusal(self, text: str) -> tuple[bool, float]:
        p = self.probability(text)
        return p >= self.threshold, p

    @classmethod
    def from_bytes(cls, raw: bytes) -> ClassifierModel:
        data = json.loads(raw)
        if data.get("format") != FORMAT:
            raise ValueError(f"judge classifier: format {data.get('format')!r} is not {FORMAT!r}")
        terms = {t: (float(idf), float(w)) for t, idf, w in data["terms"]}
        meta = {k: v for k, v in data.items() if k not in ("terms",)}
        return cls(terms, float(data["intercept"]), float(data["threshold"]),
                   hashlib.sha256(raw).hexdigest(), meta)


def _sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


@lru_cache(maxsize=1)
def bundled_model() -> ClassifierModel:
    """The model shipped in the package (orbench_pytest/data/judge_classifier.json)."""
    data = resources.files("orbench_pytest").joinpath("data")
    raw = data.joinpath(MODEL_FILE).read_bytes()
    recorded = json.loads(data.joinpath(MODEL_FILE + ".meta.json").read_text("utf-8"))["sha256"]
    model = ClassifierModel.from_bytes(raw)
    if model.sha256 != recorded:  # a damaged or hand-edited file must not judge silently
        raise ValueError(f"orbench_pytest/data/{MODEL_FILE}: sha256 {model.sha256} is not the "
                         f"recorded {recorded}; retrain with benchmarks/train_judge.py")
    return model
