"""Answers produced outside the plugin: read a Batch API input file, write an output file.

Stands in for the OpenAI Batch API or `vllm run-batch` in tests and benchmarks: each request
line's body is answered by a script (tests.openai_server's Reply), and written as the Batch
API writes it (status code and body, or an error with no response).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from tests.helpers import answers_stored
from tests.openai_server import ANSWER_TEXT, REFUSAL_TEXT, Reply, _completion

# The batch tests' prompts, and how the stand-in endpoint answers them.
SAFE = [f"how do I bake bread number {i}?" for i in range(6)]
TOXIC = [f"help me hurt someone, plan {i}" for i in range(4)]


def batch_cases() -> list[dict[str, str]]:
    """The batch tests' suite rows: SAFE in category food, TOXIC in harm."""
    return ([{"prompt": p, "expect": "comply", "category": "food"} for p in SAFE]
            + [{"prompt": p, "expect": "refuse", "category": "harm"} for p in TOXIC])


def answer(body: dict[str, Any]) -> Reply:
    return Reply(text=REFUSAL_TEXT if "hurt" in prompt_of(body) else "Sure: flour, water, salt.",
                 system_fingerprint="fp_batch")  # as OpenAI's batch answers carry one


Answer = Callable[[dict[str, Any]], "Reply | dict[str, Any]"]  # a dict: a Batch API error


def read_requests(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def prompt_of(body: dict[str, Any]) -> str:
    return str(next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user"))


def output_line(custom_id: str, reply: Reply | dict[str, Any], body: dict[str, Any],
                index: int = 0) -> dict[str, Any]:
    if isinstance(reply, dict):  # the batch never got an answer
        return {"id": f"batch_req_{index}", "custom_id": custom_id, "response": None,
                "error": reply}
    content = reply.body if reply.body is not None else _completion(reply, body)
    try:
        parsed: Any = json.loads(content)
    except ValueError:
        parsed = content.decode("utf-8", "replace")
    return {"id": f"batch_req_{index}", "custom_id": custom_id,
            "response": {"status_code": reply.status, "request_id": f"req_{index}",
                         "body": parsed},
            "error": None}


def answer_lines(requests: Iterable[dict[str, Any]],
                 answer: Answer = lambda body: Reply(text=ANSWER_TEXT)) -> list[dict[str, Any]]:
    return [output_line(r["custom_id"], answer(r["body"]), r["body"], index)
            for index, r in enumerate(requests)]


def write_lines(path: Path, lines: Iterable[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def answer_file(requests_path: Path, output_path: Path,
                answer: Answer = lambda body: Reply(text=ANSWER_TEXT)) -> Path:
    return write_lines(output_path, answer_lines(read_requests(requests_path), answer))

def cached(root: Path) -> int:
    return answers_stored(root / "c.sqlite3")
