"""The llm and hybrid judges through the plugin: a second local server plays the judge model."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from functools import partial

import pytest

from orbench_pytest.judges.rules import RulesJudge
from tests import helpers
from tests.helpers import cases, judge_args, judge_server, refusing, run_orbench, write_suite
from tests.openai_server import OpenAIServer, Reply, refuse_when
from tests.timeouts import scaled

SAFE, TOXIC = helpers.SAFE[:4], helpers.TOXIC[:2]
mini_suite = partial(helpers.mini_suite, safe=SAFE, toxic=TOXIC)

HEDGE = "It's important to note that this depends on the law where you live."


def test_llm_judge_decides_every_answer_and_reports_agreement(pytester, plugin_args) -> None:
    mini_suite(pytester, {"defaults": {"max_over_refusal": 0.0, "max_toxic_acceptance": 0.0}},
               safe=[])
    # The judge model calls the toxic answers (plain "Sure…") refusals: its word counts.
    with OpenAIServer(refusing([])) as server, judge_server({"Sure.": "direct_refusal"}) as judge:
        result = run_orbench(pytester, plugin_args, *judge_args(judge, "llm"), url=server.url)
        assert judge.requests == 2
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([
        "judge: the LLM judged 2 answers (0 unreadable or unanswered: errors)",
        "keyword vs LLM judge on the 2 answers both judged: 0 agree (rows keyword, columns LLM)",
        "*compliance*0*2*0*",
    ])
    assert result.ret == 0


def held_judge(release: threading.Event,
               releases: Callable[[OpenAIServer], bool] = lambda server: False) -> OpenAIServer:
    """A judge server whose every reply is held until `release` is set; a request that finds
    `releases(server)` true sets it (an event the test waits on, never a delay)."""
    judge = judge_server({})
    scripted = judge.script

    def held(prompt: str, system: str | None, body: dict) -> Reply:
        if releases(judge):
            release.set()
        reply = scripted(prompt, system, body)
        reply.hold = release
        return reply

    judge.script = held
    return judge


def test_the_judge_has_a_concurrency_limit_of_its_own(pytester, plugin_args) -> None:
    """--orbench-concurrency bounds the target's requests, --orbench-judge-concurrency the
    judge's: one target request at a time, three judge requests out at once (each held until
    three are), so the fetch never waits for a verdict. Verdicts and counts are reported as
    ever: in the terminal and the results file."""
    mini_suite(pytester)
    three = threading.Event()
    judge = held_judge(three, lambda server: server.in_flight >= 3)
    results = pytester.path / "results.json"
    with OpenAIServer(refusing([*TOXIC])) as server, judge:
        result = run_orbench(pytester, plugin_args, *judge_args(judge, "llm"),
                             "--orbench-concurrency=1", "--orbench-fixed-concurrency",
                             "--orbench-judge-concurrency=3", f"--orbench-results={results}",
                             url=server.url)
    assert (server.max_in_flight, judge.max_in_flight) == (1, 3)
    # The judge model says "direct_answer" everywhere: the two toxic prompts count as answered.
    result.assert_outcomes(passed=4, failed=2)
    result.stdout.fnmatch_lines([
        "answers: 6 (0 from cache), requests: 12, retries: 0, fetch time: *",
        "judged: 6 answers, 0 verdicts from the cache, judge CPU *",
        "judge: the LLM judged 6 answers (0 unreadable or unanswered: errors)",
    ])
    document = json.loads(results.read_text())
    assert len(document["items"]) == 6
    assert {item["judge"] for item in document["items"]} == {"llm:judge-m"}


def test_max_duration_abandons_the_verdicts_still_out(pytester, plugin_args) -> None:
    """The target answers at once, the judge model never: --orbench-max-duration ends the run
    with the verdicts still out recorded as errors (never waited for, never a verdict)."""
    mini_suite(pytester)
    never = threading.Event()  # set only after the run: every judge request hangs
    judge = held_judge(never)
    results = pytester.path / "results.json"
    with OpenAIServer(refusing([*TOXIC])) as server, judge:
        result = run_orbench(pytester, plugin_args, *judge_args(judge, "llm"),
                             f"--orbench-max-duration={scaled(10)}",
                             f"--orbench-results={results}", url=server.url)
        never.set()
    assert server.requests == 6  # every prompt answered before time ran out
    items = json.loads(results.read_text())["items"]
    assert [item["verdict"] for item in items] == ["error"] * 6
    assert {item["judge_reason"] for item in items} == {"judge abandoned: the run stopped"}
    result.stdout.fnmatch_lines(["*--orbench-max-duration*"])


@pytest.mark.parametrize(("where", "value"), [("cli", "0"), ("cli", "four"), ("ini", "-2")])
def test_a_bad_judge_concurrency_is_one_line_naming_the_option(pytester, plugin_args, where,
                                                               value) -> None:
    mini_suite(pytester)
    if where == "ini":
        pytester.makeini(f"[pytest]\norbench_judge_concurrency = {value}\n")
        given = []
    else:
        given = [f"--orbench-judge-concurrency={value}"]
    result = pytester.runpytest(*plugin_args, "suites", *given)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.strip()]
    assert len(errors) == 1 and "orbench_judge_concurrency" in errors[0].replace("-", "_")
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_hybrid_asks_the_llm_only_where_rules_and_classifier_disagree(pytester, plugin_args
                                                                     ) -> None:
    mini_suite(pytester)
    hedged = SAFE[0]
    script = refuse_when(lambda p: p in TOXIC)

    def answer(prompt: str, system: str | None, body: dict) -> Reply:
        return Reply(text=HEDGE) if prompt == hedged else script(prompt, system, body)

    with OpenAIServer(answer) as server, judge_server({}) as judge:
        result = run_orbench(pytester, plugin_args, *judge_args(judge, "hybrid"), "-v",
                             url=server.url)
        # only the hedged answer: the rules call it partial, the classifier does not
        assert judge.requests == 1
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["judge routing: keyword decided 5 (rules and classifier "
                                 "agreed), the LLM 1 where they disagreed (0 *errors)"])


def test_judge_replies_are_cached_like_answers(pytester, plugin_args) -> None:
    mini_suite(pytester)
    with OpenAIServer(refusing([*TOXIC])) as server, judge_server({}) as judge:
        first = run_orbench(pytester, plugin_args, *judge_args(judge, "llm"), url=server.url)
        second = run_orbench(pytester, plugin_args, *judge_args(judge, "llm"), url=server.url)
        assert (server.requests, judge.requests) == (6, 6)  # the rerun asked nobody
    # the judge model says "direct_answer" everywhere: the two toxic prompts count as answered
    for result in (first, second):
        result.assert_outcomes(passed=4, failed=2)


def test_a_changed_judge_rejudges_cached_answers_without_asking_the_model(pytester,
                                                                          plugin_args) -> None:
    mini_suite(pytester)
    results = pytester.path / "results.json"
    with OpenAIServer(refusing([*TOXIC])) as server, judge_server({}) as judge:
        run_orbench(pytester, plugin_args, *judge_args(judge, "llm"),
                    f"--orbench-results={results}", url=server.url)
        first = json.loads(results.read_text())
        # the OR-Bench rubric: a new judge version, so the judge is asked again, the model not
        run_orbench(pytester, plugin_args, *judge_args(judge, "llm-paper"),
                    f"--orbench-results={results}", url=server.url)
        second = json.loads(results.read_text())
        run_orbench(pytester, plugin_args, "--orbench-judge=keyword",
                    f"--orbench-results={results}", url=server.url)
        third = json.loads(results.read_text())
        assert (server.requests, judge.requests) == (6, 12)
    assert (first["run"]["judge"], first["run"]["judge_version"]) == ("llm", "2-project")
    assert (second["run"]["judge"], second["run"]["judge_version"]) == ("llm-paper", "2-paper")
    assert {item["judge"] for item in second["items"]} == {"llm-paper:judge-m"}
    assert third["run"]["judge"] == "keyword"
    assert third["run"]["judge_version"].startswith(f"{RulesJudge.version}+clf:")
    assert {item["judge"] for item in third["items"]} == {"keyword"}


def test_unreadable_judge_replies_are_errors_never_refusals(pytester, plugin_args) -> None:
    mini_suite(pytester, {"defaults": {"max_error_rate": 0.0}}, safe=SAFE[:1], toxic=[])
    unsure = OpenAIServer(lambda p, s, b: Reply(text="hmm, hard to say"))
    with OpenAIServer(refusing([])) as server, unsure as judge:
        result = run_orbench(pytester, plugin_args, *judge_args(judge, "llm"), url=server.url)
        assert judge.requests == 2  # one retry after the unreadable reply
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*unreadable judge reply*"])
    assert result.ret == 1


def test_judge_endpoint_rejecting_the_model_stops_the_run(pytester, plugin_args) -> None:
    mini_suite(pytester)
    body = json.dumps({"error": {"message": "model judge-m not found", "code": None}}).encode()
    with OpenAIServer(refusing([*TOXIC])) as server, OpenAIServer(
            lambda p, s, b: Reply(status=404, body=body)) as judge:
        result = run_orbench(pytester, plugin_args, *judge_args(judge, "llm"), url=server.url)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*answered HTTP 404: model judge-m not found*"])


@pytest.mark.parametrize(("args", "message"), [
    (["--orbench-judge=llm"], "*--orbench-judge=llm needs --orbench-judge-model=NAME*"),
    (["--orbench-judge=hybrid", "--orbench-judge-model=j",
      "--orbench-judge-base-url=https://judge.example/v1"],
     "*OPENAI_API_KEY is not set: export the judge's API key for https://judge.example/v1*"),
])
def test_judge_settings_are_checked_before_any_request(pytester, plugin_args, args,
                                                       message) -> None:
    mini_suite(pytester)
    with OpenAIServer(refusing([*TOXIC])) as server:
        result = run_orbench(pytester, plugin_args, *args, url=server.url)
        assert server.requests == 0
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_a_suites_judge_applies_unless_the_option_names_one(pytester, plugin_args) -> None:
    write_suite(pytester, cases(["How do I bake bread?"], safe_category="c"), "judged", judge="llm")
    with OpenAIServer(refusing([])) as server, judge_server({}) as judge:
        via_suite = run_orbench(pytester, plugin_args, "--orbench-judge-model=judge-m",
                                f"--orbench-judge-base-url={judge.url}", url=server.url)
        asked = judge.requests
        via_option = run_orbench(pytester, plugin_args, "--orbench-judge=keyword",
                                 "--orbench-cache=off", url=server.url)
        assert (asked, judge.requests) == (1, 1)  # the option's keyword judge asked nobody
    via_suite.assert_outcomes(passed=1)
    via_suite.stdout.fnmatch_lines(["judge: the LLM judged 1 answers*"])
    via_option.assert_outcomes(passed=1)


def test_suites_asking_for_different_judges_need_the_option(pytester, plugin_args) -> None:
    for name, judge in (("one", "llm"), ("two", "keyword")):
        write_suite(pytester, cases([f"How do I bake bread in {name}?"]), name, judge=judge)
    with OpenAIServer(refusing([])) as server:
        result = run_orbench(pytester, plugin_args, url=server.url)
        assert server.requests == 0
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*the suites ask for different judges (one: llm, two: keyword)*"])
