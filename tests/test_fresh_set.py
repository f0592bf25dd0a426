"""The judge's fresh test set (benchmarks/data/fresh_local_labels.csv, scripts/fresh_set.py):
well formed, new to every earlier labelled set, and the very prompts the script draws."""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

from tests.helpers import REPO, load_script, second_set_files, second_set_rows, shared_data

LABELS = REPO / "benchmarks" / "data" / "fresh_local_labels.csv"
CLASSES = {"compliance", "refusal", "partial_refusal"}


def _rows() -> list[dict[str, str]]:
    with LABELS.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _key(row: dict[str, str]) -> tuple[str, str]:
    """(suite, case id) of a fresh-set row: id is suite[case]."""
    return row["suite"], row["id"].removeprefix(row["suite"] + "[").removesuffix("]")


def test_every_row_is_labelled_with_one_of_three_classes_and_keeps_no_prompt_text() -> None:
    rows = _rows()
    assert rows and {row["label"] for row in rows} <= CLASSES
    assert "prompt" not in rows[0]  # the prompts stay in ../shared/data: id and sha256 only
    assert all(len(row["prompt_sha256"]) == 64 and row["answer"].strip() for row in rows)


def test_each_prompt_is_asked_of_one_model_only_in_the_quotas_of_the_script() -> None:
    fresh_set = load_script("fresh_set")
    rows = _rows()
    keys = [_key(row) for row in rows]
    assert len(set(keys)) == len(keys)
    counts = Counter((row["model"], row["suite"]) for row in rows)
    assert counts == Counter({(model, suite): n for model, quota in fresh_set.QUOTAS.items()
                              for suite, n in quota.items()})


def test_no_prompt_of_the_fresh_set_is_in_an_earlier_labelled_set() -> None:
    prefixes = {"hard-1k/": "or-bench-hard-1k", "toxic/": "or-bench-toxic"}
    earlier = set()
    for path in second_set_files():
        for row in second_set_rows(path):
            for prefix, suite in prefixes.items():
                if row["id"].startswith(prefix):
                    earlier.add((suite, row["id"].removeprefix(prefix)))
    assert len(earlier) >= 300
    assert not earlier & {_key(row) for row in _rows()}


def test_the_labels_are_of_the_prompts_the_script_draws_and_their_text_matches() -> None:
    shared_data("orbench")
    shared_data("xstest")
    fresh_set = load_script("fresh_set")
    drawn = {(p.suite, p.case_id): (model, p.sha256)
             for model, prompts in fresh_set.select().items() for p in prompts}
    assert {_key(row): (row["model"], row["prompt_sha256"]) for row in _rows()} == drawn


def test_keys_follow_the_order_orbench_label_shows_the_answers_in(tmp_path: Path) -> None:
    from orbench_pytest.cli.label import JudgedAnswer, sample

    fresh_set = load_script("fresh_set")
    labels = tmp_path / "labels.csv"
    ids = [f"xstest[{i}]" for i in range(1, 8)]
    names = ["compliance", "refusal", "partial_refusal", "refusal", "compliance", "refusal",
             "compliance"]
    with labels.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "suite", "model", "label"])
        writer.writerows([item, "xstest", "local", name]
                         for item, name in zip(ids, names, strict=True))
    verdicts = ["refusal", "compliance", "compliance", "partial_refusal", "refusal",
                "compliance", "refusal"]  # the judge's, which the order must not follow
    pool = [JudgedAnswer(item, "xstest", "", item, "", "comply", verdict, "", "")
            for item, verdict in zip(ids, verdicts, strict=True)]
    shown = sample(pool, len(pool), 0)
    wanted = "".join({"compliance": "c", "refusal": "r", "partial_refusal": "p"}[
        dict(zip(ids, names, strict=True))[c.id]] for c in shown)
    assert fresh_set.label_keys(labels, "local") == wanted + "\n"


def test_keys_are_of_the_named_model_only(tmp_path: Path) -> None:
    labels = tmp_path / "labels.csv"
    labels.write_text("id,suite,model,label\nxstest[1],xstest,local,refusal\n")
    assert load_script("fresh_set").label_keys(labels, "local") == "r\n"
    assert load_script("fresh_set").label_keys(labels, "local:smollm2") == "\n"
