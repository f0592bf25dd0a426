"""The OpenAI Batch API through the `openai` SDK: upload, create, look, download, and wait.

`wait` polls with an injected clock and sleep (tests pass fakes), reports progress through a
callback, and gives up after `max_wait_s` (then the batch keeps running; a rerun resumes it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from orbench_pytest.core import defaults
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.untrusted import terminal_text

TERMINAL = frozenset({"completed", "expired", "failed", "cancelled"})


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
    """One endpoint's Files and Batches APIs (the chat-completions endpoint of
    batch_format.CHAT_URL); every SDK failure becomes a ConfigError."""

    def __init__(self, base_url: str, api_key: str | None,
                 timeout_s: float = defaults.TIMEOUT_S) -> None:
        import openai

        self.base_url = base_url
        # A local server needs no key, but the SDK insists on one.
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key or "unused",
                                     timeout=timeout_s,
                                     max_retries=defaults.BATCH_API_RETRIES)

    def submit(self, content: bytes, filename: str) -> str:
        uploaded = self._call("upload the batch input", lambda: self._client.files.create(
            file=(filename, content, "application/jsonl"), purpose="batch"))
        batch = self._call("create the batch", lambda: self._client.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"))
        return str(batch.id)

    def status(self, batch_id: str) -> BatchStatus:
        batch = self._call(f"look at batch {batch_id}",
                           lambda: self._client.batches.retrieve(batch_id))
        counts = batch.request_counts
        errors = getattr(batch.errors, "data", None) or []
        return BatchStatus(
            batch_id=str(batch.id), status=str(batch.status),
            total=int(getattr(counts, "total", 0) or 0),
            completed=int(getattr(counts, "completed", 0) or 0),
            failed=int(getattr(counts, "failed", 0) or 0),
            output_file_id=batch.output_file_id, error_file_id=batch.error_file_id,
            errors=tuple(terminal_text(f"{e.code or ''}: {e.message or ''}", 200)
                         for e in errors[:3]))

    def download(self, file_id: str) -> bytes:
        content = self._call(f"download file {file_id}",
                             lambda: self._client.files.content(file_id))
        return bytes(content.content)

    def _call(self, what: str, call: Callable[[], Any]) -> Any:
        import openai

        try:
            return call()
        except openai.APIStatusError as exc:
            message = _message(exc.body) or exc.message
            raise ConfigError(terminal_text(f"Batch API at {self.base_url}: cannot {what}: "
                                            f"HTTP {exc.status_code} {message}", 300)) from None
        except openai.APIError as exc:  # connection, timeout, malformed answer
            raise ConfigError(terminal_text(f"Batch API at {self.base_url}: cannot {what} "
                                            f"({type(exc).__name__}: {exc})", 300)) from None


def _message(body: Any) -> str | None:
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return str(message) if message else None


Clock = Callable[[], float]
Sleep = Callable[[float], None]


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
        if max_wait_s is not None:
            left = max_wait_s - (clock() - started)
            if left <= 0:
                return status
            sleep(min(poll_s, left))
        else:
            sleep(poll_s)
