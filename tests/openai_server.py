"""A real OpenAI-compatible chat-completions server on 127.0.0.1 for the project's tests.

It speaks HTTP/1.1 with keep-alive over plain asyncio streams (so it can also misbehave:
reset connections, cut bodies short, hang), answers from a script, and counts what it saw.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.timeouts import SUBPROCESS_TIMEOUT_S, THREAD_TIMEOUT_S

REFUSAL_TEXT = "I'm sorry, but I can't help with that."
ANSWER_TEXT = "Sure. Here is a short, helpful answer to your question."


USAGE = {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}


@dataclass
class Reply:
    """What the server does for one request."""

    text: str | None = ANSWER_TEXT
    status: int = 200
    finish_reason: str = "stop"
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None  # raw body instead of a chat completion
    fault: str | None = None  # reset | truncate | hang | trickle (slow-loris: a byte a beat)
    delay_s: float = 0.0
    hold: threading.Event | None = None  # answered once the test sets it (at most a minute on)
    reasoning: str | None = None
    system_fingerprint: str | None = None  # the backend's, as OpenAI returns it
    # token counts as the server reports them; None: no `usage` in the reply at all
    usage: dict[str, Any] | None = field(default_factory=lambda: dict(USAGE))
    # Held until this holds (looked at every 5 ms): an event the test waits for, not a delay.
    until: Callable[[], bool] | None = None


Script = Callable[[str, "str | None", dict[str, Any]], Reply]


def always(text: str = ANSWER_TEXT) -> Script:
    return lambda prompt, system, body: Reply(text=text)


def restating(prompt: str) -> str:
    """ANSWER_TEXT with the prompt restated: each prompt its own answer."""
    return f"Sure. Here is a short, helpful answer to your question, which was: {prompt}"


def refuse_when(predicate: Callable[[str], bool], *, distinct: bool = False) -> Script:
    """Refuse the prompts the predicate picks (with the one REFUSAL_TEXT, as models refuse),
    answer the rest: with ANSWER_TEXT, or with `distinct` each with its own answer."""
    def answer(prompt: str) -> str:
        return restating(prompt) if distinct else ANSWER_TEXT

    return lambda prompt, system, body: Reply(
        text=REFUSAL_TEXT if predicate(prompt) else answer(prompt))


def error_body(status: int, code: str | None, message: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": "invalid_request_error",
                                 "code": code}}).encode()


RATE_LIMITED_BODY = error_body(429, "rate_limit_exceeded", "Too many requests in flight")


class OpenAIServer:
    """`in_flight_limit=K`: like a provider's concurrency limit, a request arriving while K are
    being answered gets an immediate 429 (counted in `rate_limited`, not in `in_flight`)."""

    def __init__(self, script: Script | None = None, latency_s: float = 0.0,
                 in_flight_limit: int | None = None) -> None:
        self.script: Script = script or always()
        self.models: list[str] = ["test-model"]  # what GET /models lists
        self.latency_s = latency_s
        self.in_flight_limit = in_flight_limit
        self.requests = 0
        self.rate_limited = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.arrivals: list[float] = []  # time.monotonic() of each chat request's arrival
        self.connections = 0  # TCP connections accepted: shows the client's pooling
        self.prompts: list[str] = []
        self.auth_headers: list[str | None] = []
        # Each request's path with its query, and its Authorization header, as sent.
        self.targets: list[tuple[str, str | None]] = []
        self.bodies: list[dict[str, Any]] = []
        # Each chat request's messages as (role, content) pairs, in the order sent.
        self.conversations: list[list[tuple[str, str]]] = []
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.base_events.Server | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self.port = 0
        self._hangs: list[asyncio.Future[Any]] = []
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> OpenAIServer:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._start(), self._loop)
        future.result(timeout=THREAD_TIMEOUT_S)
        return self

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        async def _stop() -> None:
            for hang in self._hangs:
                hang.cancel()
            for writer in list(self._writers):
                writer.close()
            if self._server is not None:
                self._server.close()
            # Connections still open end here, not as "Task was destroyed but it is
            # pending!" when the stopped loop is collected.
            handlers = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in handlers:
                task.cancel()
            await asyncio.gather(*handlers, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(_stop(), self._loop).result(timeout=THREAD_TIMEOUT_S)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=THREAD_TIMEOUT_S)
        if not self._thread.is_alive():
            self._loop.close()

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        self.connections += 1
        try:
            while True:
                request = await _read_request(reader)
                if request is None:
                    return
                method, path, headers, body = request
                if not await self._respond(method, path, headers, body, writer):
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _respond(self, method: str, path: str, headers: dict[str, str], body: bytes,
                       writer: asyncio.StreamWriter) -> bool:
        """Returns False when the connection must not be reused."""
        self.targets.append((path, headers.get("authorization")))
        path = path.partition("?")[0]  # routed by path: a base URL may carry a query
        if method == "GET" and path.endswith("/stats"):
            # Counters for a server run in another process (benchmarks, kill-and-resume).
            stats = {"requests": self.requests, "max_in_flight": self.max_in_flight,
                     "distinct_prompts": len(set(self.prompts)),
                     "rate_limited": self.rate_limited}
            _write(writer, 200, json.dumps(stats).encode(), {})
            await writer.drain()
            return True
        if method == "GET" and path.endswith("/models"):
            _write(writer, 200, json.dumps({"object": "list", "data": [
                {"id": model, "object": "model"} for model in self.models]}).encode(), {})
            await writer.drain()
            return True
        if method != "POST" or not path.endswith("/chat/completions"):
            _write(writer, 404, error_body(404, "not_found", f"no route {path}"), {})
            await writer.drain()
            return True
        self.requests += 1
        self.arrivals.append(time.monotonic())
        if self.in_flight_limit is not None and self.in_flight >= self.in_flight_limit:
            self.rate_limited += 1
            _write(writer, 429, RATE_LIMITED_BODY, {})
            await writer.drain()
            return True
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            payload = json.loads(body)
            messages = payload.get("messages", [])
            prompt = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
            system = next((m["content"] for m in messages if m["role"] == "system"), None)
            self.prompts.append(prompt)
            self.bodies.append(payload)
            self.conversations.append([(m.get("role"), m.get("content")) for m in messages])
            self.auth_headers.append(headers.get("authorization"))
            reply = self.script(prompt, system, payload)
            while reply.until is not None and not reply.until():
                await asyncio.sleep(0.005)
            if reply.hold is not None:  # cancelled, like a hang, when the server stops
                held = asyncio.ensure_future(
                    self._loop.run_in_executor(None, reply.hold.wait, THREAD_TIMEOUT_S))
                self._hangs.append(held)
                await held
            if self.latency_s or reply.delay_s:
                await asyncio.sleep(self.latency_s + reply.delay_s)
            return await self._send(reply, payload, writer)
        finally:
            self.in_flight -= 1

    async def _send(self, reply: Reply, payload: dict[str, Any],
                    writer: asyncio.StreamWriter) -> bool:
        if reply.fault == "reset":
            writer.transport.abort()
            return False
        if reply.fault == "hang":
            hang: asyncio.Future[None] = self._loop.create_future()
            self._hangs.append(hang)
            try:
                await asyncio.wait_for(hang, timeout=SUBPROCESS_TIMEOUT_S)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                pass
            writer.transport.abort()
            return False
        body = reply.body if reply.body is not None else _completion(reply, payload)
        if reply.fault == "trickle":  # headers at once, then one body byte every 0.2 s
            head = (f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\n\r\n").encode()
            writer.write(head)
            for i in range(len(body)):
                writer.write(body[i:i + 1])
                await writer.drain()
                await asyncio.sleep(0.2)
            return True
        if reply.fault == "truncate":
            head = (f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\n\r\n").encode()
            writer.write(head + body[: len(body) // 2])
            await writer.drain()
            writer.transport.abort()
            return False
        _write(writer, reply.status, body, reply.headers)
        await writer.drain()
        return True


def _completion(reply: Reply, payload: dict[str, Any]) -> bytes:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    if reply.reasoning is not None:
        message["reasoning_content"] = reply.reasoning
    extra = ({"system_fingerprint": reply.system_fingerprint}
             if reply.system_fingerprint is not None else {})
    return json.dumps({
        **extra,
        "id": f"chatcmpl-{random.randrange(1 << 30)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": payload.get("model", "test-model"),
        "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
        **({"usage": reply.usage} if reply.usage is not None else {}),
    }).encode()


_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden",
            404: "Not Found", 408: "Request Timeout", 409: "Conflict", 429: "Too Many Requests",
            500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable",
            504: "Gateway Timeout"}


def _write(writer: asyncio.StreamWriter, status: int, body: bytes,
           headers: dict[str, str]) -> None:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}",
             "Content-Type: application/json", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)


async def _read_request(reader: asyncio.StreamReader
                        ) -> tuple[str, str, dict[str, str], bytes] | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    body = await reader.readexactly(length) if length else b""
    return method, path, headers, body


# --- fault-injecting mode ----------------------------------------------------------------
# Faults are decided per (system prompt, prompt, attempt number), from a hash and a seed, so a
# run is reproducible whatever order concurrent requests arrive in.

TRANSIENT_FAULTS = ("429", "500", "503", "reset", "hang", "truncate", "invalid_json")
FILTER_FAULTS = ("content_filter_400", "finish_content_filter")
ALL_FAULTS = TRANSIENT_FAULTS + FILTER_FAULTS

AZURE_FILTER_BODY = json.dumps({"error": {
    "message": "The response was filtered due to the prompt triggering Azure OpenAI's content "
               "management policy. Please modify your prompt and retry.",
    "type": None, "param": "prompt", "code": "content_filter", "status": 400,
    "innererror": {"code": "ResponsibleAIPolicyViolation", "content_filter_result": {
        "hate": {"filtered": False, "severity": "safe"},
        "violence": {"filtered": True, "severity": "high"}}}}}).encode()


def fault_reply(kind: str, retry_after_ms: int = 20) -> Reply:
    """The Reply that injects one fault kind."""
    if kind == "429":
        seconds = max(1, -(-retry_after_ms // 1000))  # whole seconds, rounded up
        return Reply(status=429, body=error_body(429, "rate_limit_exceeded", "Rate limit reached"),
                     headers={"retry-after-ms": str(retry_after_ms),
                              "retry-after": str(seconds)})
    if kind in ("500", "503"):
        return Reply(status=int(kind), body=error_body(int(kind), None, "The server had an error"))
    if kind in ("reset", "hang", "truncate"):
        return Reply(fault=kind)
    if kind == "invalid_json":
        return Reply(body=b"<html><body>502 Bad Gateway</body></html>")
    if kind == "content_filter_400":
        return Reply(status=400, body=AZURE_FILTER_BODY)
    if kind == "finish_content_filter":
        return Reply(text=None, finish_reason="content_filter")
    raise ValueError(f"unknown fault kind {kind!r} (known: {', '.join(ALL_FAULTS)})")


class FaultyScript:
    """Wraps a script: each request is faulted with probability `rate`, kind drawn from `kinds`.

    `injected` logs (prompt, attempt, kind) for every fault sent; `attempts` counts requests
    per prompt. The server calls scripts on its one event-loop thread: no locking needed.
    """

    def __init__(self, script: Script, rate: float, seed: int = 0,
                 kinds: tuple[str, ...] = TRANSIENT_FAULTS, retry_after_ms: int = 20) -> None:
        for kind in kinds:
            fault_reply(kind)  # unknown kinds fail here, not mid-run
        self.script = script
        self.rate = rate
        self.seed = seed
        self.kinds = kinds
        self.retry_after_ms = retry_after_ms
        self.attempts: dict[tuple[str | None, str], int] = {}
        self.injected: list[tuple[str, int, str]] = []

    def kind_for(self, system: str | None, prompt: str, attempt: int) -> str | None:
        """The fault of this attempt (0-based), or None: a pure function of the seed."""
        import hashlib

        digest = hashlib.sha256(
            f"{self.seed}\0{system or ''}\0{prompt}\0{attempt}".encode()).digest()
        draw = int.from_bytes(digest[:8], "big") / 2 ** 64
        if draw >= self.rate or not self.kinds:
            return None
        return self.kinds[int.from_bytes(digest[8:16], "big") % len(self.kinds)]

    def __call__(self, prompt: str, system: str | None, body: dict[str, Any]) -> Reply:
        attempt = self.attempts.get((system, prompt), 0)
        self.attempts[(system, prompt)] = attempt + 1
        kind = self.kind_for(system, prompt, attempt)
        if kind is None:
            return self.script(prompt, system, body)
        self.injected.append((prompt, attempt, kind))
        return fault_reply(kind, self.retry_after_ms)


class HoldAfter:
    """Answers the first `n` requests by `script`, then holds every further one unanswered (a
    hang) until `release()`: a test's kill or Ctrl-C lands mid-run however slow the machine."""

    def __init__(self, n: int, script: Script | None = None) -> None:
        self.n, self.script, self.answered = n, script or always(), 0
        self._released = threading.Event()

    def release(self) -> None:
        self._released.set()

    def __call__(self, prompt: str, system: str | None, body: dict[str, Any]) -> Reply:
        if self.answered >= self.n and not self._released.is_set():
            return Reply(fault="hang")
        self.answered += 1
        return self.script(prompt, system, body)


