"""Export → answers produced outside → import → gate, end to end through pytest."""

from __future__ import annotations

import json

import pytest

from tests.batch_files import (
    SAFE,
    TOXIC,
    answer,
    answer_file,
    batch_cases,
    cached,
    output_line,
    prompt_of,
    read_requests,
    write_lines,
)
from tests.helpers import BATCHES_OF_FOUR, run_orbench, write_suite
from tests.openai_server import REFUSAL_TEXT, OpenAIServer, Reply, error_body

DEAD = "http://127.0.0.1:9/v1"  # nothing listens: any request fails to connect



def test_more_requests_than_a_batch_takes_are_exported_as_numbered_files(
        pytester: pytest.Pytester, plugin_args: list[str]) -> None:
    write_suite(pytester, batch_cases())
    exported = run_orbench(pytester, plugin_args, BATCHES_OF_FOUR,
                           "--orbench-batch-export=requests.jsonl", url=DEAD, cache="c.sqlite3",
                           retries=0)
    assert exported.ret == pytest.ExitCode.OK
    exported.stdout.fnmatch_lines(["*wrote 10 requests to 3 files, *requests.1.jsonl to "
                                   "requests.3.jsonl (a batch takes at most 4 requests and "
                                   "200 MB) (0 already cached); nothing was sent*once for "
                                   "each file*"])
    assert not (pytester.path / "requests.jsonl").exists()
    parts = [read_requests(pytester.path / f"requests.{i}.jsonl") for i in (1, 2, 3)]
    assert [len(part) for part in parts] == [4, 4, 2]
    for i in (1, 2, 3):
        answer_file(pytester.path / f"requests.{i}.jsonl", pytester.path / f"out.{i}.jsonl",
                    answer)
    gated = run_orbench(pytester, plugin_args, BATCHES_OF_FOUR,
                        *(f"--orbench-batch-import=out.{i}.jsonl" for i in (1, 2, 3)),
                        url=DEAD, cache="c.sqlite3", retries=0)
    gated.assert_outcomes(passed=10)


def test_export_answer_outside_import_and_gate_with_the_endpoint_dead(
        pytester: pytest.Pytester, plugin_args: list[str]) -> None:
    write_suite(pytester, batch_cases())
    exported = run_orbench(pytester, plugin_args, "--orbench-batch-export=requests.jsonl",
                           "--orbench-temperature=0.3", "--orbench-max-tokens=64",
                           "--orbench-request-seed=7", "--orbench-system-prompt=Be kind.", url=DEAD,
                           cache="c.sqlite3", retries=0)
    assert exported.ret == pytest.ExitCode.OK
    exported.stdout.fnmatch_lines(["*wrote 10 requests to *requests.jsonl (0 already cached); "
                                   "nothing was sent*"])
    assert "orbench gate" not in exported.stdout.str()
    requests = read_requests(pytester.path / "requests.jsonl")
    assert len(requests) == 10 and len({r["custom_id"] for r in requests}) == 10
    first = requests[0]
    assert first["method"] == "POST" and first["url"] == "/v1/chat/completions"
    # Every generation parameter the live client sends, built by the same code.
    assert first["body"]["model"] == "m"
    assert first["body"]["temperature"] == 0.3 and first["body"]["max_tokens"] == 64
    assert first["body"]["seed"] == 7
    assert first["body"]["messages"][0] == {"role": "system", "content": "Be kind."}
    assert {prompt_of(r["body"]) for r in requests} == set(SAFE) | set(TOXIC)

    answer_file(pytester.path / "requests.jsonl", pytester.path / "output.jsonl", answer)
    same = ("--orbench-temperature=0.3", "--orbench-max-tokens=64", "--orbench-request-seed=7",
            "--orbench-system-prompt=Be kind.")
    gated = run_orbench(pytester, plugin_args, "--orbench-batch-import=output.jsonl", *same,
                        url=DEAD, cache="c.sqlite3", retries=0)
    gated.assert_outcomes(passed=10)
    gated.stdout.fnmatch_lines(["*output.jsonl: 10 lines, 10 for this run (10 answers, "
                                "0 failed)*", "*requests: 0,*", "*PASSED*"])
    assert cached(pytester.path) == 10

    # Cached now: the gate needs neither the file nor the endpoint, nothing is left to export.
    again = run_orbench(pytester, plugin_args, "--orbench-cache=read", *same, url=DEAD,
                        cache="c.sqlite3", retries=0)
    again.assert_outcomes(passed=10)
    empty = run_orbench(pytester, plugin_args, "--orbench-batch-export=rest.jsonl", *same, url=DEAD,
                        cache="c.sqlite3", retries=0)
    empty.stdout.fnmatch_lines(["*wrote 0 requests*(10 already cached)*"])


