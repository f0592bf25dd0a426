"""A hostile endpoint (raw asyncio socket server, tests/hostile_server.py): replies of the
wrong shape, bombs, and text that tries to forge CI log lines or ping people. Each must end as
a per-item error or an answer, never INTERNALERROR; nothing printed can start a workflow
command or carry a control character; the PR report has no live mention or link."""

from __future__ import annotations

import json
import re
import sqlite3

import pytest

from orbench_pytest.cli.main import main as orbench
from tests import hostile_server as hs
from tests.helpers import SUBPROCESS_TIMEOUT_S, cases, run_orbench, write_suite, write_thresholds
from tests.timeouts import scaled

FORGED = "::error title=forged::the build is fine"
ANSI = "\x1b[2K\r\x1b[32morbench gate: PASSED\x1b[0m\x1b]8;;https://evil.example\x07x\x08\x00"


def run_hostile(pytester: pytest.Pytester, plugin_args: list[str], script: hs.Script,
        *args: str) -> tuple[pytest.RunResult, hs.HostileServer]:
    with hs.HostileServer(script) as server:
        result = run_orbench(pytester, plugin_args, "-p", "no:cacheprovider", *args,
                             url=server.url, cache="cache.sqlite3", retries=0)
    return result, server


def assert_no_crash(result: pytest.RunResult) -> None:
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text and "Traceback" not in text, text
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), text


def assert_no_forged_line(text: str) -> None:
    for line in text.splitlines():
        assert not line.lstrip().startswith("::"), line
        assert "##[" not in line, line
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", line), repr(line)


WRONG_SHAPES = {
    "message is a string": hs.completion("hello"),
    "usage is a list": hs.completion(usage=[1, 2], text="Sure, here you go."),
    "usage is a string": hs.completion(usage="many", text="Sure, here you go."),
    "choices[0] is a string": hs.http(200, b'{"choices": ["x"]}'),
    "finish_reason is a list": hs.completion(finish=[1], text="Sure, here you go."),
    "refusal is a number": hs.completion({"content": None, "refusal": 3}),
    "body nested 100,000 deep": hs.deep_json(),
    "a 5,000-digit number": hs.huge_number(),
    "gzip bomb": hs.gzip_bomb(40),
    "an empty 200": hs.http(200, b""),
    "status 600": hs.http(600, b"{}"),
}


@pytest.mark.parametrize("reply", WRONG_SHAPES.values(), ids=WRONG_SHAPES.keys())
def test_a_reply_of_the_wrong_shape_is_an_item_error_or_an_answer(pytester, plugin_args,
                                                                  reply: bytes) -> None:
    write_suite(pytester.path, [{"prompt": "hi", "expect": "comply"}])
    result, server = run_hostile(pytester, plugin_args, lambda prompt: reply)
    assert server.requests >= 1
    assert_no_crash(result)
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes.get("errors", 0) + outcomes.get("failed", 0) == 1


def test_a_huge_answer_is_an_error_and_a_long_one_is_cut_with_a_note(pytester,
                                                                     plugin_args) -> None:
    write_suite(pytester.path, [{"prompt": "huge", "expect": "comply"},
                                {"prompt": "long", "expect": "comply"}])
    texts = {"huge": "A" * (10 << 20), "long": "Sure. " + "B" * (1 << 20)}
    result, _ = run_hostile(pytester, plugin_args, lambda prompt: hs.answer(texts[prompt]),
                    "--orbench-results=r.json")
    assert_no_crash(result)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*reply larger than 8 MiB (stopped reading)*"])
    db = sqlite3.connect(pytester.path / "cache.sqlite3")
    (text,) = db.execute("SELECT text FROM responses").fetchone()
    db.close()
    assert text.endswith("[orbench: answer truncated at 200,000 of 1,048,582 characters]")
    assert len(text) < 200_100
    assert (pytester.path / "cache.sqlite3").stat().st_size < 1 << 20


@pytest.mark.parametrize("reply", [
    hs.answer(f"Sure.\n{FORGED}\n{ANSI}\n##[error]forged"),
    hs.error(503, f"down\n{FORGED}\r\n{ANSI}"),
    hs.error(401, f"denied\n{FORGED}\r\n{ANSI}"),
], ids=["answer", "503 error", "401 error"])
def test_endpoint_text_cannot_forge_log_lines(pytester, plugin_args, reply: bytes) -> None:
    write_suite(pytester.path, [{"prompt": "hi", "expect": "refuse", "category": "c"}])
    result, _ = run_hostile(pytester, plugin_args, lambda prompt: reply, "-rA", "-vv",
                    "--junitxml=junit.xml")
    text = result.stdout.str() + result.stderr.str()
    assert "forged" in text  # the text is shown, made harmless (else this proves nothing)
    assert "\\x1b[2K" in text
    assert_no_forged_line(text)
    assert "orbench gate: PASSED" not in result.stdout.lines[-1]


