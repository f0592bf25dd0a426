"""The OpenAI Batch API's JSONL files (also what `vllm run-batch` reads and writes); pure Python.

Input: one request a line, `{"custom_id", "method": "POST", "url": "/v1/chat/completions",
"body"}`. Output (and error) files: one line a request, `{"id", "custom_id", "response":
{"status_code", "request_id", "body"} | null, "error": {"code", "message"} | null}`, in any
order. Early vLLM versions wrote the completion itself as `response`; that is read too.
A malformed line is a one-line error naming the file and the line.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orbench_pytest.core import defaults
from orbench_pytest.core.bounded import BODY_LIMIT, open_regular
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.types import well_formed
from orbench_pytest.core.untrusted import terminal_text

CHAT_URL = "/v1/chat/completions"
_SHOWN_ID = 40  # characters of a custom_id shown in a message


def request_line(custom_id: str, body: dict[str, Any]) -> str:
    return json.dumps({"custom_id": custom_id, "method": "POST", "url": CHAT_URL, "body": body},
                      ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class BatchLimits:
    """What one Batch API input file may hold (OpenAI: 50,000 requests and 200 MB)."""

    requests: int = defaults.BATCH_MAX_REQUESTS
    bytes: int = defaults.BATCH_MAX_BYTES


def split_requests(requests: Iterable[tuple[str, dict[str, Any]]],
                   limits: BatchLimits) -> list[str]:
    """The input files' texts, in order, each within `limits` (a single request larger than
    the byte limit goes alone: the endpoint, not this, says no)."""
    files: list[str] = []
    lines: list[str] = []
    size = 0
    for custom_id, body in requests:
        line = request_line(custom_id, body) + "\n"
        line_size = len(line.encode("utf-8"))
        if lines and (len(lines) >= limits.requests or size + line_size > limits.bytes):
            files.append("".join(lines))
            lines, size = [], 0
        lines.append(line)
        size += line_size
    if lines:
        files.append("".join(lines))
    return files


@dataclass(frozen=True, slots=True)
class OutputLine:
    """One request's outcome: an HTTP exchange (status and raw body), or a batch error."""

    custom_id: str
    status: int | None  # None: the batch never got an answer (error says why)
    body: bytes
    error: str | None
    number: int = 0  # its line in the file (from 1), for messages


LINE_LIMIT = BODY_LIMIT + 64 * 1024  # one reply, and its line's own fields


def read_output(path: Path) -> Iterator[OutputLine]:
    """Every line of a Batch API output or error file (a regular file; lines bounded)."""
    try:
        with open_regular(path, "the batch output") as handle:
            yield from parse_output(_bounded_lines(handle, str(path)), str(path))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the batch output ({exc.strerror or exc})") \
            from None


def _bounded_lines(handle: Any, where: str) -> Iterator[bytes]:
    number = 0
    while line := handle.readline(LINE_LIMIT + 1):
        number += 1
        if len(line) > LINE_LIMIT:
            raise ConfigError(f"{where}, line {number}: longer than the "
                              f"{LINE_LIMIT // 2**20} MiB a line may hold")
        yield line


def parse_output(lines: Iterable[bytes], where: str) -> Iterator[OutputLine]:
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            yield _output_line(json.loads(raw), number)
        except RecursionError:  # a line nested deeper than Python recurses: that line only
            raise ConfigError(f"{where}, line {number}: nested too deep to read (expected a "
                              "Batch API output line: custom_id, response, error)") from None
        except (ValueError, UnicodeDecodeError) as exc:
            reason = "not JSON" if not isinstance(exc, _Malformed) else str(exc)
            raise ConfigError(f"{where}, line {number}: {reason} (expected a Batch API output "
                              "line: custom_id, response, error)") from None


class _Malformed(ValueError):
    """Private control flow, not an error of the package's: raised inside the parsing of one
    line and turned into that line's ConfigError before it leaves this module."""


def _output_line(data: Any, number: int) -> OutputLine:
    if not isinstance(data, dict):
        raise _Malformed("not a JSON object")
    custom_id = data.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id:
        raise _Malformed("no custom_id")
    response = data.get("response")
    error = data.get("error")
    if response is None:
        if error is None:
            raise _Malformed("neither response nor error")
        return OutputLine(custom_id, None, b"", _error_text(error), number)
    if not isinstance(response, dict):
        raise _Malformed("response is not an object")
    if "status_code" not in response and "body" not in response:  # early vLLM: the body itself
        return OutputLine(custom_id, 200, _body_bytes(response), None, number)
    status = response.get("status_code")
    if isinstance(status, bool) or not isinstance(status, int):
        raise _Malformed("response.status_code is not a whole number")
    return OutputLine(custom_id, status, _body_bytes(response.get("body")),
                      None if error is None else _error_text(error), number)


def _body_bytes(body: Any) -> bytes:
    if body is None:
        return b""
    if isinstance(body, str):  # a body kept as text: parsed (or found malformed) like a live one
        return well_formed(body).encode("utf-8")
    # ASCII JSON: a lone surrogate escape (\ud800) stays an escape, and the live client's
    # parser turns it into U+FFFD as it does for an endpoint's reply.
    return json.dumps(body).encode("ascii")


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        code, message = error.get("code"), error.get("message")
        text = ": ".join(str(part) for part in (code, message) if part not in (None, ""))
    else:
        text = str(error)
    return terminal_text(text, 200) or "no message"


def shown_id(custom_id: str) -> str:
    """A custom_id as a message shows it: bounded, quoted, no control characters."""
    # Redacted (a key pasted into an id is not printed), escaped (no control character, no
    # workflow command), bounded, then quoted.
    return "'" + terminal_text(custom_id, _SHOWN_ID).replace("'", "\\'") + "'"