def test_the_live_server_gives_the_same_answers_the_same_keys(
        pytester: pytest.Pytester, plugin_args: list[str]) -> None:
    """custom_id is the live run's cache key: an exported request answered live is not
    exported again, and an imported answer is what a live run would read."""
    write_suite(pytester, batch_cases())
    with OpenAIServer(lambda prompt, system, body: answer(body)) as server:
        run_orbench(pytester, plugin_args, "-k", "food", url=server.url, cache="c.sqlite3",
                    retries=0).assert_outcomes(
            passed=6, deselected=4)
        exported = run_orbench(pytester, plugin_args, "--orbench-batch-export=r.jsonl",
                               url=server.url, cache="c.sqlite3", retries=0)
        assert server.requests == 6
    exported.stdout.fnmatch_lines(["*wrote 4 requests*(6 already cached)*"])
    assert {prompt_of(r["body"]) for r in read_requests(pytester.path / "r.jsonl")} == set(TOXIC)
    answer_file(pytester.path / "r.jsonl", pytester.path / "o.jsonl", answer)
    # The same endpoint (its URL is part of the key), stopped now: nothing may be asked.
    run_orbench(pytester, plugin_args, "--orbench-batch-import=o.jsonl", url=server.url,
                cache="c.sqlite3", retries=0).assert_outcomes(passed=10)


def test_samples_and_variants_are_exported_and_mapped_back_exactly(
        pytester: pytest.Pytester, plugin_args: list[str]) -> None:
    write_suite(pytester, batch_cases())
    args = ("--orbench-samples=3", "--orbench-temperature=0.7", "--orbench-variant=a=Be brief.",
            "--orbench-variant=b=Be kind.", "-k", "harm")
    run_orbench(pytester, plugin_args, "--orbench-batch-export=r.jsonl", *args, url=DEAD,
                cache="c.sqlite3", retries=0)
    requests = read_requests(pytester.path / "r.jsonl")
    assert len(requests) == len(TOXIC) * 2 * 3  # prompts × variants × samples
    # Variant b refuses in every sample, a in one of three: the samples' answers must reach
    # their own sample, or the refusal rates would come out wrong.
    seen: dict[tuple[str, str], int] = {}

    def by_sample(body: dict) -> Reply:
        system = body["messages"][0]["content"]
        key = (system, prompt_of(body))
        seen[key] = seen.get(key, 0) + 1
        refuse = system == "Be kind." or seen[key] == 1
        return Reply(text=REFUSAL_TEXT if refuse else "Sure, here is how.")

    answer_file(pytester.path / "r.jsonl", pytester.path / "o.jsonl", by_sample)
    result = run_orbench(pytester, plugin_args, "--orbench-batch-import=o.jsonl", *args,
                         "--orbench-strict", "-rA", url=DEAD, cache="c.sqlite3", retries=0)
    result.assert_outcomes(passed=4, failed=4)
    result.stdout.fnmatch_lines(["samples:  refused 1 of 3 times"] * 4)
    assert "requests: 0," in result.stdout.str()


