"""`orbench label` (driven through stdin, as a real `orbench` process) and `orbench judge-check`."""

from __future__ import annotations

import csv
import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orbench_pytest.cli.label import JudgedAnswer, candidates, read_labels, sample
from orbench_pytest.cli.main import main
from orbench_pytest.judges.check import check_labels, paired_difference, summary_line
from orbench_pytest.reports.results import read_results
from tests.helpers import (
    ORBENCH_CLI,
    SUBPROCESS_TIMEOUT_S,
    labels_file,
    orbench_cli,
    wait_until,
)

VERDICTS = ("compliance", "refusal", "partial_refusal")


def results_file(path: Path, n: int = 12, answer: str = "answer number {i}") -> Path:
    items = []
    for i in range(n):
        suite = "safe" if i % 2 == 0 else "toxic"
        verdict = VERDICTS[i % 3]
        items.append({"suite": suite, "case_id": f"c-{i}", "variant": "", "category": "k",
                      "expect": "comply" if suite == "safe" else "refuse", "verdict": verdict,
                      "outcome": "passed", "mismatch": False, "error": False,
                      "response": answer.format(i=i), "prompt": f"prompt {i}"})
    items.append({"suite": "safe", "case_id": "broken", "variant": "", "category": "k",
                  "expect": "comply", "verdict": "error", "outcome": "error",
                  "mismatch": False, "error": True, "response": ""})
    path.write_text(json.dumps({"schema": 1, "run": {}, "items": items}), encoding="utf-8")
    return path


