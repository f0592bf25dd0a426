"""A hostile OpenAI-compatible endpoint: a raw asyncio socket server that sends whatever bytes
its script returns, status line and headers included (no HTTP library tidies them up).

`script(prompt) -> bytes` is the whole reply to one chat-completions request; helpers below
build the usual hostile shapes: bodies of the wrong types, control characters and CI log
commands in answers and errors, gzip bombs, huge answers, deeply nested or huge-number JSON.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import threading
from collections.abc import Callable
from typing import Any

from tests.timeouts import THREAD_TIMEOUT_S

Script = Callable[[str], bytes]


def http(status: int, body: bytes, headers: dict[str, str] | None = None) -> bytes:
    head = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}",
            "Content-Type: application/json", "Connection: close"]
    head += [f"{name}: {value}" for name, value in (headers or {}).items()]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def completion(message: Any = None, *, usage: Any = None, finish: Any = "stop",
               text: str | None = None) -> bytes:
    """A 200 chat completion; `message` replaces the message object when given."""
    if message is None:
        message = {"role": "assistant", "content": text}
    payload: dict[str, Any] = {"id": "x", "object": "chat.completion",
                               "choices": [{"index": 0, "message": message,
                                            "finish_reason": finish}]}
    if usage is not None:
        payload["usage"] = usage
    return http(200, json.dumps(payload).encode())


def answer(text: str) -> bytes:
    return completion(text=text)


def error(status: int, message: str) -> bytes:
    body = json.dumps({"error": {"message": message, "type": "x", "code": None}}).encode()
    return http(status, body)


def gzip_bomb(decompressed_mib: int = 50) -> bytes:
    """A small gzip body that inflates to `decompressed_mib` MiB of a JSON string."""
    inner = b'{"choices": [{"message": {"content": "' + b"A" * (decompressed_mib << 20) + b'"}}]}'
    body = gzip.compress(inner, compresslevel=9)
    return http(200, body, {"Content-Encoding": "gzip"})


def deep_json(depth: int = 100_000) -> bytes:
    return http(200, b"[" * depth + b"]" * depth)


def huge_number() -> bytes:
    return http(200, b'{"choices": [{"message": {"content": "hi"}}], "usage": {"n": '
                + b"9" * 5000 + b"}}")


class HostileServer:
    """Runs in a thread with its own event loop; counts requests."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests = 0
        self.prompts: list[str] = []
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.base_events.Server | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> HostileServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=THREAD_TIMEOUT_S)
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            if self._server is not None:
                self._server.close()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(timeout=THREAD_TIMEOUT_S)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=THREAD_TIMEOUT_S)

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.decode("latin-1").split("\r\n"):
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            body = await reader.readexactly(length)
            self.requests += 1
            try:
                prompt = json.loads(body)["messages"][-1]["content"]
            except (ValueError, KeyError, IndexError, TypeError):
                prompt = ""
            self.prompts.append(prompt)
            writer.write(self.script(prompt))
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()
