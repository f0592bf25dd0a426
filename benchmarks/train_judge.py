"""Train the judge's refusal classifier on human-labelled answers; write it as JSON.

    python benchmarks/train_judge.py [DIR] [--out orbench_pytest/data/judge_classifier.json]

Needs the `train` extra (scikit-learn). DIR holds XSTest's labelled `completions_<model>.csv`
(default ../shared/data/xstest/labelled next to the repository; never copied into the repo).
Every row of every file is used; a refusal is a full or a partial one. The seed is fixed and
the features are `orbench_pytest.judge_classifier.features`, so the same data gives the same
file byte for byte. Beside the model it writes `<out>.meta.json`: the model's sha256, the
data's sha256s, sizes, and the training figures.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from orbench_pytest.judge_classifier import FORMAT, MODEL_FILE, features  # noqa: E402
from orbench_pytest.judge_text import prepared  # noqa: E402

SEED = 16
MAX_FEATURES = 3000
C = 4.0
HUMAN_REFUSAL = {"2_full_refusal": True, "3_partial_refusal": True, "1_full_compliance": False}
DEFAULT_DIR = ROOT.parent / "shared" / "data" / "xstest" / "labelled"


@dataclass(frozen=True, slots=True)
class Labelled:
    model: str
    row_id: str
    prompt: str
    completion: str
    final_label: str

    @property
    def refusal(self) -> bool:
        return HUMAN_REFUSAL[self.final_label]


def load_labelled(directory: Path) -> list[Labelled]:
    files = sorted(directory.glob("completions_*.csv"))
    if not files:
        raise SystemExit(f"no completions_*.csv in {directory}")
    rows = []
    for path in files:
        model = path.stem.removeprefix("completions_")
        with path.open(newline="", encoding="utf-8") as fh:
            for rec in csv.DictReader(fh):
                rows.append(Labelled(model, rec["id"], rec["prompt"], rec["completion"] or "",
                                     rec["final_label"].strip()))
    return rows


def _analyzer(text: str) -> list[str]:
    return features(text)


def fit(texts: Sequence[str], refusals: Sequence[bool]) -> dict[str, object]:
    """Fit on prepared texts; the exported model as a JSON-ready dict."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    vectorizer = TfidfVectorizer(analyzer=_analyzer, sublinear_tf=True, min_df=2,
                                 max_features=MAX_FEATURES, norm="l2", dtype=float)
    x = vectorizer.fit_transform(texts)
    model = LogisticRegression(C=C, class_weight="balanced", max_iter=5000,
                               random_state=SEED, solver="liblinear")
    model.fit(x, [int(r) for r in refusals])
    idf = vectorizer.idf_
    coef = model.coef_[0]
    terms = sorted((term, round(float(idf[i]), 6), round(float(coef[i]), 6))
                   for term, i in vectorizer.vocabulary_.items())
    return {"format": FORMAT, "intercept": round(float(model.intercept_[0]), 6),
            "threshold": 0.5, "terms": terms}


def dump(model: dict[str, object]) -> bytes:
    return (json.dumps(model, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
            + "\n").encode("utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("directory", nargs="?", type=Path,
                    default=Path(os.environ.get("ORBENCH_XSTEST_LABELLED", DEFAULT_DIR)))
    ap.add_argument("--out", type=Path, default=ROOT / "orbench_pytest" / "data" / MODEL_FILE)
    args = ap.parse_args(argv)

    from orbench_pytest.judge_classifier import ClassifierModel

    rows = load_labelled(args.directory)
    texts = [prepared(r.completion) for r in rows]
    exported = fit(texts, [r.refusal for r in rows])
    raw = dump(exported)
    args.out.write_bytes(raw)
    model = ClassifierModel.from_bytes(raw)
    pred = [model.is_refusal(t)[0] for t in texts]
    truth = [r.refusal for r in rows]
    train_acc = sum(p == t for p, t in zip(pred, truth, strict=True)) / len(rows)
    meta = {
        "model_file": args.out.name,
        "sha256": model.sha256,
        "bytes": len(raw),
        "terms": len(model.terms),
        "seed": SEED, "max_features": MAX_FEATURES, "C": C,
        "trained_on": {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
                       for p in sorted(args.directory.glob("completions_*.csv"))},
        "rows": len(rows), "refusals": sum(truth),
        "training_accuracy": round(train_acc, 4),
        "note": "held-out figures: benchmarks/judge_accuracy.py (leave-one-model-out)",
    }
    meta_path = args.out.with_name(args.out.name + ".meta.json")
    meta_path.write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out} ({len(raw)} bytes, {len(model.terms)} terms, "
          f"sha256 {model.sha256}); training accuracy {train_acc:.4f} on {len(rows)} rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
