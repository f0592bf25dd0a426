"""--orbench-batch=submit / status against a fake Files + Batches API on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orbench_pytest.batch.api import BatchClient, BatchStatus, wait
from orbench_pytest.batch.state import state_path
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.fetch.retry import RetrySettings
from tests.batch_files import SAFE, TOXIC, answer, batch_cases, cached, prompt_of
from tests.batch_server import BatchServer
from tests.helpers import BATCHES_OF_FOUR, FakeClock, run_orbench, write_suite
from tests.hostile_server import HostileServer, Script, deep_json, error, http, huge_number
from tests.openai_server import REFUSAL_TEXT, Reply, error_body


def test_submit_waits_imports_and_gates(pytester: pytest.Pytester,
                                        plugin_args: list[str]) -> None:
    write_suite(pytester, batch_cases())
    with BatchServer(answer) as server:
        result = run_orbench(pytester, plugin_args, "--orbench-batch=submit",
                             "--orbench-temperature=0.2", url=server.url, cache="c.sqlite3",
                             retries=0, batch_poll=0)
        assert server.uploads == 1 and server.created == 1
        uploaded = [json.loads(line) for line in server.files["file-1"].splitlines()]
        assert server.chat_requests == 0  # everything came through the batch
    result.assert_outcomes(passed=10)
    assert {prompt_of(r["body"]) for r in uploaded} == set(SAFE) | set(TOXIC)
    assert all(r["body"]["temperature"] == 0.2 for r in uploaded)
    result.stdout.fnmatch_lines([
        "orbench: submitted 10 requests as batch batch_1",
        "orbench: batch batch_1: validating (queued)",
        "orbench: batch batch_1: in_progress (0/10 done)",
        "orbench: batch batch_1: finalizing (0/10 done)",
        "orbench: batch batch_1: completed (10/10 done)",
        "orbench: batch batch_1: 10 lines, 10 for this run (10 answers, 0 failed)",
        "*requests: 0,*", "*PASSED*"])
    assert cached(pytester.path) == 10
    assert json.loads(state_path(pytester.path / "c.sqlite3").read_text()) == {}


def test_a_rerun_resumes_the_submitted_batch_instead_of_submitting_again(
        pytester: pytest.Pytester, plugin_args: list[str]) -> None:
    write_suite(pytester, batch_cases())
    with BatchServer(answer) as server:
        first = run_orbench(pytester, plugin_args, "--orbench-batch=submit",
                            "--orbench-max-duration=0.001", url=server.url, cache="c.sqlite3",
                            retries=0, batch_poll=0)
        assert first.ret == pytest.ExitCode.TESTS_FAILED
        first.stdout.fnmatch_lines(["*batch batch_1: * after --orbench-max-duration=0.001s; "
                                    "run again to resume waiting for it*"])
        remembered = json.loads(state_path(pytester.path / "c.sqlite3").read_text())
        assert [entry["batch_ids"] for entry in remembered.values()] == [["batch_1"]]

        status = run_orbench(pytester, plugin_args, "--orbench-batch=status", url=server.url,
                             cache="c.sqlite3", retries=0)
        assert status.ret == pytest.ExitCode.OK
        status.stdout.fnmatch_lines(["*orbench: batch batch_1: * (*)*"])
        assert "orbench gate" not in status.stdout.str()

        looks = server.looks
        second = run_orbench(pytester, plugin_args, "--orbench-batch=submit", url=server.url,
                             cache="c.sqlite3", retries=0, batch_poll=0)
        assert server.uploads == 1 and server.created == 1  # resumed, not submitted again
        assert server.looks > looks
    second.stdout.fnmatch_lines(["orbench: waiting for batch batch_1 (10 requests), submitted "
                                 "earlier for these requests"])
    second.assert_outcomes(passed=10)


def test_status_without_a_batch_and_with_everything_cached(pytester: pytest.Pytester,
                                                          plugin_args: list[str]) -> None:
    write_suite(pytester, batch_cases())
    with BatchServer(answer) as server:
        none = run_orbench(pytester, plugin_args, "--orbench-batch=status", url=server.url,
                           cache="c.sqlite3", retries=0)
        none.stdout.fnmatch_lines(["*no batch submitted for the 10 requests the cache lacks*"])
        assert none.ret == pytest.ExitCode.OK and server.created == 0
        run_orbench(pytester, plugin_args, "--orbench-batch=submit", url=server.url,
                    cache="c.sqlite3", retries=0, batch_poll=0).assert_outcomes(passed=10)
        # read: no system_fingerprint probe, which this server (no chat route) cannot answer.
        again = run_orbench(pytester, plugin_args, "--orbench-batch=submit",
                            "--orbench-cache=read",
                            url=server.url, cache="c.sqlite3", retries=0, batch_poll=0)
        assert server.created == 1
    again.assert_outcomes(passed=10)
    again.stdout.fnmatch_lines(["orbench: the cache holds every answer: no batch to submit"])


def test_an_expired_batch_imports_what_it_answered(pytester: pytest.Pytester,
                                                    plugin_args: list[str]) -> None:
    write_suite(pytester, batch_cases())
    steps = ("validating", "in_progress", "finalizing", "expired")
    with BatchServer(answer, steps=steps, expire_after=7) as server:
        result = run_orbench(pytester, plugin_args, "--orbench-batch=submit", url=server.url,
                             cache="c.sqlite3", retries=0, batch_poll=0)
        assert sorted(server.downloads) == ["file-2", "file-3"]  # output and error files
    result.assert_outcomes(passed=7, errors=3)
    result.stdout.fnmatch_lines(["*batch batch_1: expired (10/10 done, 3 failed)*",
                                 "*10 lines, 10 for this run (7 answers, 3 failed)*"])
    assert "batch request failed: batch_expired: This request could not be executed" in \
        result.stdout.str()
    assert cached(pytester.path) == 7


def test_partial_error_file_lines_are_item_errors(pytester: pytest.Pytester,
                                                  plugin_args: list[str]) -> None:
    write_suite(pytester, batch_cases())

    def flaky(body: dict) -> Reply:
        if prompt_of(body) == SAFE[0]:
            return Reply(status=429, body=error_body(429, "rate_limit_exceeded", "slow down"))
        if prompt_of(body) == TOXIC[0]:
            return Reply(status=400, body=error_body(400, "content_filter", "blocked"))
        return answer(body)

    with BatchServer(flaky) as server:
        result = run_orbench(pytester, plugin_args, "--orbench-batch=submit", "-rE",
                             url=server.url, cache="c.sqlite3", retries=0, batch_poll=0)
    result.assert_outcomes(passed=9, errors=1)
    result.stdout.fnmatch_lines(["*batch request failed: HTTP 429 slow down*"])


def test_a_failed_batch_is_a_usage_error_and_the_next_run_submits_anew(
        pytester: pytest.Pytester, plugin_args: list[str]) -> None:
    write_suite(pytester, batch_cases())
    errors = [{"code": "invalid_request", "message": "model m\x1b[2J is not \n available",
               "line": 1}]
    with BatchServer(answer, steps=("validating", "failed"), errors=errors) as server:
        result = run_orbench(pytester, plugin_args, "--orbench-batch=submit", url=server.url,
                             cache="c.sqlite3", retries=0, batch_poll=0)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines(["ERROR: batch batch_1 failed (batch batch_1: "
                                     "invalid_request: model m* is not available); run again "
                                     "to submit what is missing anew"])
        assert "\x1b[2J" not in result.stderr.str()
        run_orbench(pytester, plugin_args, "--orbench-batch=submit", url=server.url,
                    cache="c.sqlite3", retries=0, batch_poll=0)
        assert server.created == 2


def test_an_unreachable_batch_api_is_a_usage_error(pytester: pytest.Pytester,
                                                   plugin_args: list[str]) -> None:
    write_suite(pytester, batch_cases())
    result = run_orbench(pytester, plugin_args, "--orbench-batch=submit",
                         url="http://127.0.0.1:9/v1", cache="c.sqlite3", retries=1)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: Batch API at http://127.0.0.1:9/v1: cannot upload the "
                                 "batch input: ConnectError: * after 2 attempts"])
    assert "Traceback" not in result.stderr.str()


def test_wait_polls_at_its_interval_reports_changes_and_stops_at_the_limit() -> None:
    steps = ("validating",) + ("in_progress",) * 50 + ("completed",)
    with BatchServer(answer, steps=steps) as server:
        client = BatchClient(server.url, None)
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        line = {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": body}
        batch_id = client.submit(json.dumps(line).encode() + b"\n", "r.jsonl")
        time = FakeClock()
        seen: list[BatchStatus] = []
        last = wait(client, batch_id, poll_s=30, max_wait_s=100, report=seen.append,
                    clock=time, sleep=time.sleep)
        assert not last.finished and last.status == "in_progress"
        assert time.slept == [30, 30, 30, 10]  # bounded by the limit, not past it
        assert [s.status for s in seen] == ["validating", "in_progress"]  # changes only
        time = FakeClock()
        done = wait(client, batch_id, poll_s=60, max_wait_s=None, report=seen.append,
                    clock=time, sleep=time.sleep)
        assert done.status == "completed" and set(time.slept) == {60}
        assert done.output_file_id is not None


def test_the_state_file_names_its_cache(tmp_path: Path) -> None:
    assert state_path(tmp_path / "c.sqlite3") == tmp_path / "c.sqlite3.batches.json"
    assert REFUSAL_TEXT  # the refusal the fake batch answers toxic prompts with


def test_more_requests_than_a_batch_takes_are_several_batches(
        pytester: pytest.Pytester, plugin_args: list[str]) -> None:
    write_suite(pytester, batch_cases())
    with BatchServer(answer) as server:
        first = run_orbench(pytester, plugin_args, BATCHES_OF_FOUR, "--orbench-batch=submit",
                            "--orbench-max-duration=0.001", url=server.url, cache="c.sqlite3",
                            retries=0, batch_poll=0)
        assert first.ret == pytest.ExitCode.TESTS_FAILED
        assert server.created == 3
        sizes = [len(server.files[f"file-{i}"].splitlines()) for i in (1, 2, 3)]
        assert sizes == [4, 4, 2]
        status = run_orbench(pytester, plugin_args, BATCHES_OF_FOUR, "--orbench-batch=status",
                             url=server.url, cache="c.sqlite3", retries=0)
        status.stdout.fnmatch_lines(["orbench: batch batch_1: *", "orbench: batch batch_2: *",
                                     "orbench: batch batch_3: *"])
        assert "Exit" not in status.stdout.str()
        result = run_orbench(pytester, plugin_args, BATCHES_OF_FOUR, "--orbench-batch=submit",
                             url=server.url, cache="c.sqlite3", retries=0, batch_poll=0)
        assert server.created == 3  # resumed all three
    result.stdout.fnmatch_lines(["orbench: waiting for batches batch_1, batch_2, batch_3 "
                                 "(10 requests), submitted earlier for these requests",
                                 "orbench: batches batch_1, batch_2, batch_3: 10 lines, 10 for "
                                 "this run (10 answers, 0 failed)"])
    result.assert_outcomes(passed=10)


def replies(*answers: bytes) -> Script:
    """A script answering each request with the next of `answers`."""
    left = list(answers)
    return lambda prompt: left.pop(0)


def a_file(file_id: str = "file-1") -> bytes:
    return http(200, json.dumps({"id": file_id, "object": "file"}).encode())


def test_a_call_is_retried_as_the_fetch_retries_a_request() -> None:
    """503 and 429 (with its Retry-After) are tried again after the fetch's backoff, on the
    injected clock; the batch is created once the API answers."""
    script = replies(error(503, "busy"), http(429, b"{}", {"Retry-After": "7"}), a_file(),
                     http(200, b'{"id": "batch_1", "status": "validating"}'))
    time = FakeClock()
    with HostileServer(script) as server:
        client = BatchClient(server.url, None, retry=RetrySettings(max_retries=2,
                                                                   backoff_base_s=1.0),
                             clock=time, sleep=time.sleep)
        assert client.submit(b"{}\n", "r.jsonl") == "batch_1"
        assert server.requests == 4
    assert 0.5 <= time.slept[0] <= 1.0 and 7.0 <= time.slept[1] <= 7.7


def test_retries_end_in_one_line_and_quota_is_not_retried() -> None:
    time = FakeClock()
    settings = RetrySettings(max_retries=2)
    with HostileServer(replies(*[error(503, "busy")] * 3)) as server:
        client = BatchClient(server.url, None, retry=settings, clock=time, sleep=time.sleep)
        with pytest.raises(ConfigError) as failed:
            client.status("batch_1")
        assert server.requests == 3
    assert str(failed.value) == (f"Batch API at {server.url}: cannot look at batch batch_1: "
                                 "HTTP 503 busy after 3 attempts")
    quota = json.dumps({"error": {"message": "no credit", "code": "insufficient_quota"}})
    with HostileServer(replies(http(429, quota.encode()))) as server:
        client = BatchClient(server.url, None, retry=settings, clock=time, sleep=time.sleep)
        with pytest.raises(ConfigError) as out_of_quota:
            client.submit(b"{}\n", "r.jsonl")
        assert server.requests == 1
    assert str(out_of_quota.value).endswith(
        "cannot upload the batch input: quota exhausted: HTTP 429 no credit")


HOSTILE_BATCHES = {
    "not JSON": (http(200, b"<html>oops</html>"), "the answer is not JSON"),
    "a list": (http(200, b"[1, 2]"), "the answer is not a JSON object"),
    "nested 100,000 deep": (deep_json(), "the answer is not JSON"),
    "a 5,000-digit number": (huge_number(), "the answer is not JSON"),
    "no status": (http(200, b'{"id": "batch_1"}'), "the answer has no status"),
    "a forged status": (http(200, b'{"id": "batch_1", "status": "completed\\u001b[2J"}'),
                        "the answer has no status"),
    "an id with a newline": (http(200, b'{"id": "b\\n::error::x", "status": "completed"}'),
                             "the answer has no usable id"),
    "an output file outside the files": (
        http(200, b'{"id": "b", "status": "completed", "output_file_id": "../../x"}'),
        "the answer has no usable output_file_id"),
}


@pytest.mark.parametrize("reply, reason", HOSTILE_BATCHES.values(), ids=HOSTILE_BATCHES.keys())
def test_a_malformed_or_hostile_batch_is_one_line_naming_the_call(reply: bytes,
                                                                  reason: str) -> None:
    with HostileServer(replies(reply)) as server:
        with pytest.raises(ConfigError) as failed:
            BatchClient(server.url, None).status("batch_1")
    assert str(failed.value) == (f"Batch API at {server.url}: cannot look at batch batch_1: "
                                 f"{reason}")


def test_an_error_that_quotes_the_key_or_forges_lines_is_shown_harmless() -> None:
    key = "sk-proj-" + "k" * 40
    with HostileServer(replies(error(401, f"Incorrect API key {key}\n::error::forged\x1b[2J"))
                       ) as server:
        with pytest.raises(ConfigError) as failed:
            BatchClient(server.url, key).submit(b"{}\n", "r.jsonl")
    message = str(failed.value)
    assert message.startswith(f"Batch API at {server.url}: cannot upload the batch input: "
                              "HTTP 401 Incorrect API key [REDACTED]")
    assert key not in message and "\n" not in message and "\x1b" not in message
