"""The Batch API's JSONL lines, read and written (unit tests of batch_format / batch_import)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orbench_pytest.batch.format import (
    BatchLimits,
    parse_output,
    read_output,
    request_line,
    split_requests,
)
from orbench_pytest.batch.import_answers import import_lines, response_of
from orbench_pytest.core.errors import ConfigError

COMPLETION = {"object": "chat.completion", "choices": [
    {"index": 0, "message": {"role": "assistant", "content": "Sure."}, "finish_reason": "stop"}]}


def lines(*objects: object) -> list[bytes]:
    return [json.dumps(o).encode() for o in objects]


def test_a_request_line_is_the_batch_api_input_format() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "héllo"}], "temperature": 0}
    assert json.loads(request_line("k1", body)) == {
        "custom_id": "k1", "method": "POST", "url": "/v1/chat/completions", "body": body}
    assert "\n" not in request_line("k1", {"messages": [{"content": "a\nb"}]})


def test_openai_vllm_and_error_lines_are_read() -> None:
    read = list(parse_output([*lines(
        {"id": "batch_req_1", "custom_id": "a",
         "response": {"status_code": 200, "request_id": "r", "body": COMPLETION}, "error": None},
        {"id": "vllm-1", "custom_id": "b", "response": COMPLETION},  # early vLLM
        {"id": "batch_req_2", "custom_id": "c", "response": None,
         "error": {"code": "batch_expired", "message": "too late"}},
    ), b"", b"  \n"], "out.jsonl"))
    assert [(line.custom_id, line.status, line.error) for line in read] == [
        ("a", 200, None), ("b", 200, None), ("c", None, "batch_expired: too late")]
    assert json.loads(read[0].body) == COMPLETION
    assert response_of(read[1], "out.jsonl").text == "Sure."
    failed = response_of(read[2], "out.jsonl")
    assert failed.error == "batch request failed: batch_expired: too late"


def test_a_usable_answer_outranks_a_failure_of_the_same_key() -> None:
    failed = {"custom_id": "a", "response": None, "error": {"message": "boom"}}
    answered = {"custom_id": "a", "response": {"status_code": 200, "body": COMPLETION}}
    for order in ((failed, answered), (answered, failed)):
        report = import_lines(parse_output(lines(*order), "x"), {"a"}, "x")
        assert report.responses["a"].text == "Sure." and report.lines == 2


def test_a_missing_file_and_a_bad_line_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope.jsonl: cannot read the batch output"):
        list(read_output(tmp_path / "nope.jsonl"))
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"custom_id": "a", "response": {"status_code": 200, "body": {}}}\n\xff\n')
    with pytest.raises(ConfigError, match=r"bad.jsonl, line 2: not JSON"):
        list(read_output(bad))


def test_an_error_message_is_one_line_without_control_characters() -> None:
    line = {"custom_id": "a", "response": None,
            "error": {"code": "x", "message": "a\x1b[2Jb\n::error::c\r\x07" + "z" * 500}}
    (read,) = parse_output(lines(line), "x")
    assert read.error is not None and read.error.startswith("x: a\\x1b[2Jb ::error::c \\x07")
    assert len(read.error) <= 200 and "\n" not in read.error and "\x1b" not in read.error


def test_a_special_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError,
                       match=r"fifo: cannot read the batch output \(a FIFO, not a regular"):
        list(read_output(fifo))


_BODIES = st.lists(st.tuples(st.text(min_size=1, max_size=8),
                             st.dictionaries(st.sampled_from(["model", "x"]),
                                             st.text(max_size=40))), max_size=30)


@given(_BODIES, st.integers(1, 6), st.integers(1, 400))
def test_split_files_keep_every_request_in_order_within_the_limits(
        requests: list[tuple[str, dict[str, str]]], most: int, size: int) -> None:
    limits = BatchLimits(requests=most, bytes=size)
    files = split_requests(requests, limits)
    # split on newlines only: JSON keeps U+0085 and U+2028 raw, str.splitlines would cut there
    lines = [line for text in files for line in text.split("\n")[:-1]]
    assert lines == [request_line(i, b) for i, b in requests]
    for text in files:
        count = text.count("\n")
        assert 1 <= count <= most
        # only a request larger than the byte limit by itself may exceed it, alone
        assert len(text.encode("utf-8")) <= size or count == 1


def test_requests_that_fit_one_batch_are_one_file() -> None:
    requests = [(str(i), {"model": "m"}) for i in range(5)]
    assert len(split_requests(requests, BatchLimits())) == 1
    assert split_requests([], BatchLimits()) == []
    assert len(split_requests(requests, BatchLimits(requests=2))) == 3
