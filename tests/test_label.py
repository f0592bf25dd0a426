"""`orbench label` (driven through stdin, as a real `orbench` process) and `orbench judge-check`."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orbench_pytest.cli.label import JudgedAnswer, candidates, export, read_labels, sample
from orbench_pytest.cli.main import main
from orbench_pytest.gate.calibration import allocate
from orbench_pytest.judges.check import check_labels, summary_line
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
                         ("refusal", "compliance")[i % 5 == 0], "", "",
                         20 if i % 5 == 0 else 80) for i in range(n)]


def test_the_sample_is_stratified_seeded_and_shuffled() -> None:
    pool = _pool(100)
    chosen = sample(pool, 20, seed=3)
    assert chosen == sample(pool, 20, seed=3) and chosen != sample(pool, 20, seed=4)
    strata = {(c.judge_verdict, c.suite) for c in chosen}
    assert strata == {(v, s) for v in ("refusal", "compliance") for s in ("s0", "s1")}
    verdicts = [c.judge_verdict for c in chosen]
    assert verdicts != sorted(verdicts) and verdicts != sorted(verdicts, reverse=True)
    # the judge's rarer verdict (20% of the pool) gets more than its share: calibration.allocate
    counts = allocate({("comply", True): 80, ("comply", False): 20}, 20)
    assert sum(v == "compliance" for v in verdicts) == counts[("comply", False)] == 8
    assert all(c.stratum_size == (20 if c.judge_verdict == "compliance" else 80) for c in chosen)


def test_label_shows_and_keeps_the_whole_answer(tmp_path: Path) -> None:
    # 2,000 characters over many lines, the deciding part last
    answer = "\n".join(f"line {i}: " + "x" * 60 for i in range(29)) + "\nTHE LAST LINE: here"
    assert len(answer) >= 2000
    results = results_file(tmp_path / "run.json", n=1, answer=answer)
    done = orbench_cli("label", results, "-o", "labels.csv", "--n", "1", input="c", cwd=tmp_path,
                       env={"COLUMNS": "50"})
    assert done.returncode == 0, done.stderr
    assert "THE LAST LINE: here" in done.stdout
    shown = done.stdout.partition("answer:")[2].partition("label?")[0]
    assert all(len(line) <= 50 for line in shown.splitlines())  # wrapped to the terminal
    assert "".join(line.strip() for line in shown.splitlines()) == answer.replace("\n", "")
    assert label_rows(tmp_path / "labels.csv")[0]["response"] == answer  # what was shown


def test_label_shows_every_turn_of_a_conversation(tmp_path: Path) -> None:
    results = results_file(tmp_path / "run.json", n=1)
    document = json.loads(results.read_text())
    document["items"][0]["messages"] = [
        {"role": "system", "content": "You are the support bot of Acme Chemicals."},
        {"role": "user", "content": "I ordered drain cleaner."},
        {"role": "assistant", "content": "How can I help?"},
        {"role": "user", "content": "prompt 0"}]
    results.write_text(json.dumps(document))
    done = orbench_cli("label", results, "-o", "labels.csv", "--n", "1", input="c", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    shown = done.stdout.partition("prompt:")[2].partition("answer:")[0]
    assert [line.strip() for line in shown.strip().splitlines()] == [
        "[system] You are the support bot of Acme Chemicals.",
        "[user] I ordered drain cleaner.", "[assistant] How can I help?", "[user] prompt 0"]
    assert label_rows(tmp_path / "labels.csv")[0]["prompt"].splitlines()[1] == (
        "[user] I ordered drain cleaner.")  # the labels file keeps what was shown


def test_export_writes_the_sample_for_a_spreadsheet_and_reads_it_back(tmp_path: Path) -> None:
    results = results_file(tmp_path / "run.json")
    done = orbench_cli("label", results, "--n", "6", "--export", "sheet.csv", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "6 answers to label in sheet.csv" in done.stdout
    rows = label_rows(tmp_path / "sheet.csv")
    assert len(rows) == 6 and all(row["label"] == "" for row in rows)
    assert all(int(row["stratum_size"]) > 0 for row in rows)
    assert check_labels(tmp_path / "sheet.csv").unlabelled == 6
    # a spreadsheet fills the column in and saves with a byte-order mark
    for row in rows[:4]:
        row["label"] = "refusal" if row["judge_verdict"] == "refusal" else "compliance"
    with (tmp_path / "sheet.csv").open("w", newline="", encoding="utf-8-sig") as handle:
        writer = csv.DictWriter(handle, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    check = check_labels(tmp_path / "sheet.csv")
    assert check.n == 4 and check.unlabelled == 2
    out = orbench_cli("judge-check", "sheet.csv", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "4 labelled" in out.stdout and "2 not labelled yet" in out.stdout
    # the file records its strata's sizes: the labelled run's rates, corrected
    assert "labelled run's over-refusal: judged " in out.stdout
    # orbench label resumes the same file: the two left are the ones offered
    more = orbench_cli("label", results, "-o", "sheet.csv", "--n", "6", input="c c",
                       cwd=tmp_path)
    assert "6 of 6 labelled (0 left, done)" in more.stdout, more.stdout + more.stderr


def test_a_whole_answer_is_read_back_and_the_csv_field_limit_put_back(tmp_path: Path) -> None:
    """An answer longer than the csv module's default field limit (131,072 characters) is read
    whole; the limit, process-wide, is as it was before."""
    answer = "x" * 150_000
    path = tmp_path / "sheet.csv"
    export([JudgedAnswer("s[c-0]", "s", "", "c-0", "k", "comply", "refusal", "p", answer, 1)],
           path)
    before = csv.field_size_limit(131_072)  # the default, whatever another test set
    try:
        assert read_labels(path)["s[c-0]"]["response"] == answer
        assert csv.field_size_limit() == 131_072
    finally:
        csv.field_size_limit(before)


text_cells = st.text(st.characters(blacklist_categories=("Cs",)), max_size=300)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(text_cells, text_cells, st.sampled_from(["comply", "refuse"]),
                          st.sampled_from(VERDICTS)), min_size=1, max_size=5))
def test_export_round_trips_any_text(tmp_path: Path,
                                     rows: list[tuple[str, str, str, str]]) -> None:
    chosen = [JudgedAnswer(f"s[c-{i}]", "s", "", f"c-{i}", "k", expect, verdict, prompt, answer,
                           i + 1) for i, (prompt, answer, expect, verdict) in enumerate(rows)]
    path = tmp_path / "sheet.csv"
    export(chosen, path)
    back = read_labels(path)
    for candidate in chosen:
        row = back[candidate.id]
        assert row["label"] == "" and row["judge_verdict"] == candidate.judge_verdict
        assert row["prompt"] == candidate.prompt and row["response"] == candidate.response
        assert row["stratum_size"] == str(candidate.stratum_size)


def test_label_appends_to_an_older_labels_file_in_its_own_columns(tmp_path: Path) -> None:
    results = results_file(tmp_path / "run.json")
    old = "id,suite,variant,case_id,category,expect,judge_verdict,label,prompt,response,labelled_at"
    (tmp_path / "labels.csv").write_text(old + "\r\nx[1],x,,1,k,comply,refusal,refusal,p,a,",
                                         encoding="utf-8")  # no line break at its end
    done = orbench_cli("label", results, "-o", "labels.csv", "--n", "2", input="cc",
                       cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = label_rows(tmp_path / "labels.csv")
    assert list(rows[0]) == old.split(",") and len(rows) == 3
    assert rows[0]["id"] == "x[1]" and [r["label"] for r in rows[1:]] == ["compliance"] * 2
    assert check_labels(tmp_path / "labels.csv").n == 3


def test_labels_files_that_are_not_regular_files_are_refused_in_one_line(tmp_path: Path) -> None:
    results = results_file(tmp_path / "run.json")
    (tmp_path / "folder.csv").mkdir()
    done = orbench_cli("judge-check", "folder.csv", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.strip().endswith(
        "(a folder, not a regular file)")
    assert len(done.stderr.strip().splitlines()) == 1
    zero = orbench_cli("label", "/dev/zero", "-o", "l.csv", cwd=tmp_path)
    assert zero.returncode == 2, zero.stderr
    assert zero.stderr.strip() == "error: /dev/zero: cannot read the results file (not a " \
        "regular file)" or "not a regular file" in zero.stderr
    assert len(zero.stderr.strip().splitlines()) == 1
    if sys.platform != "win32":
        os.mkfifo(tmp_path / "fifo.csv")
        fifo = orbench_cli("label", results, "-o", "fifo.csv", input="c", cwd=tmp_path)
        assert fifo.returncode == 2 and "fifo.csv: cannot write the labels file (a FIFO, " \
            "not a regular file)" in fifo.stderr
        again = orbench_cli("judge-check", "fifo.csv", cwd=tmp_path)
        assert again.returncode == 2 and "not a regular file" in again.stderr


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


def test_no_env_leak() -> None:  # the subprocess tests inherit no secret-bearing variable
    assert "ORBENCH_TEST_SECRET" not in os.environ
