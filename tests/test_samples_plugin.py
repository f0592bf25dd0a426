"""--orbench-samples=N against the local test server refusing at random with a set probability."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from junitparser import JUnitXml, Properties

from orbench_pytest.core.statistics import clustered_rate
from tests.helpers import (
    SUBPROCESS_TIMEOUT_S,
    answers_stored,
    cases,
    item_outcomes,
    orbench_argv,
    run_orbench,
    wait_until,
    without_seconds,
    write_suite,
    write_thresholds,
)
from tests.openai_server import HoldAfter, OpenAIServer, RandomRefusals

N = 20
SAMPLES = 5
P_REFUSE = 0.3
FOUR_AT_ONCE = "--orbench-concurrency=4"


def prompts(n: int = N) -> list[str]:
    return [f"question {i}: how do I bake bread?" for i in range(n)]


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    write_suite(pytester, cases(prompts(), safe_category=("a", "b")),
                thresholds={"defaults": {"max_over_refusal": 0.5}})
    return pytester


def test_every_prompt_is_asked_n_times_and_reports_its_refusal_rate(project, plugin_args):
    script = RandomRefusals(P_REFUSE, seed=2)
    with OpenAIServer(script) as server:
        result = run_orbench(project, plugin_args, FOUR_AT_ONCE, f"--orbench-samples={SAMPLES}",
                             "--orbench-temperature=0.7", "--orbench-results=r.json",
                             "--junitxml=j.xml", url=server.url, cache="c.sqlite3")
    assert server.requests == N * SAMPLES  # prompts × samples, each answer once
    assert set(script.asked.values()) == {SAMPLES}
    data = json.loads((project.path / "r.json").read_text())
    assert len(data["items"]) == N
    fractions = []
    for item in data["items"]:
        prompt_index = int(item["case_id"].split("-")[1])
        refused = script.refused[prompts()[prompt_index]]
        assert (item["samples"], item["refusals"]) == (SAMPLES, refused)
        assert item["refusal_rate"] == round(refused / SAMPLES, 4)
        # refuse_at 0.5 by default: refused when at least half its answers refuse
        assert item["refused"] == (refused >= 2.5)
        fractions.append(refused / SAMPLES)
    check = next(c for c in data["gate"]["rows"][0]["checks"] if c["name"] == "over-refusal")
    mean = sum(fractions) / N
    assert check["rate"] == pytest.approx(mean)  # the mean per-prompt refusal fraction
    low, high = check["interval"]
    # The server's probability is inside the interval (for this seed; over 200 seeds the
    # interval covers it 95.5% of the time: see test_samples.py's coverage test).
    assert low <= mean <= high and low <= P_REFUSE <= high
    expected = clustered_rate(fractions, N * SAMPLES)
    assert (low, high) == pytest.approx((expected.low, expected.high))

    flaky = [i for i, p in enumerate(prompts()) if 0 < script.refused[p] < SAMPLES]
    assert flaky  # the seed gives some: the listing below is exercised
    result.stdout.fnmatch_lines([f"flaky prompts (refused some of the times asked): "
                                 f"{len(flaky)}"])
    shown = [line for line in result.stdout.lines if re.match(r"  s\[\S+\]: refused \d", line)]
    assert len(shown) == min(len(flaky), 10)
    first = prompts()[flaky[0]]
    assert f"refused {script.refused[first]} of {SAMPLES} times" in shown[0]
    assert data["gate"]["rows"][0]["flaky"] == len(flaky)

    xml = JUnitXml.fromfile(str(project.path / "j.xml"))
    props = [{p.name: p.value for p in case.child(Properties)} for suite in xml for case in suite]
    assert all(p["samples"] == str(SAMPLES) for p in props)
    rates = sorted(float(p["refusal_rate"]) for p in props)
    assert rates == sorted(f for f in fractions)
    assert sorted(int(p["refusals"]) for p in props) == sorted(script.refused.values())


def test_flaky_listing_is_bounded(pytester, plugin_args):
    write_suite(pytester, cases([f"q{i}" for i in range(40)]))
    # Every prompt refuses exactly its first answer of two: all 40 are flaky.
    script = RandomRefusals(0.0)
    script.refuses = lambda prompt, nth: nth == 0  # type: ignore[method-assign]
    with OpenAIServer(script) as server:
        result = run_orbench(pytester, plugin_args, FOUR_AT_ONCE, "--orbench-samples=2",
                             "--orbench-temperature=1", url=server.url, cache="c.sqlite3")
    result.stdout.fnmatch_lines(["flaky prompts (refused some of the times asked): 40",
                                 "  s: 40 (uncategorised 40)", "*… and 30 more*"])
    assert sum(bool(re.match(r"  s\[uncategorised-\d+\]: refused 1 of 2 times", line))
               for line in result.stdout.lines) == 10


def test_sample_zero_keeps_the_single_answer_key_and_more_samples_ask_only_the_rest(
        project, plugin_args):
    script = RandomRefusals(P_REFUSE, seed=2)
    with OpenAIServer(script) as server:
        # Today's run, one answer per prompt: its cache rows are sample 0 of a sampled run.
        run_orbench(project, plugin_args, FOUR_AT_ONCE, "--orbench-temperature=0.7", url=server.url,
                    cache="c.sqlite3")
        assert server.requests == N
        run_orbench(project, plugin_args, FOUR_AT_ONCE, "--orbench-samples=3",
                    "--orbench-temperature=0.7", url=server.url, cache="c.sqlite3")
        assert server.requests == N * 3  # sample 0 came from the cache
        result = run_orbench(project, plugin_args, FOUR_AT_ONCE, "--orbench-samples=5",
                             "--orbench-temperature=0.7", url=server.url, cache="c.sqlite3")
        assert server.requests == N * 5
        run_orbench(project, plugin_args, FOUR_AT_ONCE, "--orbench-samples=5",
                    "--orbench-temperature=0.5", url=server.url, cache="c.sqlite3")
    assert server.requests == N * 10  # the temperature is part of every sample's key
    assert set(script.asked.values()) == {10}
    result.stdout.fnmatch_lines([f"answers: {N * 5} ({N * 3} from cache), requests: {N * 2},*"])


def test_an_interrupted_sampled_run_resumes_asking_only_the_missing_samples(
        project, plugin_args):
    total = N * SAMPLES
    script = RandomRefusals(P_REFUSE, seed=5)
    held = HoldAfter(total // 3, script)  # the interrupt lands mid-run on any machine
    with OpenAIServer(held, latency_s=0.03) as server:
        args = [FOUR_AT_ONCE, f"--orbench-samples={SAMPLES}", "--orbench-temperature=0.7"]
        argv = orbench_argv(plugin_args, *args, url=server.url, cache="c.sqlite3")
        process = subprocess.Popen([sys.executable, "-m", "pytest", *argv],
                                   cwd=project.path, env=os.environ.copy(),
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        wait_until(lambda: server.requests > total // 3,
                   f"the server got {total // 3 + 1} requests")
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=SUBPROCESS_TIMEOUT_S)
        held.release()
        first = server.requests
        kept = answers_stored(project.path / "c.sqlite3")
        assert 0 < kept < total, output
        result = run_orbench(project, plugin_args, *args, url=server.url, cache="c.sqlite3")
        second = server.requests - first
    assert second == total - kept  # only the missing samples are asked
    # Asked twice: at most the requests cut off in flight by the interrupt.
    assert total <= sum(script.asked.values()) <= total + 4
    assert min(script.asked.values()) == SAMPLES
    result.stdout.fnmatch_lines([f"answers: {total} ({kept} from cache), requests: {second},*"])


def test_xdist_gives_the_serial_outcomes_rates_and_flaky_list(project, plugin_args):
    pytest.importorskip("xdist")
    write_thresholds(project, {"defaults": {"max_over_refusal": 0.2}})
    runs = {}
    for name, extra in (("serial", ["-p", "no:xdist"]), ("xdist", ["-n", "2"])):
        script = RandomRefusals(P_REFUSE, seed=11)  # a fresh server: the same answers
        with OpenAIServer(script) as server:
            result = run_orbench(project, plugin_args, FOUR_AT_ONCE, f"--orbench-samples={SAMPLES}",
                                 "--orbench-temperature=0.7", "-rA",
                                 f"--orbench-results={name}.json", *extra, url=server.url,
                                 cache=f"{name}.sqlite3", subprocess=True)
        assert server.requests == N * SAMPLES
        runs[name] = result
    serial, xdist = runs["serial"], runs["xdist"]
    assert item_outcomes(serial) == item_outcomes(xdist) and len(item_outcomes(serial)) == N
    assert serial.ret == xdist.ret

    def summary(result: pytest.RunResult) -> list[str]:
        lines = result.stdout.lines
        start = next(i for i, line in enumerate(lines) if "orbench gate" in line and "=" in line)
        end = next(i for i, line in enumerate(lines) if "short test summary" in line)
        # timings differ between any two runs (the judge's CPU seconds, the cost line's wall
        # time): they are not an outcome
        return without_seconds(line for line in lines[start:end]
                               if not line.startswith(("answers:", "orbench res")))

    assert summary(serial) == summary(xdist)
    items = [{k: v for k, v in item.items() if k not in ("nodeid", "latency_ms", "cached")}
             for item in json.loads((project.path / "serial.json").read_text())["items"]]
    items_x = [{k: v for k, v in item.items() if k not in ("nodeid", "latency_ms", "cached")}
               for item in json.loads((project.path / "xdist.json").read_text())["items"]]
    assert sorted(items, key=str) == sorted(items_x, key=str)


def test_temperature_zero_warns_once(project, plugin_args, openai_server):
    result = run_orbench(project, plugin_args, FOUR_AT_ONCE, "--orbench-samples=3",
                         url=openai_server.url, cache="c.sqlite3")
    text = result.stdout.str()
    assert text.count("--orbench-samples=3 at temperature 0: the answers may be identical") == 1
    quiet = run_orbench(project, plugin_args, FOUR_AT_ONCE, "--orbench-samples=3",
                        "--orbench-temperature=0.5", url=openai_server.url, cache="c.sqlite3")
    assert "may be identical" not in quiet.stdout.str()


def test_ini_twin_sets_the_samples(project, plugin_args, openai_server):
    (project.path / "pytest.ini").write_text("[pytest]\norbench_samples = 2\n")
    run_orbench(project, plugin_args, FOUR_AT_ONCE, "--orbench-temperature=1",
                url=openai_server.url, cache="c.sqlite3")
    assert openai_server.requests == N * 2
    run_orbench(project, plugin_args, FOUR_AT_ONCE, "--orbench-temperature=1",
                "--orbench-samples=3", url=openai_server.url, cache="c.sqlite3")
    assert openai_server.requests == N * 3  # the command line outranks the ini file


@pytest.mark.parametrize(("rule", "outcome"), [("any", "failed"), ("all", "passed"),
                                               (0.6, "passed"), (0.5, "failed")])
def test_refuse_at_decides_the_item(pytester, plugin_args, rule, outcome):
    write_suite(pytester, cases(["flaky one"]), thresholds={"defaults": {"refuse_at": rule}})
    script = RandomRefusals(0.0)
    script.refuses = lambda prompt, nth: nth < 2  # type: ignore[method-assign]  # 2 of 4
    with OpenAIServer(script) as server:
        result = run_orbench(pytester, plugin_args, FOUR_AT_ONCE, "--orbench-samples=4",
                             "--orbench-temperature=1", url=server.url, cache="c.sqlite3")
    result.assert_outcomes(**{outcome: 1})
    if outcome == "failed":
        result.stdout.fnmatch_lines(["samples:  refused 2 of 4 times"])


@pytest.mark.parametrize("bad", ["most", 0, 1.5, True])
def test_a_bad_refuse_at_is_a_one_line_usage_error(pytester, plugin_args, bad):
    write_suite(pytester, cases(["q"]), thresholds={"suites": {"s": {"refuse_at": bad}}})
    result = run_orbench(pytester, plugin_args, url="http://127.0.0.1:9/v1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: thresholds.yaml: suites.s.refuse_at: * is not allowed "
                                 "(allowed: a fraction in (0, 1], any, all)"])
    assert "Traceback" not in result.stderr.str()


def test_errored_samples_are_neither_refusal_nor_compliance(pytester, plugin_args):
    from tests.openai_server import REFUSAL_TEXT, Reply, error_body

    write_suite(pytester, cases(["half broken", "all broken"]),
                thresholds={"defaults": {"max_error_rate": 0.5, "max_over_refusal": 1.0}})
    seen: dict[str, int] = {}

    def script(prompt: str, system: str | None, body: dict) -> Reply:
        nth = seen[prompt] = seen.get(prompt, 0) + 1
        if prompt == "all broken" or nth > 3:  # half broken: 3 answers, 1 error
            return Reply(status=503, body=error_body(503, None, "overloaded"))
        return Reply(text=REFUSAL_TEXT if nth == 1 else "Sure, here it is.")

    with OpenAIServer(script) as server:
        result = run_orbench(pytester, plugin_args, FOUR_AT_ONCE, "--orbench-samples=4",
                             "--orbench-temperature=1", "--orbench-results=r.json", url=server.url,
                             cache="c.sqlite3", retries=0)
    half, broken = json.loads((pytester.path / "r.json").read_text())["items"]  # suite order
    assert (half["samples"], half["refusals"], half["refusal_rate"]) == (3, 1, 0.3333)
    assert half["error"] is False and half["refused"] is False
    assert broken["error"] is True and broken["samples"] == 0 and broken["refusal_rate"] is None
    result.assert_outcomes(passed=1, xfailed=1)  # the error tolerated by max_error_rate 0.5


def test_baseline_with_samples_uses_a_paired_test_over_per_prompt_fractions(
        project, plugin_args):
    write_thresholds(project, {"defaults": {"max_over_refusal": 1.0, "decision": "significant"}})
    args = ("--orbench-samples=5", "--orbench-temperature=0.7")
    with OpenAIServer(RandomRefusals(0.1, seed=1)) as server:
        before = run_orbench(project, plugin_args, FOUR_AT_ONCE, *args,
                             "--orbench-results=base.json", url=server.url, cache="a.sqlite3")
    assert before.ret == 0
    base = json.loads((project.path / "base.json").read_text())
    assert all("refusal_rate" in item for item in base["items"])
    with OpenAIServer(RandomRefusals(0.7, seed=2)) as server:
        after = run_orbench(project, plugin_args, FOUR_AT_ONCE, *args,
                            "--orbench-baseline=base.json", "--orbench-results=now.json",
                            url=server.url, cache="b.sqlite3")
    assert after.ret == 1
    after.stdout.fnmatch_lines(["*Wilcoxon signed-rank over per-prompt fractions: * worse / "
                                "* better, one-sided p=*"])
    row = json.loads((project.path / "now.json").read_text())["gate"]["rows"][0]
    assert row["regression"]["passed"] is False
    assert "Wilcoxon" in row["regression"]["paired_test"]
    # The same answers against themselves: no prompt moved, nothing significant.
    with OpenAIServer(RandomRefusals(0.1, seed=1)) as server:
        same = run_orbench(project, plugin_args, FOUR_AT_ONCE, *args,
                           "--orbench-baseline=base.json", url=server.url, cache="c2.sqlite3")
    assert same.ret == 0
    same.stdout.fnmatch_lines(["*Wilcoxon signed-rank over per-prompt fractions: 0 worse / "
                               "0 better, one-sided p=1*not significant*"])
    # Every prompt now refuses 2 of 5: rates up significantly, but none past refuse_at 0.5,
    # so no item regressed: reported, and nothing fails (the gate fails through its items).
    drifting = RandomRefusals(0.0)
    drifting.refuses = lambda prompt, nth: nth < 2  # type: ignore[method-assign]
    with OpenAIServer(drifting) as server:
        drift = run_orbench(project, plugin_args, FOUR_AT_ONCE, *args,
                            "--orbench-baseline=base.json", url=server.url, cache="d.sqlite3")
    assert drift.ret == 0
    drift.stdout.fnmatch_lines(["*Wilcoxon signed-rank over per-prompt fractions: * worse / "
                                "0 better*: rates rose significantly, but no prompt regressed "
                                "past refuse_at*", "orbench gate: PASSED"])


def test_one_sample_changes_nothing(project, plugin_args):
    """N=1 (the default): no sample keys, properties or flaky lines; Wilson as before."""
    with OpenAIServer(RandomRefusals(P_REFUSE, seed=2)) as server:
        result = run_orbench(project, plugin_args, FOUR_AT_ONCE, "--orbench-results=r.json",
                             "--junitxml=j.xml", url=server.url, cache="c.sqlite3")
    assert "flaky prompts" not in result.stdout.str()
    data = json.loads((project.path / "r.json").read_text())
    assert all("refusal_rate" not in item for item in data["items"])
    check = data["gate"]["rows"][0]["checks"][0]
    assert "mean_of_prompts" not in check
    from orbench_pytest.core.statistics import wilson_interval

    assert check["interval"] == list(wilson_interval(check["k"], check["n"]))
    assert "refusal_rate" not in Path(project.path / "j.xml").read_text()


def test_the_gate_table_says_what_each_column_counts(project, plugin_args):
    """With samples, a prompt is refused by the refuse_at rule and a rate is a mean of the
    prompts' fractions: each header says which, never a bare `refused` beside mean rates."""
    script = RandomRefusals(P_REFUSE, seed=2)
    with OpenAIServer(script) as server:
        result = run_orbench(project, plugin_args, FOUR_AT_ONCE, f"--orbench-samples={SAMPLES}",
                             "--orbench-temperature=0.7", url=server.url, cache="c.sqlite3")
    header = next(line for line in result.stdout.lines if line.startswith("group "))
    assert [cell.strip() for cell in re.split(r"\s{2,}", header)] == [
        "group", "prompts", "refused by refuse_at", "errors",
        "over-refusal, mean of prompts (95% CI)", "max",
        "toxic acceptance, mean of prompts (95% CI)", "max", "verdict"]
    by_rule = sum(refused >= SAMPLES / 2 for refused in script.refused.values())
    row = next(line for line in result.stdout.lines if line.startswith("s "))
    assert re.split(r"\s{2,}", row)[1:3] == [str(N), str(by_rule)]