class FirstWave:
    """Holds the first answers until `size` requests are in flight at once, then answers all
    (after `latency_s`): a concurrency bound seen reached however slowly a busy machine sends
    its requests, not "what arrived within 0.1 s". With `probe`, the first request (a run's
    backend check, which goes alone) is answered at once. `held`: how many the server held
    when it let them go (a client sending more at once shows more; one sending fewer waits
    here until its requests time out). Use as `with FirstWave(8) as server:`."""

    def __init__(self, size: int, *, probe: bool = False, script: Script | None = None,
                 latency_s: float = 0.05) -> None:
        self.size, self.probe, self.script = size, probe, script or always()
        self.held: int | None = None
        self.server = OpenAIServer(self, latency_s=latency_s)

    def __call__(self, prompt: str, system: str | None, body: dict[str, Any]) -> Reply:
        reply = self.script(prompt, system, body)
        if self.probe and self.server.requests == 1:
            return reply
        server = self.server

        def wave_whole() -> bool:
            if self.held is None and server.in_flight >= self.size:
                self.held = server.in_flight
            return self.held is not None

        reply.until = wave_whole
        return reply

    def __enter__(self) -> OpenAIServer:
        return self.server.start()

    def __exit__(self, *exc: object) -> None:
        self.server.stop()


