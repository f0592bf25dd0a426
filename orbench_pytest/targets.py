"""Targets: what answers the prompts.

`OpenAICompatibleTarget` is a thin chat-completions client over aiohttp (measured: several
times cheaper per request than the SDK's transport, which matters at 80K prompts). It turns
each HTTP exchange into a Response, a TransientFault (retry) or a ConfigFault (stop the run).
`CallableTarget` calls the user's own `module:function`.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Protocol

from .errors import ConfigError
from .redact import redact, redact_known
from .settings import parse_target_spec, validate_base_url
from .types import Response

# 400 codes that mean "the provider's filter blocked this prompt": a refusal, not an error.
CONTENT_FILTER_CODES = frozenset({"content_filter", "invalid_prompt", "content_policy_violation"})
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
# 400 codes about this one prompt, not the configuration: an error of the item, the run goes on.
PROMPT_ERROR_CODES = frozenset({"context_length_exceeded", "string_above_max_length"})


class TransientFault(Exception):
    """Worth another try: rate limit, 5xx, reset, timeout, truncated or garbled body."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


class ConfigFault(Exception):
    """The request itself is wrong (401, 403, 404, bad parameter): no retry, stop the run."""


@dataclass(frozen=True)
class GenerationParams:
    temperature: float = 0.0
    max_tokens: int | None = None
    seed: int | None = None
    timeout_s: float = 120.0

    def body_fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {"temperature": self.temperature}
        if self.max_tokens is not None:
            fields["max_tokens"] = self.max_tokens
        if self.seed is not None:
            fields["seed"] = self.seed
        return fields


class Target(Protocol):
    def identity(self) -> dict[str, Any]:
        """What the cache key needs to know about the target (never a secret)."""

    async def complete(self, system_prompt: str | None, prompt: str) -> Response: ...

    async def aclose(self) -> None: ...


class OpenAICompatibleTarget:
    def __init__(self, base_url: str, model: str, api_key: str | None, params: GenerationParams,
                 concurrency: int = 16) -> None:
        self.base_url = validate_base_url(base_url)
        self.model = model
        self.params = params
        self._api_key = api_key
        self._concurrency = concurrency
        self._session: Any = None  # aiohttp.ClientSession, made inside the running loop

    def identity(self) -> dict[str, Any]:
        return {"kind": "openai", "base_url": self.base_url, "model": self.model,
                **self.params.body_fields()}

    def _client(self) -> Any:
        if self._session is None:
            import aiohttp

            headers = {"Content-Type": "application/json"}
            if self._api_key:
                headers["Authorization"] = f"Bearer {self._api_key}"
            # One pooled client sized to the concurrency: no connection churn.
            connector = aiohttp.TCPConnector(limit=self._concurrency, limit_per_host=0,
                                             keepalive_timeout=30)
            timeout = aiohttp.ClientTimeout(total=self.params.timeout_s,
                                            sock_connect=min(10.0, self.params.timeout_s))
            self._session = aiohttp.ClientSession(headers=headers, connector=connector,
                                                  timeout=timeout, raise_for_status=False)
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def request_body(self, system_prompt: str | None, prompt: str) -> dict[str, Any]:
        messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
        messages.append({"role": "user", "content": prompt})
        return {"model": self.model, "messages": messages, **self.params.body_fields()}

    async def complete(self, system_prompt: str | None, prompt: str) -> Response:
        return await self.chat(self.request_body(system_prompt, prompt))

    async def chat(self, body: dict[str, Any]) -> Response:
        import aiohttp

        url = f"{self.base_url}/chat/completions"
        started = time.perf_counter()
        try:
            async with self._client().post(url, json=body) as resp:
                raw = await resp.read()
                status = resp.status
                headers = resp.headers
        except asyncio.TimeoutError:
            raise TransientFault(f"timed out after {self.params.timeout_s:g}s") from None
        except aiohttp.ClientPayloadError as exc:
            raise TransientFault(f"truncated body ({type(exc).__name__})") from None
        except aiohttp.ClientConnectorError as exc:
            raise TransientFault(f"cannot connect to {self.base_url} ({exc.os_error})") from None
        except aiohttp.ClientError as exc:
            raise TransientFault(f"connection error ({type(exc).__name__}: {exc})") from None
        latency_ms = (time.perf_counter() - started) * 1000
        return parse_chat_response(status, headers, raw, latency_ms, url)


