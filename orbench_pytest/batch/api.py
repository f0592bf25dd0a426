"""The OpenAI Batch API over httpx: upload, create, look, download, and wait.

A handful of calls a run: plain synchronous requests, retried as the live fetch retries
(fetch/retry.py's policy, the run's --orbench-max-retries and --orbench-backoff). Any failure is
one ConfigError line naming the call, the endpoint's words shown harmless; answers are checked
(ids, statuses, counts), not trusted.

`wait` polls with an injected clock and sleep (tests pass fakes), reports progress through a
callback, and gives up after `max_wait_s` (then the batch keeps running; a rerun resumes it).
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from orbench_pytest.batch.format import CHAT_URL
from orbench_pytest.core import defaults
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.redact import shown_url
from orbench_pytest.core.untrusted import terminal_text
from orbench_pytest.fetch.endpoints import endpoint_url
from orbench_pytest.fetch.retry import GiveUp, RetryPolicy, RetrySettings, StopRun
from orbench_pytest.fetch.targets import (
    QUOTA_CODES,
    RETRY_STATUSES,
    FaultKind,
    TransientFault,
    error_code_and_message,
)
from orbench_pytest.fetch.wait_headers import wait_seconds

Clock = Callable[[], float]
Sleep = Callable[[float], None]

TERMINAL = frozenset({"completed", "expired", "failed", "cancelled"})
# batch_…, file-…: safe in a URL path (no "/", no leading dot) and in a line of output
_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]{0,199}")
_STATUS = re.compile(r"[a-z_]{1,40}")


@dataclass(frozen=True)
class BatchStatus:
    batch_id: str
    status: str  # validating, in_progress, finalizing, completed, expired, failed, ...
    total: int = 0
    completed: int = 0
    failed: int = 0
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: tuple[str, ...] = field(default_factory=tuple)

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL

    def describe(self) -> str:
        counts = f"{self.completed + self.failed}/{self.total} done" if self.total else "queued"
        failed = f", {self.failed} failed" if self.failed else ""
        return f"batch {self.batch_id}: {self.status} ({counts}{failed})"


class BatchClient:
    """One endpoint's Files and Batches APIs, for batches of chat completions (CHAT_URL);
    every failure becomes a one-line ConfigError."""

    def __init__(self, base_url: str, api_key: str | None,
                 timeout_s: float = defaults.TIMEOUT_S, *,
                 retry: RetrySettings | None = None, clock: Clock = time.monotonic,
                 sleep: Sleep = time.sleep) -> None:
        import httpx

        self.base_url = base_url
        self._timeout_s = timeout_s
        # Calls are seconds apart: no idle connection is kept, so the client needs no closing.
        # One client all the same: each new one would build its TLS context again (~0.1 s).
        self._http = httpx.Client(
            headers={"Authorization": f"Bearer {api_key}"} if api_key else {},
            timeout=timeout_s, limits=httpx.Limits(max_keepalive_connections=0))
        self._policy = RetryPolicy(retry or RetrySettings(), clock)
        self._sleep = sleep

    def submit(self, content: bytes, filename: str) -> str:
        what = "upload the batch input"
        uploaded = self._json(what, "POST", "files", data={"purpose": "batch"},
                              files={"file": (filename, content, "application/jsonl")})
        file_id = self._id(what, uploaded, "id")
        what = "create the batch"
        batch = self._json(what, "POST", "batches", json={
            "input_file_id": file_id, "endpoint": CHAT_URL, "completion_window": "24h"})
        return self._id(what, batch, "id")

    def status(self, batch_id: str) -> BatchStatus:
        what = f"look at batch {batch_id}"
        batch = self._json(what, "GET", f"batches/{batch_id}")
        status = batch.get("status")
        if not isinstance(status, str) or not _STATUS.fullmatch(status):
            raise self._error(what, "the answer has no status")
        counts = batch.get("request_counts")
        counts = counts if isinstance(counts, dict) else {}
        errors = batch.get("errors")
        data = errors.get("data") if isinstance(errors, dict) else None
        shown = [e for e in data if isinstance(e, dict)][:3] if isinstance(data, list) else []
        return BatchStatus(
            batch_id=self._id(what, batch, "id"), status=status, total=_count(counts, "total"),
            completed=_count(counts, "completed"), failed=_count(counts, "failed"),
            output_file_id=self._file_id(what, batch, "output_file_id"),
            error_file_id=self._file_id(what, batch, "error_file_id"),
            errors=tuple(terminal_text(f"{e.get('code') or ''}: {e.get('message') or ''}", 200)
                         for e in shown))

    def download(self, file_id: str) -> bytes:
        return bytes(self._send(f"download file {file_id}", "GET",
                                f"files/{file_id}/content").content)

    def _json(self, what: str, method: str, path: str, **request: Any) -> dict[str, Any]:
        try:
            body = json.loads(self._send(what, method, path, **request).content)
        except (ValueError, RecursionError):  # not JSON, a 5,000-digit number, deep nesting
            raise self._error(what, "the answer is not JSON") from None
        if not isinstance(body, dict):
            raise self._error(what, "the answer is not a JSON object")
        return body

    def _send(self, what: str, method: str, path: str, **request: Any) -> Any:
        """One call with its retries: the response of the first attempt answered 2xx."""
        import httpx

        attempt = timeouts = 0
        while True:
            try:
                response = self._http.request(method, endpoint_url(self.base_url, path),
                                              **request)
            except httpx.TimeoutException:
                fault = TransientFault(FaultKind.TIMEOUT, f"timed out after {self._timeout_s:g}s")
            except httpx.HTTPError as exc:  # refused, reset, DNS, a broken answer
                fault = TransientFault(FaultKind.CONNECTION, f"{type(exc).__name__}: {exc}")
            else:
                if response.is_success:
                    self._policy.succeeded()
                    return response
                fault = self._http_fault(what, response)
            timeouts += fault.kind is FaultKind.TIMEOUT
            decision = self._policy.after_fault(fault, attempt, timeouts)
            if isinstance(decision, StopRun):  # out of quota, told to wait for hours, …
                raise self._error(what, decision.reason)
            if isinstance(decision, GiveUp):
                raise self._error(what, fault.reason + (f" after {attempt + 1} attempts"
                                                        if attempt else ""))
            self._sleep(decision.wait_s)
            attempt += 1

    def _http_fault(self, what: str, response: Any) -> TransientFault:
        """A failed answer worth another try (429, 5xx, …); any other is a ConfigError now."""
        status = response.status_code
        code, message = _error_of(response.content)
        said = f"HTTP {status} {message or ''}".strip()
        if status == 429 and code in QUOTA_CODES:
            return TransientFault(FaultKind.QUOTA, said, None, status)
        if status in RETRY_STATUSES or status >= 500:
            kind = FaultKind.RATE_LIMIT if status == 429 else FaultKind.SERVER_ERROR
            return TransientFault(kind, said, wait_seconds(response.headers), status)
        raise self._error(what, said)

    def _id(self, what: str, body: dict[str, Any], name: str) -> str:
        value = body.get(name)
        if isinstance(value, str) and _ID.fullmatch(value):
            return value
        raise self._error(what, f"the answer has no usable {name}")

    def _file_id(self, what: str, body: dict[str, Any], name: str) -> str | None:
        return None if body.get(name) is None else self._id(what, body, name)

    def _error(self, what: str, reason: str) -> ConfigError:
        return ConfigError(terminal_text(f"Batch API at {shown_url(self.base_url)}: cannot {what}: "
                                         f"{reason}", 300))


def _error_of(content: bytes) -> tuple[str | None, str | None]:
    """The code and message of an OpenAI error body, if it is one."""
    try:
        error = json.loads(content).get("error")
    except (ValueError, RecursionError, AttributeError):  # not JSON, not an object
        return None, None
    return error_code_and_message(error) if isinstance(error, dict) else (None, None)


def _count(counts: dict[str, Any], name: str) -> int:
    value = counts.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def wait(client: BatchClient, batch_id: str, *, poll_s: float, max_wait_s: float | None,
         report: Callable[[BatchStatus], None], clock: Clock = time.monotonic,
         sleep: Sleep = time.sleep) -> BatchStatus:
    """Poll until the batch finishes or `max_wait_s` passes; the last status either way.
    `report` hears the first status and every change of status or of tenth done."""
    started = clock()
    shown: tuple[str, int] | None = None
    while True:
        status = client.status(batch_id)
        step = ((status.completed + status.failed) * 10 // status.total) if status.total else 0
        if (status.status, step) != shown:
            shown = (status.status, step)
            report(status)
        if status.finished:
            return status
        left = math.inf if max_wait_s is None else max_wait_s - (clock() - started)
        if left <= 0:
            return status
        sleep(min(poll_s, left))