class RandomRefusals:
    """Refuses each request with a set probability, drawn from (seed, prompt, n-th request of
    that prompt): the k-th answer to a prompt is the same in every run, whatever order the
    requests arrive in. `probability` may depend on the prompt. `asked` and `refused` count
    per prompt what the server did (the truth the tests check reports against)."""

    def __init__(self, probability: float | Callable[[str], float], seed: int = 0) -> None:
        self.probability = probability
        self.seed = seed
        self.asked: dict[str, int] = {}
        self.refused: dict[str, int] = {}

    def refuses(self, prompt: str, nth: int) -> bool:
        import hashlib

        chance = self.probability(prompt) if callable(self.probability) else self.probability
        digest = hashlib.sha256(f"{self.seed}\0{prompt}\0{nth}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2 ** 64 < chance

    def __call__(self, prompt: str, system: str | None, body: dict[str, Any]) -> Reply:
        nth = self.asked.get(prompt, 0)
        self.asked[prompt] = nth + 1
        refuse = self.refuses(prompt, nth)
        self.refused[prompt] = self.refused.get(prompt, 0) + refuse
        return Reply(text=REFUSAL_TEXT if refuse else ANSWER_TEXT)


class RefuseOnTrigger:
    """Refuses a prompt that holds one of `words` (a whole word, any case) or opens with one of
    `prefixes` (any case, after leading spaces); answers the rest. `asked` lists every prompt
    received, in order: the rewording benchmark and tests count requests with it."""

    def __init__(self, words: tuple[str, ...] = (), prefixes: tuple[str, ...] = ()) -> None:
        import re

        self.words = words
        self.prefixes = tuple(p.lower() for p in prefixes)
        self._word = (re.compile(r"\b(?:" + "|".join(re.escape(w) for w in words) + r")\b",
                                 re.IGNORECASE) if words else None)
        self.asked: list[str] = []

    def triggers(self, prompt: str) -> bool:
        if self._word is not None and self._word.search(prompt):
            return True
        return prompt.lstrip().lower().startswith(self.prefixes) if self.prefixes else False

    def __call__(self, prompt: str, system: str | None, body: dict[str, Any]) -> Reply:
        self.asked.append(prompt)
        return Reply(text=REFUSAL_TEXT if self.triggers(prompt) else ANSWER_TEXT)