def parse_chat_response(status: int, headers: Any, raw: bytes, latency_ms: float,
                        url: str) -> Response:
    """Map one HTTP exchange to a Response, or raise TransientFault / ConfigFault."""
    text = redact_known(raw.decode("utf-8", errors="replace"))
    payload: Any = None
    try:
        payload = json.loads(text)
    except ValueError:
        pass
    if status != 200:
        error = payload.get("error") if isinstance(payload, dict) else None
        code, message = _error_code_and_message(error)
        if status == 400 and _is_content_filter(error, code):
            return Response(text=None, finish_reason="content_filter", latency_ms=latency_ms,
                            content_filter=True, raw=redact(text))
        if status == 400 and code in PROMPT_ERROR_CODES:
            return Response(text=None, latency_ms=latency_ms,
                            error=redact(f"HTTP 400 {code}: {message or 'no message'}"))
        if status in RETRY_STATUSES or status >= 500:
            raise TransientFault(f"HTTP {status}{f' {message}' if message else ''}",
                                 retry_after_seconds(headers))
        detail = message or text[:200].strip() or "no body"
        raise ConfigFault(redact(f"{url} answered HTTP {status}: {detail}"))
    if not isinstance(payload, dict):
        raise TransientFault("malformed body: not JSON" if payload is None
                             else "malformed body: not a JSON object")
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise TransientFault("malformed body: no choices")
    choice = choices[0]
    message = choice.get("message") or {}
    finish = choice.get("finish_reason")
    content = message.get("content")
    refusal = message.get("refusal") or None
    usage = {k: v for k, v in (payload.get("usage") or {}).items() if isinstance(v, int)}
    reasoning = message.get("reasoning_content") or message.get("reasoning") or None
    backend = payload.get("system_fingerprint")
    backend = redact(backend[:200]) if isinstance(backend, str) and backend else None
    if finish == "content_filter":
        return Response(text=content or None, finish_reason=finish, latency_ms=latency_ms,
                        content_filter=True, usage=usage, raw=text, system_fingerprint=backend)
    if content is None and refusal is None and message.get("tool_calls"):
        return Response(text=None, finish_reason=finish, latency_ms=latency_ms,
                        error="malformed answer: tool calls instead of text", usage=usage,
                        raw=text)
    if content is None and refusal is None:
        content = ""  # null content is an empty answer: --orbench-empty decides what it counts as
    if not isinstance(content, (str, type(None))):
        raise TransientFault("malformed body: content is not text")
    return Response(text=content, finish_reason=finish, latency_ms=latency_ms, refusal=refusal,
                    reasoning=reasoning if isinstance(reasoning, str) else None,
                    usage=usage, raw=text, system_fingerprint=backend)


def _error_code_and_message(error: Any) -> tuple[str | None, str | None]:
    if isinstance(error, dict):
        code = error.get("code")
        message = error.get("message")
        return (str(code) if code is not None else None,
                str(message)[:200] if message is not None else None)
    if isinstance(error, str):
        return None, error[:200]
    return None, None


def _is_content_filter(error: Any, code: str | None) -> bool:
    if code in CONTENT_FILTER_CODES:
        return True
    inner = error.get("innererror") if isinstance(error, dict) else None
    return isinstance(inner, dict) and inner.get("code") == "ResponsibleAIPolicyViolation"


def retry_after_seconds(headers: Any) -> float | None:
    """`retry-after-ms`, then `Retry-After` (seconds or an HTTP date)."""
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


class CallableTarget:
    """`module:function(prompt, system_prompt)` → str or {"text", "finish_reason"}; may be async."""

    def __init__(self, spec: str) -> None:
        self.spec = spec
        self._fn = load_callable(spec)
        self._is_async = inspect.iscoroutinefunction(self._fn)

    def identity(self) -> dict[str, Any]:
        return {"kind": "callable", "spec": self.spec}

    async def aclose(self) -> None:
        return None

    async def complete(self, system_prompt: str | None, prompt: str) -> Response:
        started = time.perf_counter()
        try:
            if self._is_async:
                result = await self._fn(prompt, system_prompt)
            else:
                # A blocking function must not stall the other requests.
                result = await asyncio.to_thread(self._fn, prompt, system_prompt)
        except Exception as exc:  # the user's code failed: an error for this item, not a refusal
            error = redact(f"{self.spec} raised {type(exc).__name__}: {exc}")
            return Response(text=None, error=error,
                            latency_ms=(time.perf_counter() - started) * 1000)
        latency_ms = (time.perf_counter() - started) * 1000
        if isinstance(result, str):
            return Response(text=result, finish_reason="stop", latency_ms=latency_ms)
        if isinstance(result, dict) and isinstance(result.get("text", ""), (str, type(None))):
            finish = result.get("finish_reason")
            return Response(text=result.get("text"), finish_reason=finish, latency_ms=latency_ms,
                            content_filter=finish == "content_filter")
        return Response(text=None, latency_ms=latency_ms,
                        error=f"{self.spec} returned {type(result).__name__}, "
                              "expected str or {'text': ..., 'finish_reason': ...}")


def load_callable(spec: str) -> Callable[..., Any]:
    module_name, attr = parse_target_spec(spec)
    cwd = os.getcwd()
    if cwd not in sys.path:
        # As `python -m pytest` would: the user's module usually sits in the project folder.
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"--orbench-target: cannot import {module_name!r} ({exc})") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise ConfigError(f"--orbench-target: {module_name!r} has no callable {attr!r}")
    return fn