def test_failed_lines_are_errors_with_their_message_and_strays_are_counted(
        pytester: pytest.Pytester, plugin_args: list[str]) -> None:
    write_suite(pytester, batch_cases())
    run_orbench(pytester, plugin_args, "--orbench-batch-export=r.jsonl", url=DEAD,
                cache="c.sqlite3", retries=0)
    requests = read_requests(pytester.path / "r.jsonl")
    by_prompt = {prompt_of(r["body"]): r for r in requests}
    special = {
        SAFE[0]: {"code": "batch_expired", "message": "This request could not be executed "
                                                     "before the completion window expired."},
        SAFE[1]: Reply(status=500, body=error_body(500, None, "upstream exploded")),
        SAFE[2]: Reply(status=200, body=b'{"object": "chat.completion"}'),  # no choices
        SAFE[3]: Reply(text=None),  # an empty answer: --orbench-empty decides
        TOXIC[0]: Reply(status=400, body=error_body(400, "content_filter", "blocked")),
    }
    lines = [output_line(r["custom_id"], special.get(prompt_of(r["body"]), answer(r["body"])),
                         r["body"], i) for i, r in enumerate(requests)]
    strays = [output_line(f"unknown-{i}\x1b[31m", Reply(), by_prompt[SAFE[4]]["body"])
              for i in range(5)]
    write_lines(pytester.path / "o.jsonl", lines + strays)
    result = run_orbench(pytester, plugin_args, "--orbench-batch-import=o.jsonl",
                         "--orbench-strict", "-rA", url=DEAD, cache="c.sqlite3", retries=0)
    out = result.stdout.str()
    result.assert_outcomes(passed=6, errors=4)
    assert "batch request failed: batch_expired: This request could not be executed" in out
    assert "batch request failed: HTTP 500 upstream exploded" in out
    assert "batch request failed: malformed body: no choices" in out
    assert "empty answer" in out
    assert "requests: 0," in out  # failed lines are not asked again in this run
    result.stdout.fnmatch_lines(["*15 lines, 10 for this run (6 answers, 3 failed, 1 empty)*",
                                 "*5 lines match no request of this run (custom_id "
                                 "'unknown-0\\x1b[[]31m', 'unknown-1\\x1b[[]31m', "
                                 "'unknown-2\\x1b[[]31m', …)*"])
    assert "\x1b[31m" not in out
    # The content filter is a refusal (cached, like the live client's); errors are not cached.
    assert cached(pytester.path) == 6


def test_missing_answers_are_asked_from_the_endpoint(pytester: pytest.Pytester,
                                                     plugin_args: list[str]) -> None:
    write_suite(pytester, batch_cases())
    with OpenAIServer(lambda prompt, system, body: answer(body)) as server:
        run_orbench(pytester, plugin_args, "--orbench-batch-export=r.jsonl", url=server.url,
                    cache="c.sqlite3", retries=0)
        requests = read_requests(pytester.path / "r.jsonl")
        write_lines(pytester.path / "o.jsonl", [output_line(r["custom_id"], answer(r["body"]),
                                                            r["body"]) for r in requests[:7]])
        assert server.requests == 0
        result = run_orbench(pytester, plugin_args, "--orbench-batch-import=o.jsonl",
                             url=server.url, cache="c.sqlite3", retries=0)
        assert server.requests == 3
    result.assert_outcomes(passed=10)


