"""Every run says what it cost: tokens (from `usage`, else estimated and marked so), requests,
retries, fetch time and, with prices, dollars, in the summary, results file, JUnit properties
and the PR comment."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from functools import partial

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orbench_pytest.cli.main import main as orbench
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.typed_json import dump, load
from orbench_pytest.fetch.costs import Spending, TokenCount, estimate_tokens
from orbench_pytest.reports.cost import Prices, RunCost
from tests import helpers
from tests.openai_server import (
    ANSWER_TEXT,
    REFUSAL_TEXT,
    OpenAIServer,
    RefuseOnTrigger,
    Reply,
    refuse_when,
)

# --- the arithmetic ---------------------------------------------------------------------------

SAFE, TOXIC = helpers.SAFE[:4], helpers.TOXIC[:2]  # six prompts: four safe, two toxic
mini_suite = partial(helpers.mini_suite, safe=SAFE, toxic=TOXIC)


def test_usage_is_counted_as_sent_and_estimated_only_where_missing() -> None:
    tokens = TokenCount()
    tokens.add({"prompt_tokens": 12, "completion_tokens": 30}, "x" * 400, "y" * 400)
    tokens.add({}, "x" * 40, "y" * 81)  # no usage: ~4 characters a token
    tokens.add({"prompt_tokens": 7, "completion_tokens": "many"}, "x" * 40, "y" * 8)
    assert (tokens.prompt, tokens.completion) == (12 + 10 + 7, 30 + 21 + 2)
    assert (tokens.answers, tokens.estimated) == (3, 2)


@given(st.lists(st.tuples(st.integers(0, 10**7), st.integers(0, 10**7)), max_size=20),
       st.floats(0, 1000), st.floats(0, 1000))
def test_cost_is_the_tokens_at_the_prices(counts: list[tuple[int, int]], price_in: float,
                                          price_out: float) -> None:
    tokens = TokenCount()
    for prompt, completion in counts:
        tokens.add({"prompt_tokens": prompt, "completion_tokens": completion}, "", "")
    usd = Prices(price_in, price_out).cost(tokens)
    expected = (sum(p for p, _ in counts) * price_in
                + sum(c for _, c in counts) * price_out) / 1e6
    assert usd == pytest.approx(expected)
    assert Prices().cost(tokens) is None
    spent = Spending()
    spent.of("prompts").tokens = tokens
    spent.of("judge").requests = len(counts)
    cost = RunCost.of(spent, 0, 1.0, Prices(price_in, price_out))
    assert load(RunCost, json.loads(json.dumps(dump(cost))), "r.json") == cost


def spending(requests: int, tokens: TokenCount | None = None, **kinds: int) -> Spending:
    """`requests` prompts with `tokens`, and `kinds` more requests of other kinds."""
    spent = Spending()
    spent.of("prompts").requests = requests
    if tokens is not None:
        spent.of("prompts").tokens = tokens
    for kind, n in kinds.items():
        spent.of(kind.replace("_", " ")).requests = n
    return spent


def test_the_cost_line_says_what_was_estimated_and_priced() -> None:
    tokens = TokenCount()
    tokens.add({"prompt_tokens": 1000, "completion_tokens": 250}, "", "")
    assert RunCost.of(spending(1, tokens), 0, 2.04).line() == (
        "cost: 1,000 prompt + 250 completion tokens, 1 requests, 0 retries, 2.0s")
    tokens.add({}, "x" * 8, "y" * 8)
    assert RunCost.of(spending(3, tokens), 1, 2.0, Prices(0.15, 0.6)).line() == (
        "cost: 1,002 prompt + 252 completion tokens (estimated for 1 of 2 answers: no usage "
        "sent), 3 requests, 1 retries, 2.0s; $0.0003, estimated (at $0.15 in / $0.6 out per "
        "million tokens)")
    assert RunCost.of(Spending(), 0, 0.01, cached=6).line() == (
        "cost: 0 tokens (every answer from the cache), 0 requests, 0 retries, 0.0s")
    assert RunCost.of(Spending(), 0, 0.01).line() == (
        "cost: 0 tokens (nothing asked), 0 requests, 0 retries, 0.0s")


def test_every_kind_of_request_is_counted_and_named() -> None:
    assert RunCost.of(spending(1974, rewordings=339, backend_check=1), 0, 9.0).line() == (
        "cost: no answer came back: 2,314 requests: 1,974 prompts, 339 rewordings, 1 backend "
        "check failed, 0 tokens, 9.0s")
    spent = spending(2)
    spent.of("judge").requests = 1
    spent.of("judge").tokens.add({"prompt_tokens": 40, "completion_tokens": 9}, "", "")
    spent.of("prompts").tokens.add({"prompt_tokens": 5, "completion_tokens": 7}, "", "")
    cost = RunCost.of(spent, 2, 1.0)
    assert cost.line() == ("cost: 3 requests: 2 prompts, 1 judge; 45 prompt + 16 completion "
                           "tokens: 5 + 7 prompts, 40 + 9 judge; 2 retries, 1.0s")
    assert load(RunCost, json.loads(json.dumps(dump(cost))), "r.json") == cost
    assert estimate_tokens("") == 0 and estimate_tokens("abcde") == 2


@pytest.mark.parametrize("bad", [None, [], {"prompt_tokens": -1}, {"wall_s": "1"},
                                 {"prompt_tokens": 1, "completion_tokens": 1,
                                  "answers_counted": 1, "estimated_answers": 0, "requests": 1,
                                  "retries": True, "wall_s": 1}])
def test_a_hand_edited_cost_is_a_one_line_error(bad: object) -> None:
    with pytest.raises(ConfigError, match=r"^r\.json: cost"):
        load(RunCost, bad, "r.json", "cost")


# --- a run, end to end against the local server ------------------------------------------------


def cost_run(pytester: pytest.Pytester, plugin_args: list[str], server: OpenAIServer,
             *args: str, name: str = "") -> pytest.RunResult:
    return helpers.run_orbench(pytester, plugin_args, f"--orbench-results=r{name}.json",
                               f"--junitxml=j{name}.xml", "--orbench-backoff=0", *args,
                               url=server.url, cache="cache.sqlite3")


def suite_properties(path: str) -> dict[str, str]:
    root = ET.parse(path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    assert suite is not None
    return {p.get("name", ""): p.get("value", "") for p in suite.iter("property")
            if p.get("name", "").startswith("orbench_") and p.get("name") != "orbench_gate"}


def test_a_run_says_what_it_cost_everywhere(pytester: pytest.Pytester,
                                            plugin_args: list[str]) -> None:
    mini_suite(pytester)
    pytester.makeini("[pytest]\norbench_price_input = 1000\n")  # ini, and an option beside it
    failed_once: set[str] = set()

    def script(prompt: str, system: str | None, body: dict) -> Reply:
        if prompt == SAFE[0] and prompt not in failed_once:
            failed_once.add(prompt)
            return Reply(status=503)
        return Reply(text=REFUSAL_TEXT if prompt in TOXIC else ANSWER_TEXT,
                     usage={"prompt_tokens": 11, "completion_tokens": 5})

    server = OpenAIServer(script).start()
    try:
        result = cost_run(pytester, plugin_args, server, "--orbench-price-output=2000")
        # Again, from the cache (the same endpoint): nothing asked, nothing spent.
        asked = server.requests
        again = cost_run(pytester, plugin_args, server, "--orbench-price-output=2000",
                         name="-again")
        assert server.requests == asked
    finally:
        server.stop()
    again.stdout.fnmatch_lines(["cost: 0 tokens (every answer from the cache), 0 requests, "
                                "0 retries, *s; $0.0000 (at $1000 in / $2000 out per million "
                                "tokens)"])
    result.assert_outcomes(passed=6)
    # 6 answers of 11 + 5 tokens; 7 requests (one 503, retried); $0.066 + $0.06
    line = ("cost: 66 prompt + 30 completion tokens, 7 requests, 1 retries, *s; $0.1260 "
            "(at $1000 in / $2000 out per million tokens)")
    result.stdout.fnmatch_lines([line])
    cost = json.loads((pytester.path / "r.json").read_text())["run"]["cost"]
    assert {k: cost[k] for k in ("prompt_tokens", "completion_tokens", "estimated_answers",
                                 "requests", "retries", "usd")} == {
        "prompt_tokens": 66, "completion_tokens": 30, "estimated_answers": 0, "requests": 7,
        "retries": 1, "usd": 0.126}
    assert cost["wall_s"] > 0
    props = suite_properties(str(pytester.path / "j.xml"))
    assert {k: v for k, v in props.items() if k != "orbench_wall_s"} == {
        "orbench_prompt_tokens": "66", "orbench_completion_tokens": "30",
        "orbench_tokens_estimated": "0", "orbench_requests": "7", "orbench_retries": "1",
        "orbench_cost_usd": "0.126"}
    assert orbench(["report", str(pytester.path / "j.xml"), "-o", "pr.md"]) == 0
    comment = (pytester.path / "pr.md").read_text()
    assert "`cost: 66 prompt + 30 completion tokens, 7 requests, 1 retries, " in comment
    assert "$0.1260 (at $1000 in / $2000 out per million tokens)`" in comment


def test_without_usage_the_tokens_are_estimated_and_said_so(pytester: pytest.Pytester,
                                                            plugin_args: list[str]) -> None:
    mini_suite(pytester)
    with OpenAIServer(lambda prompt, system, body: Reply(
            text=REFUSAL_TEXT if prompt in TOXIC else ANSWER_TEXT, usage=None)) as server:
        result = cost_run(pytester, plugin_args, server)
    result.stdout.fnmatch_lines(
        ["cost: * prompt + * completion tokens (estimated: the endpoint sent no usage), "
         "6 requests, 0 retries, *s"])
    cost = json.loads((pytester.path / "r.json").read_text())["run"]["cost"]
    prompts = SAFE + TOXIC
    assert cost["prompt_tokens"] == sum(estimate_tokens(p) for p in prompts)
    assert cost["estimated_answers"] == cost["answers_counted"] == 6
    assert cost["usd"] is None
    assert suite_properties(str(pytester.path / "j.xml"))["orbench_tokens_estimated"] == "6"


def test_a_price_must_be_a_number(pytester: pytest.Pytester, plugin_args: list[str]) -> None:
    mini_suite(pytester)
    with OpenAIServer() as server:
        result = cost_run(pytester, plugin_args, server, "--orbench-price-input=cheap")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--orbench-price-input: 'cheap' is not a number*"])


# --- the CI cache's key: the candidate, not the commit ------------------------------------------


def cache_key(pytester: pytest.Pytester, plugin_args: list[str], server: OpenAIServer,
              *args: str) -> str:
    result = helpers.run_orbench(pytester, plugin_args, "--orbench-cache-key", "-q", *args,
                                 url=server.url)
    assert result.ret == pytest.ExitCode.OK
    keys = [line.removeprefix("orbench cache key: ") for line in result.outlines
            if line.startswith("orbench cache key: ")]
    assert len(keys) == 1
    return keys[0]


def test_the_cache_key_changes_with_the_candidate_only(pytester: pytest.Pytester,
                                                       plugin_args: list[str]) -> None:
    mini_suite(pytester)
    with OpenAIServer() as server:
        first = cache_key(pytester, plugin_args, server)
        pytester.makepyfile(test_unrelated="def test_x():\n    pass\n")  # another commit
        assert cache_key(pytester, plugin_args, server) == first
        changed = {
            cache_key(pytester, plugin_args, server, "--orbench-system-prompt=Be brief."),
            cache_key(pytester, plugin_args, server, "--orbench-target-version=v2"),
            cache_key(pytester, plugin_args, server, "--orbench-max-tokens=64"),
        }
        suite = pytester.path / "suites" / "mini.yaml"
        suite.write_text(suite.read_text().replace(SAFE[1], "How do I bake a cake?"))  # edited
        changed.add(cache_key(pytester, plugin_args, server))
        assert server.requests == 0  # nothing asked
    assert first.startswith("orbench-") and len(changed) == 4 and first not in changed


def test_a_rerun_under_the_same_key_asks_nothing(pytester: pytest.Pytester,
                                                 plugin_args: list[str]) -> None:
    """What the gate workflow relies on: a cache saved under a key holds every answer a run
    with that key needs."""
    mini_suite(pytester)
    server = OpenAIServer(refuse_when(lambda prompt: prompt in TOXIC)).start()
    try:
        key = cache_key(pytester, plugin_args, server)
        cost_run(pytester, plugin_args, server).assert_outcomes(passed=6)
        asked = server.requests
        assert cache_key(pytester, plugin_args, server) == key
        again = cost_run(pytester, plugin_args, server, name="-again")
        assert server.requests == asked == 6
    finally:
        server.stop()
    again.stdout.fnmatch_lines(["cost: 0 tokens (every answer from the cache), 0 requests*"])


# --- every request of the run counted, each kind named ------------------------------------------


def test_the_cost_counts_the_rewordings_and_the_judge_each_named(
        pytester: pytest.Pytester, plugin_args: list[str]) -> None:
    """The rewordings search's requests and the LLM judge's are the run's cost too: in the cost
    line, the results file, the JUnit properties and the PR comment, each kind counted."""
    mini_suite(pytester, {"suites": {"mini": {"max_fragile_rate": 1.0}}})
    with OpenAIServer(RefuseOnTrigger(words=("terminate",), prefixes=("I'm a",))) as server, \
            helpers.judge_server({}) as judge:
        result = cost_run(pytester, plugin_args, server, "--orbench-rewordings=5",
                          "--orbench-cache=off", *helpers.judge_args(judge, "llm"))
        asked, judged = server.requests, judge.requests
    reworded = asked - len(SAFE + TOXIC)
    assert reworded > 0 and judged == asked  # the LLM judge read every answer
    total = asked + judged
    result.stdout.fnmatch_lines([
        f"cost: {total:,} requests: 6 prompts, {reworded:,} rewordings, {judged:,} judge; "
        f"{total * 10:,} prompt + {total * 10:,} completion tokens: 60 + 60 prompts, "
        f"{reworded * 10:,} + {reworded * 10:,} rewordings, {judged * 10:,} + {judged * 10:,} "
        "judge; 0 retries, *s"])
    cost = json.loads((pytester.path / "r.json").read_text())["run"]["cost"]
    assert (cost["requests"], cost["prompt_tokens"]) == (total, total * 10)
    assert {kind: part["requests"] for kind, part in cost["kinds"].items()} == {
        "prompts": 6, "rewordings": reworded, "judge": judged}
    props = suite_properties(str(pytester.path / "j.xml"))
    assert (props["orbench_requests"], props["orbench_requests_rewordings"],
            props["orbench_requests_judge"], props["orbench_prompt_tokens"]) == (
        str(total), str(reworded), str(judged), str(total * 10))
    assert orbench(["report", str(pytester.path / "j.xml"), "-o", "pr.md"]) == 0
    assert f"`cost: {total:,} requests: 6 prompts, {reworded:,} rewordings" in (
        pytester.path / "pr.md").read_text()


def test_a_rerun_counts_its_backend_check(pytester: pytest.Pytester,
                                         plugin_args: list[str]) -> None:
    """All cached, one prompt asked again to see whether the backend changed: a request, named
    as what it is."""
    mini_suite(pytester)
    with OpenAIServer(lambda prompt, system, body: Reply(
            text=REFUSAL_TEXT if prompt in TOXIC else ANSWER_TEXT,
            system_fingerprint="fp_1")) as server:
        cost_run(pytester, plugin_args, server).assert_outcomes(passed=6)
        again = cost_run(pytester, plugin_args, server, name="-again")
        assert server.requests == 7
    again.stdout.fnmatch_lines(["cost: 1 requests: 1 backend check; 10 prompt + 10 completion "
                                "tokens: 10 + 10 backend check; 0 retries, *s"])


def test_with_nothing_answered_the_cost_line_says_so(pytester: pytest.Pytester,
                                                     plugin_args: list[str]) -> None:
    """The cache off and every request failing: no answer came back, and the requests that
    failed are counted, not '0 tokens (every answer from the cache)'."""
    mini_suite(pytester)
    with OpenAIServer(lambda prompt, system, body: Reply(status=503)) as server:
        result = cost_run(pytester, plugin_args, server, "--orbench-cache=off",
                          "--orbench-max-retries=2")
        sent = server.requests
    assert sent > 6
    out = result.stdout.str()
    assert "every answer from the cache" not in out
    result.stdout.fnmatch_lines([f"cost: no answer came back: {sent} requests failed "
                                 f"({sent - 6} of them retries), 0 tokens, *s"])
