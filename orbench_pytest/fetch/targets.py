"""Targets: what answers the prompts.

`OpenAICompatibleTarget` is a thin chat-completions client over aiohttp (measured: several
times cheaper per request than the SDK's transport, which matters at 80K prompts). It turns
each HTTP exchange into a Response, a TransientFault (retry) or a ConfigFault (stop the run).
`CallableTarget` calls the user's own `module:function`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import inspect
import json
import os
import queue
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol
from urllib.parse import urlparse

from orbench_pytest.core import defaults
from orbench_pytest.core.bounded import BodyTooLarge, clip_answer, clip_raw, read_body
from orbench_pytest.core.conversation import chat_messages
from orbench_pytest.core.errors import ConfigError, OrbenchError
from orbench_pytest.core.redact import redact, redact_known, shown_url
from orbench_pytest.core.types import History, Response
from orbench_pytest.core.untrusted import terminal_text
from orbench_pytest.fetch.endpoints import (
    endpoint_url,
    is_loopback,
    parse_target_spec,
    validate_base_url,
)
from orbench_pytest.fetch.wait_headers import wait_seconds

# 400 codes that mean "the provider's filter blocked this prompt": a refusal, not an error.
CONTENT_FILTER_CODES = frozenset({"content_filter", "invalid_prompt", "content_policy_violation"})
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
# 400 codes about this one prompt, not the configuration: an error of the item, the run goes on.
PROMPT_ERROR_CODES = frozenset({"context_length_exceeded", "string_above_max_length"})


# 429 codes that no wait will cure: the account is out of credit.
QUOTA_CODES = frozenset({"insufficient_quota", "billing_hard_limit_reached", "quota_exceeded",
                         "billing_not_active"})


class FaultKind(str, Enum):
    """What went wrong with one request; the retry policy decides by kind, never by message."""

    RATE_LIMIT = "rate_limit"  # 429: slow down, try again
    QUOTA = "quota"  # 429 insufficient_quota & co: permanent, ends the run
    SERVER_ERROR = "server_error"  # 5xx, 408, 409
    TIMEOUT = "timeout"
    CONNECTION = "connection"  # refused, reset, DNS
    TRUNCATED = "truncated"  # the body was cut short
    MALFORMED = "malformed"  # not JSON, no choices, content not text
    CONFIG = "config"  # 401, 403, 404, bad parameter: the request itself is wrong


class TransientFault(OrbenchError):
    """Worth another try (by the policy's leave): rate limit, 5xx, reset, timeout, bad body."""

    def __init__(self, kind: FaultKind, reason: str, retry_after: float | None = None,
                 status: int | None = None) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason
        self.retry_after = retry_after
        self.status = status

    @property
    def tally(self) -> str:
        """The label counted in the run's 'failed attempts' line ("HTTP 503", "timeout")."""
        return f"HTTP {self.status}" if self.status is not None else self.kind.value


class ConfigFault(OrbenchError):
    """The request itself is wrong (401, 403, 404, bad parameter): no retry, stop the run."""

    kind = FaultKind.CONFIG


@dataclass(frozen=True)
class GenerationParams:
    """The generation parameters sent with every prompt (part of the cache key)."""

    temperature: float = defaults.TEMPERATURE
    max_tokens: int | None = None
    seed: int | None = None
    timeout_s: float = defaults.TIMEOUT_S

    def body_fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {"temperature": self.temperature}
        if self.max_tokens is not None:
            fields["max_tokens"] = self.max_tokens
        if self.seed is not None:
            fields["seed"] = self.seed
        return fields


# --- which model, where: one identity for the plugin, the Batch API and orbench generate ---------

def served_url(base_url: str | None) -> str:
    """A served model's endpoint: the one given, else $OPENAI_BASE_URL, else OpenAI's."""
    return base_url or os.environ.get("OPENAI_BASE_URL") or defaults.OPENAI_URL


def model_identity(model: str, base_url: str | None,
                   params: GenerationParams) -> dict[str, Any]:
    """What the cache key knows of a model (`base_url` None: the embedded one, pinned by
    sha256 in local_model, so its name identifies it); computable without starting anything.
    The endpoint as shown_url gives it: no password in the key, the same key when only the
    credentials change, and a URL without userinfo or query keys as it always did."""
    body = {"temperature": params.temperature, "max_tokens": params.max_tokens,
            "seed": params.seed}
    if base_url is None:
        return {"kind": "local", "model": model, **body}
    return {"kind": "openai", "base_url": shown_url(base_url), "model": model, **body}


def check_key(url: str, api_key_env: str, *, whose: str = "the API key",
              hint: str = "--orbench-api-key-env", asker: str = "") -> None:
    """Before any request: a non-loopback endpoint needs its key in the environment.
    `asker` names who asks it, for a tool that asks several models."""
    if is_loopback(url) or os.environ.get(api_key_env):
        return
    of = f" ({asker})" if asker else ""
    raise ConfigError(f"{api_key_env} is not set: export {whose} for {shown_url(url)}{of} "
                      f"(or name another variable with {hint})")


def local_concurrency(wanted: int, slots: int = defaults.LOCAL_SLOTS) -> int:
    """The embedded model's requests in flight: no more than its slots (a request queued in
    the server would spend its timeout waiting, time out and be sent again)."""
    return min(wanted, slots)


class Target(Protocol):
    async def complete(self, system_prompt: str | None, prompt: str,
                       history: History = ()) -> Response: ...

    async def aclose(self) -> None: ...


class OpenAICompatibleTarget:
    def __init__(self, base_url: str, model: str, api_key: str | None, params: GenerationParams,
                 concurrency: int) -> None:
        self.base_url = validate_base_url(base_url)
        if api_key and urlparse(self.base_url).username is not None:
            # aiohttp cannot send both; say so rather than fail inside the first request.
            raise ConfigError(f"base URL {shown_url(self.base_url)[:100]!r} carries "
                              "user:password@ and an API key is set too: give one of them")
        self.model = model
        self.params = params
        self._chat_url = endpoint_url(self.base_url, "chat/completions")
        self._shown_chat_url = shown_url(self._chat_url)
        self._api_key = api_key
        self._concurrency = concurrency
        self._session: Any = None  # aiohttp.ClientSession, made inside the running loop

    def _client(self) -> Any:
        if self._session is None:
            import aiohttp

            # No Content-Type: `json=` sets it, and session headers are merged per request.
            headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else None
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

    def request_body(self, system_prompt: str | None, prompt: str,
                     history: History = ()) -> dict[str, Any]:
        return chat_request_body(self.model, self.params, system_prompt, prompt, history)

    async def complete(self, system_prompt: str | None, prompt: str,
                       history: History = ()) -> Response:
        return await self.chat(self.request_body(system_prompt, prompt, history))

    async def chat(self, body: dict[str, Any]) -> Response:
        import aiohttp

        started = time.perf_counter()
        try:
            async with self._client().post(self._chat_url, json=body) as resp:
                status = resp.status
                headers = resp.headers
                raw = await read_body(resp.content)
        except BodyTooLarge as exc:  # the same reply again would be as large: no retry
            return Response(text=None, error=str(exc),
                            latency_ms=(time.perf_counter() - started) * 1000)
        except asyncio.TimeoutError:
            raise TransientFault(FaultKind.TIMEOUT,
                                 f"timed out after {self.params.timeout_s:g}s") from None
        except aiohttp.ClientPayloadError as exc:
            raise TransientFault(FaultKind.TRUNCATED,
                                 f"truncated body ({type(exc).__name__})") from None
        except aiohttp.ClientConnectorError as exc:
            raise TransientFault(FaultKind.CONNECTION,
                                 f"cannot connect to {shown_url(self.base_url)} "
                                 f"({exc.os_error})") from None
        except aiohttp.ClientError as exc:
            raise TransientFault(FaultKind.CONNECTION,
                                 f"connection error ({type(exc).__name__}: {exc})") from None
        latency_ms = (time.perf_counter() - started) * 1000
        return parse_chat_response(status, headers, raw, latency_ms, self._shown_chat_url)


def chat_request_body(model: str, params: GenerationParams, system_prompt: str | None,
                      prompt: str, history: History = ()) -> dict[str, Any]:
    """The chat-completions body of one prompt after its history: what the live client sends,
    and what a Batch API input line carries."""
    return {"model": model, "messages": chat_messages(system_prompt, prompt, history),
            **params.body_fields()}


def parse_chat_response(status: int, headers: Any, raw: bytes, latency_ms: float,
                        url: str) -> Response:
    """Map one HTTP exchange to a Response, or raise TransientFault / ConfigFault."""
    text = redact_known(raw.decode("utf-8", errors="replace"))
    payload: Any = None
    try:
        payload = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, a 5,000-digit number, deep nesting
        pass
    if status != 200:
        error = payload.get("error") if isinstance(payload, dict) else None
        code, message = error_code_and_message(error)
        if status == 400 and _is_content_filter(error, code):
            return Response(text=None, finish_reason="content_filter", latency_ms=latency_ms,
                            content_filter=True, raw=clip_raw(redact(text)))
        if status == 400 and code in PROMPT_ERROR_CODES:
            return Response(text=None, latency_ms=latency_ms,
                            error=redact(f"HTTP 400 {code}: {message or 'no message'}"))
        if status == 429 and code in QUOTA_CODES:
            raise TransientFault(FaultKind.QUOTA, redact(
                f"HTTP 429 {code}: {message or 'quota exhausted'}"), None, status)
        if status in RETRY_STATUSES or status >= 500:
            kind = FaultKind.RATE_LIMIT if status == 429 else FaultKind.SERVER_ERROR
            raise TransientFault(kind, f"HTTP {status}{f' {message}' if message else ''}",
                                 wait_seconds(headers), status)
        detail = message or text[:200].strip() or "no body"
        raise ConfigFault(redact(f"{url} answered HTTP {status}: {detail}"))
    if not isinstance(payload, dict):
        raise TransientFault(FaultKind.MALFORMED, "malformed body: not JSON" if payload is None
                             else "malformed body: not a JSON object")
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise TransientFault(FaultKind.MALFORMED, "malformed body: no choices")
    choice = choices[0]
    reply = choice.get("message") or {}
    if not isinstance(reply, dict):
        raise TransientFault(FaultKind.MALFORMED, "malformed body: message is not an object")
    finish = choice.get("finish_reason")
    finish = finish if isinstance(finish, str) else None
    content = reply.get("content")
    refusal = reply.get("refusal") or None
    if not isinstance(refusal, (str, type(None))):
        raise TransientFault(FaultKind.MALFORMED, "malformed body: refusal is not text")
    raw_usage = payload.get("usage")
    usage = ({k: v for k, v in raw_usage.items() if isinstance(v, int)}
             if isinstance(raw_usage, dict) else {})
    reasoning = reply.get("reasoning_content") or reply.get("reasoning") or None
    backend = payload.get("system_fingerprint")
    backend = redact(backend[:200]) if isinstance(backend, str) and backend else None
    text = clip_raw(text) or ""
    if finish == "content_filter":
        return Response(text=clip_answer(content if isinstance(content, str) else None) or None,
                        finish_reason=finish, latency_ms=latency_ms, content_filter=True,
                        usage=usage, raw=text, system_fingerprint=backend)
    if content is None and refusal is None and reply.get("tool_calls"):
        return Response(text=None, finish_reason=finish, latency_ms=latency_ms,
                        error="malformed answer: tool calls instead of text", usage=usage,
                        raw=text)
    if content is None and refusal is None:
        content = ""  # null content is an empty answer: --orbench-empty decides what it counts as
    if not isinstance(content, (str, type(None))):
        raise TransientFault(FaultKind.MALFORMED, "malformed body: content is not text")
    return Response(text=clip_answer(content), finish_reason=finish, latency_ms=latency_ms,
                    refusal=clip_answer(refusal),
                    reasoning=clip_answer(reasoning) if isinstance(reasoning, str) else None,
                    usage=usage, raw=text, system_fingerprint=backend)


def error_code_and_message(error: Any) -> tuple[str | None, str | None]:
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


CANCEL_GRACE_S = 1.0  # an async target cancelled at its timeout gets this long to stop


class CallableTarget:
    """`module:function(prompt, system_prompt)` → str or {"text", "finish_reason"}; may be async.
    A function with a `messages` parameter is also given the whole conversation as a chat API
    gets it (`messages=[{"role", "content"}, ...]`, the prompt its last turn); one without it
    cannot be asked a conversation (a ConfigFault: the run stops, naming the fix).

    Bounded like an endpoint: each call gets `timeout_s`. A sync function runs on a daemon
    thread, so a call that hangs is abandoned at its timeout (the item an error) and neither
    Ctrl-C nor the interpreter's exit waits for it. An async function runs on its own event
    loop, on a daemon thread, for the same reason: one that swallows its cancellation (a bare
    retry loop) is abandoned CANCEL_GRACE_S after its timeout, and the run still ends.

    Whatever the function does (raise SystemExit, BaseException or CancelledError, raise an
    exception whose message cannot be printed, return a str subclass that fails) is an error
    of that item, its message redacted; never the end of the run.
    """

    def __init__(self, spec: str, timeout_s: float = defaults.TIMEOUT_S) -> None:
        self.spec = spec
        self.timeout_s = timeout_s
        self._fn = load_callable(spec)
        self._is_async = inspect.iscoroutinefunction(self._fn)
        self._takes_messages = takes_messages(self._fn)
        self._threads = _DaemonThreads()
        self._loop_thread = _LoopThread()

    async def aclose(self) -> None:
        self._threads.close()
        self._loop_thread.close()

    async def complete(self, system_prompt: str | None, prompt: str,
                       history: History = ()) -> Response:
        started = time.perf_counter()
        if history and not self._takes_messages:
            raise ConfigFault(f"--orbench-target: {self.spec} takes no `messages` parameter, "
                              "so it cannot be asked a conversation (a suite row's messages or "
                              "--orbench-preamble); add `messages=None` to its parameters")
        args: tuple[Any, ...] = (prompt, system_prompt)
        kwargs = ({"messages": chat_messages(system_prompt, prompt, history)}
                  if self._takes_messages else {})

        def failed(error: str) -> Response:
            return Response(text=None, error=error,
                            latency_ms=(time.perf_counter() - started) * 1000)

        ended: threading.Event | None = None
        try:
            if self._is_async:
                call, ended = self._loop_thread.run(self._fn(*args, **kwargs))
            else:
                # A blocking function must not stall the other requests.
                call = self._threads.run(functools.partial(self._fn, *args, **kwargs))
        except Exception as exc:  # e.g. the call itself raised before any await
            return failed(raised(self.spec, exc))
        # Our own cancellation (the run stops) arrives here, never in call.result() below.
        done, _ = await asyncio.wait({call}, timeout=self.timeout_s)
        if not done:
            call.cancel()
            abandoned = ""
            if ended is not None and not await _wait_event(ended, CANCEL_GRACE_S):
                abandoned = (f"; it ignored its cancellation and was abandoned after "
                             f"{CANCEL_GRACE_S:g}s more")
            raise TransientFault(FaultKind.TIMEOUT, f"{self.spec} did not return within "
                                 f"{self.timeout_s:g}s (--orbench-timeout){abandoned}")
        try:
            result = call.result()
        except BaseException as exc:  # SystemExit, CancelledError... of the app
            return failed(raised(self.spec, exc))
        if isinstance(result, _Raised):
            return failed(raised(self.spec, result.exc))
        try:
            return _app_response(self.spec, result, (time.perf_counter() - started) * 1000)
        except Exception as exc:  # a str or dict subclass whose methods raise
            return failed(raised(self.spec + " returned a value that", exc, verb="raised"))


async def _wait_event(event: threading.Event, timeout_s: float) -> bool:
    """Whether `event` (set on another thread) is set within `timeout_s`, not blocking."""
    deadline = time.monotonic() + timeout_s
    while not event.is_set() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return event.is_set()


def _app_response(spec: str, result: Any, latency_ms: float) -> Response:
    if isinstance(result, str):
        return Response(text=_app_text(_plain(result)), finish_reason="stop",
                        latency_ms=latency_ms)
    if isinstance(result, dict):
        text, finish = dict.get(result, "text"), dict.get(result, "finish_reason")
        if text is None or isinstance(text, str):
            finish = _plain(finish) if isinstance(finish, str) else None
            return Response(text=_app_text(None if text is None else _plain(text)),
                            finish_reason=finish, latency_ms=latency_ms,
                            content_filter=finish == "content_filter")
    return Response(text=None, latency_ms=latency_ms,
                    error=f"{spec} returned {_type_name(result)}, "
                          "expected str or {'text': ..., 'finish_reason': ...}")


def _plain(text: str) -> str:
    """An exact str: a subclass's own __len__, __str__ or __iter__ are never called."""
    return str.__getitem__(text, slice(None))


def _type_name(value: Any) -> str:
    name = getattr(type(value), "__name__", None)
    return _plain(name) if isinstance(name, str) else "an object"


def raised(spec: str, exc: BaseException, verb: str = "raised") -> str:
    """`spec raised Type: message`, one bounded redacted line, even when the exception's
    __str__ raises or returns something other than a string."""
    try:
        message = str(exc)
        message = _plain(message) if isinstance(message, str) else ""
    except BaseException:  # its __str__ is the app's code too
        message = "(its message could not be read)"
    return terminal_text(f"{spec} {verb} {_type_name(exc)}: {message}".rstrip(": "), 500)


def _app_text(text: str | None) -> str | None:
    """The app's answer as stored and shown: no configured key (an app may echo one), and
    bounded like an endpoint's."""
    return None if text is None else clip_answer(redact_known(text))


class _DaemonThreads:
    """A pool of daemon threads that grows when all are busy (e.g. stuck in a hung call):
    unlike asyncio.to_thread's executor, nothing joins them at exit."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._idle = 0
        self._lock = threading.Lock()

    def run(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        with self._lock:
            spawn = self._idle == 0
            if not spawn:
                self._idle -= 1
        self._jobs.put((loop, future, fn, args))
        if spawn:
            threading.Thread(target=self._work, name="orbench-target", daemon=True).start()
        return future

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, 0
        for _ in range(idle):
            self._jobs.put(None)

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            loop, future, fn, args = job
            try:
                outcome, failed = fn(*args), False
            except BaseException as exc:  # handed to the awaiting coroutine
                outcome, failed = exc, True
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits
                loop.call_soon_threadsafe(_settle, future, outcome, failed)
            with self._lock:
                self._idle += 1


class _LoopThread:
    """One event loop on a daemon thread for an async target's calls: a call is cancelled at
    its timeout there, and one that will not stop is left running there, while the run's own
    loop (which asyncio.run would make wait for it at its end) goes on and ends."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def run(self, coroutine: Any) -> tuple[asyncio.Future[Any], threading.Event]:
        """The call's future, and an event set once its coroutine has really ended."""
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._loop.set_exception_handler(_quiet_when_abandoned)
                threading.Thread(target=_run_until_stopped, args=(self._loop,),
                                 name="orbench-async-target", daemon=True).start()
            loop = self._loop
        ended = threading.Event()
        future = asyncio.run_coroutine_threadsafe(_guarded(coroutine, ended), loop)
        return asyncio.wrap_future(future), ended

    def close(self) -> None:
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is not None:  # abandoned calls, if any, stop with the daemon thread
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(loop.stop)


def _run_until_stopped(loop: asyncio.AbstractEventLoop) -> None:
    """The loop thread's life: closed once stopped, or the user's process is left with an
    unclosed event loop (a ResourceWarning at its next garbage collection)."""
    try:
        loop.run_forever()
    finally:
        loop.close()


def _quiet_when_abandoned(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """A call that ignored its cancellation was abandoned (its item's error says so) and is
    destroyed still pending when the process ends: asyncio's "Task was destroyed but it is
    pending!" (two lines a call) would only repeat that after the run's last line. Anything
    else goes to asyncio's own handler."""
    if str(context.get("message", "")).startswith("Task was destroyed but it is pending"):
        return
    loop.default_exception_handler(context)


async def _guarded(coroutine: Any, ended: threading.Event) -> Any:
    """The call's result, or what it raised as a value: a SystemExit or KeyboardInterrupt
    leaving a task would stop the target's loop (and every later call). Its own
    CancelledError stays one (the future is then cancelled)."""
    try:
        return await coroutine
    except asyncio.CancelledError:
        raise
    except BaseException as exc:  # the app's: handed over as an outcome
        return _Raised(exc)
    finally:
        ended.set()


@dataclass(frozen=True)
class _Raised:
    """What an async callable target raised, handed over as a value (not raised)."""

    exc: BaseException


def _settle(future: asyncio.Future[Any], outcome: Any, failed: bool) -> None:
    if future.done():  # timed out or cancelled meanwhile
        return
    if failed:
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


def takes_messages(fn: Callable[..., Any]) -> bool:
    """Whether a target function names a `messages` parameter (the conversation form)."""
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # a builtin or a C function without a signature
        return False
    found = parameters.get("messages")
    return found is not None and found.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                inspect.Parameter.KEYWORD_ONLY)


def load_callable(spec: str) -> Callable[..., Any]:
    module_name, attr = parse_target_spec(spec)
    cwd = os.getcwd()
    if cwd not in sys.path:
        # As `python -m pytest` would: the user's module usually sits in the project folder.
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except SystemExit as exc:
        raise ConfigError(f"--orbench-target: importing {module_name!r} called sys.exit"
                          f"({exc.code!r})") from None
    except SyntaxError as exc:
        where = f"{os.path.basename(exc.filename or '?')}, line {exc.lineno}"
        raise ConfigError(f"--orbench-target: {module_name!r} has a syntax error "
                          f"({where}: {exc.msg})") from None
    except ImportError as exc:
        raise ConfigError(f"--orbench-target: cannot import {module_name!r} ({exc})") from None
    except Exception as exc:  # the module's own code raised while importing
        detail = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
        raise ConfigError(f"--orbench-target: importing {module_name!r} raised "
                          f"{redact(detail)}") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise ConfigError(f"--orbench-target: {module_name!r} has no callable {attr!r}")
    return fn  # type: ignore[no-any-return]