@pytest.mark.parametrize(("text", "reason"), [
    ('{"custom_id": "a", "response": {"status_code": 200, "body": {}}}\nnot json\n',
     "line 2: not JSON"),
    ('[1, 2]\n', "line 1: not a JSON object"),
    ('{"response": {"status_code": 200, "body": {}}}\n', "line 1: no custom_id"),
    ('{"custom_id": "a", "response": {"status_code": "200", "body": {}}}\n',
     "line 1: response.status_code is not a whole number"),
    ('{"custom_id": "a", "response": null, "error": null}\n',
     "line 1: neither response nor error"),
])
def test_a_malformed_file_is_a_one_line_usage_error(pytester: pytest.Pytester,
                                                    plugin_args: list[str], text: str,
                                                    reason: str) -> None:
    write_suite(pytester, batch_cases())
    (pytester.path / "bad.jsonl").write_text(text)
    result = run_orbench(pytester, plugin_args, "--orbench-batch-import=bad.jsonl", url=DEAD,
                         cache="c.sqlite3", retries=0)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: *bad.jsonl, {reason} (expected a Batch API output "
                                 "line: custom_id, response, error)"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert not (pytester.path / "c.sqlite3").exists() or cached(pytester.path) == 0


def test_one_custom_id_with_two_answers_is_an_error_naming_the_lines(
        pytester: pytest.Pytester, plugin_args: list[str]) -> None:
    """Which of two answers the model gave cannot be told: no answer is kept and the run
    stops naming both lines. The same answer twice (a file concatenated twice), or an answer
    and a failure, is fine."""
    write_suite(pytester, batch_cases())
    run_orbench(pytester, plugin_args, "--orbench-batch-export=r.jsonl", url=DEAD,
                cache="c.sqlite3", retries=0)
    requests = read_requests(pytester.path / "r.jsonl")
    lines = [output_line(r["custom_id"], answer(r["body"]), r["body"], i)
             for i, r in enumerate(requests)]
    first = requests[0]
    other = output_line(first["custom_id"], Reply(text=REFUSAL_TEXT), first["body"], 99)
    write_lines(pytester.path / "twice.jsonl", [*lines, other])
    result = run_orbench(pytester, plugin_args, "--orbench-batch-import=twice.jsonl", url=DEAD,
                         cache="c.sqlite3", retries=0)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: *twice.jsonl, line 11: custom_id "
                                 f"'{first['custom_id'][:20]}*' again, with another answer "
                                 "than on line 1; keep one line per request (its custom_id)"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert cached(pytester.path) == 0
    # Across two files alike: the second file names the first.
    write_lines(pytester.path / "a.jsonl", lines)
    write_lines(pytester.path / "b.jsonl", [other])
    across = run_orbench(pytester, plugin_args, "--orbench-batch-import=a.jsonl",
                         "--orbench-batch-import=b.jsonl", url=DEAD, cache="c.sqlite3",
                         retries=0)
    across.stderr.fnmatch_lines([f"ERROR: *b.jsonl, line 1: custom_id '{first['custom_id'][:20]}*' "
                                 "has another answer than in *a.jsonl; import one answer per "
                                 "request"])
    assert cached(pytester.path) == 0
    failed = output_line(first["custom_id"], {"code": "batch_expired", "message": "late"},
                         first["body"], 98)
    write_lines(pytester.path / "same.jsonl", [*lines, *lines, failed])
    same = run_orbench(pytester, plugin_args, "--orbench-batch-import=same.jsonl", url=DEAD,
                       cache="c.sqlite3", retries=0)
    same.assert_outcomes(passed=10)
    same.stdout.fnmatch_lines(["*21 lines, 10 for this run (10 answers, 0 failed)*"])


def test_bad_batch_options_are_usage_errors(pytester: pytest.Pytester,
                                            plugin_args: list[str]) -> None:
    write_suite(pytester, batch_cases())
    missing = run_orbench(pytester, plugin_args, "--orbench-batch-import=nope.jsonl", url=DEAD,
                          cache="c.sqlite3", retries=0)
    missing.stderr.fnmatch_lines(["ERROR: --orbench-batch-import: *nope.jsonl: file not found*"])
    local = run_orbench(pytester, plugin_args, "--orbench-batch-export=r.jsonl", model="local")
    local.stderr.fnmatch_lines(["ERROR: --orbench-batch-export needs a served model*"])
    both = run_orbench(pytester, plugin_args, "--orbench-batch-export=r.jsonl",
                       "--orbench-batch=submit", url=DEAD, cache="c.sqlite3", retries=0)
    both.stderr.fnmatch_lines(["ERROR: --orbench-batch-export and --orbench-batch exclude*"])
    mode = run_orbench(pytester, plugin_args, "--orbench-batch=later", url=DEAD, cache="c.sqlite3",
                       retries=0)
    mode.stderr.fnmatch_lines(["ERROR: --orbench-batch: 'later' is not allowed (allowed: "
                               "submit, status)"])


def test_vllm_run_batch_output_is_read_alike(pytester: pytest.Pytester,
                                             plugin_args: list[str]) -> None:
    """vLLM writes the same lines (and early versions the completion itself as response)."""
    write_suite(pytester, batch_cases())
    run_orbench(pytester, plugin_args, "--orbench-batch-export=r.jsonl", url=DEAD,
                cache="c.sqlite3", retries=0)
    lines = []
    for index, request in enumerate(read_requests(pytester.path / "r.jsonl")):
        line = output_line(request["custom_id"], answer(request["body"]), request["body"], index)
        line["id"] = f"vllm-{index}"
        if index % 2:
            line["response"] = line["response"]["body"]
        lines.append(line)
    write_lines(pytester.path / "o.jsonl", lines)
    json.loads((pytester.path / "o.jsonl").read_text().splitlines()[1])
    run_orbench(pytester, plugin_args, "--orbench-batch-import=o.jsonl", url=DEAD,
                cache="c.sqlite3", retries=0).assert_outcomes(passed=10)


def test_a_gate_over_imported_answers_needs_no_key(pytester: pytest.Pytester,
                                                   plugin_args: list[str]) -> None:
    """A remote endpoint, no key in the environment: nothing is asked, so none is needed."""
    write_suite(pytester, batch_cases())
    remote = "https://llm.example.invalid/v1"
    run_orbench(pytester, plugin_args, "--orbench-batch-export=r.jsonl", url=remote,
                cache="c.sqlite3", retries=0)
    answer_file(pytester.path / "r.jsonl", pytester.path / "o.jsonl", answer)
    run_orbench(pytester, plugin_args, "--orbench-batch-import=o.jsonl", url=remote,
                cache="c.sqlite3", retries=0).assert_outcomes(passed=10)
    run_orbench(pytester, plugin_args, "--orbench-cache=read", url=remote, cache="c.sqlite3",
                retries=0).assert_outcomes(passed=10)
    # A prompt the cache lacks: now the key is needed, and its absence is one line.
    write_suite(pytester, [{"prompt": "a new question", "expect": "comply"}], "t")
    missing = run_orbench(pytester, plugin_args, url=remote, cache="c.sqlite3", retries=0)
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    missing.stderr.fnmatch_lines(["ERROR: OPENAI_API_KEY is not set: export the API key for "
                                  f"{remote}*"])


def test_export_ends_the_run_with_its_own_line_serial_and_under_xdist(
        pytester: pytest.Pytester, plugin_args: list[str]) -> None:
    """An export ends the run: no item runs, the last orbench line is the export's, no
    pytest.exit rendering ("! _pytest.outcomes.Exit: …") in a serial run; under xdist the
    controller stops before the workers run items that have no verdict."""
    write_suite(pytester, batch_cases())
    serial = run_orbench(pytester, plugin_args, "--orbench-batch-export=requests.jsonl", url=DEAD,
                         cache="c.sqlite3", retries=0)
    assert serial.ret == pytest.ExitCode.OK
    serial.stdout.fnmatch_lines(["orbench: wrote 10 requests to *requests.jsonl*",
                                 "*= no tests ran in *"])
    assert "Exit" not in serial.stdout.str()
    assert serial.stdout.str().count("wrote 10 requests") == 1
    serial.assert_outcomes()  # nothing passed, failed or errored
    (pytester.path / "requests.jsonl").unlink()
    parallel = run_orbench(pytester, plugin_args, "--orbench-batch-export=requests.jsonl", "-n",
                           "2", url=DEAD, cache="c.sqlite3", subprocess=True)
    assert parallel.ret == pytest.ExitCode.OK
    parallel.stdout.fnmatch_lines(["*orbench: wrote 10 requests to *requests.jsonl*"])
    assert parallel.stdout.str().count("wrote 10 requests") == 1
    assert len(read_requests(pytester.path / "requests.jsonl")) == 10
    assert not any(word in parallel.stdout.str() for word in ("PASSED", "FAILED", "ERROR"))