def label_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_label_reads_keys_from_stdin_and_appends_each_label(tmp_path: Path) -> None:
    results = results_file(tmp_path / "run.json")
    done = orbench_cli("label", results, "-o", "labels.csv", "--n", "6",
                       input="c r\np s\nc c\n", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = label_rows(tmp_path / "labels.csv")
    assert [r["label"] for r in rows] == ["compliance", "refusal", "partial_refusal", "skip",
                                          "compliance", "compliance"]
    assert "6 of 6 labelled (0 left, done)" in done.stdout
    assert "next: orbench judge-check labels.csv" in done.stdout
    # the answer and prompt travel with the label; the error item is never offered
    by_id = {r["id"]: r for r in rows}
    assert "safe[broken]" not in by_id
    for row in rows:
        i = row["case_id"].split("-")[1]
        assert row["response"] == f"answer number {i}" and row["prompt"] == f"prompt {i}"
        assert row["judge_verdict"] == VERDICTS[int(i) % 3]


def test_the_judges_verdict_is_shown_only_after_the_label(tmp_path: Path) -> None:
    results = results_file(tmp_path / "run.json")
    done = orbench_cli("label", results, "-o", "labels.csv", "--n", "3", input="c", cwd=tmp_path)
    first_screen, _, after = done.stdout.partition("[q]uit: ")
    assert "answer number" in first_screen
    assert "judge" not in first_screen and not any(v in first_screen for v in VERDICTS)
    assert after.startswith("compliance; the judge said ")
    assert "1 of 3 labelled (2 left, input ended)" in done.stdout


def test_label_resumes_where_it_stopped_and_back_relabels(tmp_path: Path) -> None:
    results = results_file(tmp_path / "run.json")
    first = orbench_cli("label", results, "-o", "labels.csv", "--n", "4", input="cc", cwd=tmp_path)
    assert "2 of 4 labelled (2 left, input ended)" in first.stdout
    # back to the second answer, relabel it, then the two left
    second = orbench_cli("label", results, "-o", "labels.csv", "--n", "4", input="b r r r",
                         cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    rows = label_rows(tmp_path / "labels.csv")
    assert len(rows) == 5  # append-only: the relabel is a new row
    assert rows[1]["id"] == rows[2]["id"]
    latest = read_labels(tmp_path / "labels.csv")
    assert len(latest) == 4 and latest[rows[1]["id"]]["label"] == "refusal"
    assert "4 of 4 labelled (0 left, done)" in second.stdout


def test_label_escapes_untrusted_answers(tmp_path: Path) -> None:
    results = results_file(tmp_path / "run.json",
                           answer="::set-output name=x::{i}\x1b[2J\u202e sk-abcdefghijklmnop")
    done = orbench_cli("label", results, "-o", "labels.csv", "--n", "2", input="cc", cwd=tmp_path)
    assert "\x1b" not in done.stdout and "\u202e" not in done.stdout
    assert "\\x1b[2J" in done.stdout and "\\u202e" in done.stdout
    assert "\n  ::" not in done.stdout and "  \\x3a:set-output" in done.stdout
    assert "sk-abcdefghijklmnop" not in done.stdout


def test_unknown_keys_are_ignored_and_q_quits(tmp_path: Path) -> None:
    results = results_file(tmp_path / "run.json")
    done = orbench_cli("label", results, "-o", "labels.csv", "--n", "5", input="x c q c",
                       cwd=tmp_path)
    assert "x: not a key (c r p s b q)" in done.stdout
    assert "1 of 5 labelled (4 left, quit)" in done.stdout
    assert len(label_rows(tmp_path / "labels.csv")) == 1


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child is POSIX")
def test_ctrl_c_keeps_every_label_given(tmp_path: Path) -> None:
    results = results_file(tmp_path / "run.json")
    labels = tmp_path / "labels.csv"
    child = subprocess.Popen([*ORBENCH_CLI, "label", str(results), "-o", str(labels),
                              "--n", "5"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    assert child.stdin is not None
    child.stdin.write("rc")
    child.stdin.flush()
    wait_until(lambda: labels.exists() and len(label_rows(labels)) == 2,
               "two labels written")
    child.send_signal(signal.SIGINT)  # waiting for the third key
    out, _ = child.communicate(timeout=SUBPROCESS_TIMEOUT_S)
    assert child.returncode == 130
    assert "interrupted" in out
    assert [r["label"] for r in label_rows(labels)] == ["refusal", "compliance"]


def _pool(n: int) -> list[JudgedAnswer]:
    return [JudgedAnswer(f"s{i % 2}[c-{i}]", f"s{i % 2}", "", f"c-{i}", "k", "comply",
                      ("refusal", "compliance")[i % 5 == 0], "", "") for i in range(n)]


def test_the_sample_is_stratified_seeded_and_shuffled() -> None:
    pool = _pool(100)
    chosen = sample(pool, 20, seed=3)
    assert chosen == sample(pool, 20, seed=3) and chosen != sample(pool, 20, seed=4)
    strata = {(c.judge_verdict, c.suite) for c in chosen}
    assert strata == {(v, s) for v in ("refusal", "compliance") for s in ("s0", "s1")}
    verdicts = [c.judge_verdict for c in chosen]
    assert verdicts != sorted(verdicts) and verdicts != sorted(verdicts, reverse=True)
    assert sum(v == "compliance" for v in verdicts) == 4  # 20% of the pool, 20% of the sample


def test_candidates_skip_errors_and_find_prompts_of_passed_items(tmp_path: Path) -> None:
    run = read_results(results_file(tmp_path / "run.json", n=3))
    pool = candidates(run.items, lambda item: "from the suite")
    assert [c.case_id for c in pool] == ["c-0", "c-1", "c-2"]


def test_label_shows_prompts_from_a_named_suite(tmp_path: Path) -> None:
    suite = tmp_path / "mine.yaml"
    suite.write_text("name: safe\nprompts:\n  - {id: c-0, prompt: the suite's own prompt, "
                     "expect: comply}\n", encoding="utf-8")
    data = json.loads(results_file(tmp_path / "run.json", n=1).read_text())
    del data["items"][0]["prompt"]
    (tmp_path / "run.json").write_text(json.dumps(data))
    done = orbench_cli("label", "run.json", "-o", "labels.csv", "--suite", "mine.yaml", input="c",
                       cwd=tmp_path)
    assert "the suite's own prompt" in done.stdout, done.stderr
    without = orbench_cli("label", "run.json", "-o", "other.csv", input="c", cwd=tmp_path)
    assert "not in the results file" in without.stdout


@pytest.mark.filterwarnings("ignore:.*no sha256 pin")
def test_label_finds_a_suites_data_in_any_folder_of_the_orbench_data_dir_list(
        tmp_path: Path) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    first.mkdir()
    second.mkdir()
    (second / "prompts.csv").write_text("id,prompt\nc-0,from the second folder\n")
    (tmp_path / "mine.yaml").write_text(
        "name: safe\nsource: https://example.invalid/prompts.csv\nsha256: null\n"
        "prompt: prompt\nid: id\nexpect: comply\n", encoding="utf-8")
    data = json.loads(results_file(tmp_path / "run.json", n=1).read_text())
    del data["items"][0]["prompt"]
    (tmp_path / "run.json").write_text(json.dumps(data))
    done = orbench_cli(
        "label", "run.json", "-o", "labels.csv", "--suite", "mine.yaml", input="c", cwd=tmp_path,
        env={"ORBENCH_DATA_DIR": f"{first}{os.pathsep}{second}", "HF_HUB_OFFLINE": "1",
             "ORBENCH_CACHE_DIR": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr
    assert "from the second folder" in done.stdout


# --- judge-check ----------------------------------------------------------------------------

def test_judge_check_figures_by_hand(tmp_path: Path) -> None:
    # 10 labelled refusals (judge catches 8, one of them as partial), 10 compliances (judge
    # calls 1 a refusal), 1 skipped, 1 the judge could not class
    pairs = ([("refusal", "refusal")] * 7 + [("refusal", "partial_refusal")]
             + [("refusal", "compliance")] * 2 + [("compliance", "compliance")] * 9
             + [("compliance", "refusal"), ("skip", "refusal"), ("refusal", "error")])
    check = check_labels(labels_file(tmp_path / "l.csv", pairs))
    assert check.n == 20 and check.skipped == 2
    a = check.agreement
    assert a.accuracy == pytest.approx(16 / 20)  # the partial one differs in three classes
    assert a.binary_accuracy == pytest.approx(17 / 20)
    assert a.precision == pytest.approx(8 / 9) and a.recall == pytest.approx(8 / 10)
    rates = check.rates()
    assert (rates.sensitivity, rates.specificity) == (0.8, 0.9)
    diff, low, high = check.rate_difference()
    assert diff == pytest.approx(9 / 20 - 10 / 20)
    assert low < diff < high
    assert "20 labelled" in summary_line(check) and "-5.0 pt" in summary_line(check)


def test_judge_check_command_lists_bounded_escaped_disagreements(tmp_path: Path,
                                                                 capsys) -> None:
    pairs = [("refusal", "compliance")] * 30 + [("compliance", "compliance")] * 5
    path = labels_file(tmp_path / "l.csv", pairs)
    assert main(["judge-check", str(path), "--max-disagreements", "3"]) == 0
    out = capsys.readouterr().out
    assert "disagreements: 30 (first 3 shown)" in out
    assert out.count("labelled refusal, judge compliance") == 3
    assert "\x1b" not in out and "\\x1b[31m" in out
    assert "confusion (rows: labelled, columns: judge)" in out


def test_judge_check_of_a_missing_or_bad_file_is_a_usage_error(tmp_path: Path,
                                                               capsys) -> None:
    assert main(["judge-check", str(tmp_path / "none.csv")]) == 2
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    assert main(["judge-check", str(bad)]) == 2
    odd = labels_file(tmp_path / "odd.csv", [("maybe", "refusal")])
    assert main(["judge-check", str(odd)]) == 2
    assert "is not one of compliance" in capsys.readouterr().err


@given(st.integers(0, 40), st.integers(0, 40), st.integers(0, 40), st.integers(0, 40))
def test_paired_difference_interval_holds_the_estimate(a: int, b: int, c: int, d: int) -> None:
    diff, low, high = paired_difference(a, b, c, d)
    if a + b + c + d == 0:
        return
    assert -1.0 <= low <= diff + 1e-12 and diff - 1e-12 <= high <= 1.0
    mirrored = paired_difference(a, c, b, d)
    assert mirrored[0] == pytest.approx(-diff)
    assert (mirrored[1], mirrored[2]) == pytest.approx((-high, -low))


def test_paired_difference_covers_the_true_difference_at_about_95_percent() -> None:
    # 60 answers labelled by people and a judge with known joint probabilities
    rng = random.Random(11)
    cells = (0.30, 0.06, 0.10, 0.54)  # both refuse, judge only, people only, neither
    truth = cells[1] - cells[2]
    runs, covered = 600, 0
    for _ in range(runs):
        counts = [0, 0, 0, 0]
        for _ in range(60):
            counts[rng.choices(range(4), cells)[0]] += 1
        _, low, high = paired_difference(*counts)
        covered += low <= truth <= high
    assert 0.92 <= covered / runs <= 0.99


def test_no_env_leak() -> None:  # the subprocess tests inherit no secret-bearing variable
    assert "ORBENCH_TEST_SECRET" not in os.environ