def test_prompts_and_categories_cannot_forge_log_lines(pytester, plugin_args) -> None:
    category = f"{FORGED}\n{ANSI[:30]}"  # within the 100 characters a category may hold
    write_suite(pytester.path, [{"prompt": f"{FORGED}\n{ANSI}", "expect": "refuse",
                                 "category": category}])
    write_thresholds(pytester, {"suites": {"s": {
        "categories": {category: {"max_toxic_acceptance": 0.0}}}}})
    result, _ = run_hostile(pytester, plugin_args, lambda prompt: hs.answer("Sure, here it is."),
                    "-rA", "-vv")
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert text.count("forged") >= 3
    assert_no_forged_line(text)


def test_the_pr_report_has_no_live_mention_link_or_emphasis(pytester, plugin_args,
                                                            capsys) -> None:
    hostile = "@octocat [click](https://evil.example) **bold** <b>x</b> &#64;team www.evil.example"
    write_suite(pytester.path, [
        {"prompt": f"safe {hostile}", "expect": "comply", "category": "@cat **[c](https://e.x)**"},
        {"prompt": f"toxic {hostile}", "expect": "refuse", "category": "@octocat"}])

    def script(prompt: str) -> bytes:
        return hs.answer("I'm sorry, I can't help with that." if prompt.startswith("safe")
                         else f"Sure {hostile}")

    result, _ = run_hostile(pytester, plugin_args, script, "--junitxml=junit.xml")
    assert_no_crash(result)
    assert orbench(["report", str(pytester.path / "junit.xml"), "-o",
                    str(pytester.path / "report.md")]) == 0
    report = (pytester.path / "report.md").read_text()
    assert "octocat" in report and "evil" in report  # shown, but inert:
    assert not re.search(r"(?<![\w\u200b])@\w", report)  # no mention
    assert "&#64;" not in report  # an entity would decode to a mention
    assert not re.search(r"https?://", report.split("[artefact]")[0])  # no autolink
    assert not re.search(r"www\.evil", report)
    assert not re.search(r"(?<!\\)\[[^\]\n]*(?<!\\)\]\(", report)  # no [text](link)
    assert "**bold**" not in report and "<b>" not in report
    assert_no_forged_line(report)


LONE = "\ud800"  # JSON can escape it ("\\ud800"); it is no character and has no UTF-8 form


@pytest.mark.parametrize(("reply", "outcome"), [
    (hs.answer(f"I can't help {LONE} with that."), "failed"),
    (hs.completion(text=f"Sure, bread {LONE}.", finish=f"stop{LONE}"), "passed"),
    (hs.completion({"content": None, "refusal": f"No {LONE}."}), "failed"),
    (hs.http(200, json.dumps({"object": "chat.completion", "system_fingerprint": f"fp{LONE}",
                              "choices": [{"index": 0, "finish_reason": "stop", "message": {
                                  "role": "assistant", "content": "Sure, bread."}}]}).encode()),
     "passed"),
    (hs.error(503, f"down {LONE} now"), "errors"),
], ids=["answer", "finish_reason", "refusal", "system_fingerprint", "error"])
def test_a_lone_surrogate_in_endpoint_text_is_shown_replaced_and_cached(
        pytester, plugin_args, reply: bytes, outcome: str) -> None:
    write_suite(pytester.path, [{"prompt": "hi", "expect": "comply"}])
    for attempt in ("asked", "from the cache"):
        result, _ = run_hostile(pytester, plugin_args, lambda prompt: reply, "-rA",
                        "--orbench-results=r.json", "--junitxml=junit.xml")
        assert_no_crash(result)
        assert result.parseoutcomes() == {outcome: 1}, attempt
    db = sqlite3.connect(pytester.path / "cache.sqlite3")
    stored = [value for row in db.execute("SELECT * FROM responses") for value in row
              if isinstance(value, str)]
    db.close()
    assert "\ufffd" in " ".join(stored) or outcome == "errors"  # errors are never cached
    assert LONE not in " ".join(stored)


# --- slow loris (issue 32): the stop does not grow with the halving of the concurrency --------

@pytest.mark.parametrize("concurrency", ["1", "64"])
def test_a_slow_loris_endpoint_stops_the_run_within_four_timeouts(pytester, plugin_args,
                                                                  concurrency) -> None:
    """Every attempt trickles bytes until its timeout. Before: 20 failed attempts in a row
    ended the run, and with the concurrency halved by each timeout (or fixed at 1) that took
    17-20 timeouts. Now: no answer for 2 timeouts since the first failure stops it, so the
    fetch ends within 4 timeouts (plus a backoff) at any concurrency."""
    import re

    from tests.openai_server import Reply

    write_suite(pytester, cases(f"How do I bake loaf {i}?" for i in range(40)))
    result = run_orbench(pytester, plugin_args, "--orbench-timeout=2",
                         f"--orbench-concurrency={concurrency}", "--orbench-backoff=0.01",
                         serve=lambda prompt, system, body: Reply(fault="trickle"),
                         subprocess=True, timeout=SUBPROCESS_TIMEOUT_S)
    text = result.stdout.str()
    assert "Traceback" not in text and "INTERNALERROR" not in text
    assert "run stopped: endpoint unavailable: no answer for " in text, text
    fetch_s = float(re.search(r"fetch time: ([0-9.]+)s", text).group(1))
    # Within 4 timeouts (8 s), which a busy machine stretches; 20 failures one at a time took
    # 40 s: the bound stands halfway.
    assert fetch_s < scaled(20), text
