"""Writing the response cache: answers and the judgments made of them, stored as they arrive
without holding up the fetch while another process holds the write lock.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from orbench_pytest.core.errors import OrbenchError
from orbench_pytest.core.types import Label, Response, Verdict
from orbench_pytest.fetch.cache_file import WRITE_ATTEMPT_S, QueryClock

_INSERT = ("INSERT OR REPLACE INTO responses (key, text, finish_reason, content_filter, "
           "refusal, reasoning, usage, latency_ms, raw, created, system_fingerprint) "
           "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
_INSERT_JUDGMENT = ("INSERT OR REPLACE INTO judgments (key, label, reason, confident, judge, "
                    "created) VALUES (?, ?, ?, ?, ?, ?)")


def _row(key: str, r: Response) -> tuple[Any, ...]:
    return (key, r.text, r.finish_reason, int(r.content_filter), r.refusal, r.reasoning,
            json.dumps(r.usage), r.latency_ms, r.raw, time.time(), r.system_fingerprint)


class CacheWriteError(OrbenchError):
    """An answer could not be stored (disk full, read-only file, locked too long)."""


class CacheWrites:
    """The writes of one open, writable cache (ResponseCache.put_many)."""

    def __init__(self, db: sqlite3.Connection, path: Path, *, lock_wait_s: float,
                 clock: Callable[[], float], query_clock: QueryClock) -> None:
        self.db = db
        self.path = path
        self.lock_wait_s = lock_wait_s
        self.clock = clock
        self.query_clock = query_clock
        # Written rows wait here while another process holds the write lock (see put_many).
        self._pending: list[tuple[Any, ...]] = []
        self._pending_verdicts: list[tuple[Any, ...]] = []
        self._locked_since: float | None = None
        self._busy_ms: int | None = None  # the busy timeout put_many last set

    @property
    def pending(self) -> int:
        """Rows kept for the next write while another process held the write lock."""
        return len(self._pending) + len(self._pending_verdicts)

    def put_many(self, items: Iterable[tuple[str, Response]],
                 judgments: Iterable[tuple[str, Verdict]] = (), *, wait: bool = True) -> None:
        """Store answers that arrived together, and the judgments made of them, in one
        transaction (one commit, not N). Judgments that are errors are never stored.

        `wait=False` (the fetch, on its event loop): one attempt blocks at most
        WRITE_ATTEMPT_S; while another process holds the write lock the rows wait here and go
        with the next write, so answers in flight are never held up (nor counted as timeouts)
        by a lock. Either way a lock held lock_wait_s in all raises CacheWriteError."""
        now = time.time()
        self._pending.extend(_row(key, r) for key, r in items if r.error is None)
        self._pending_verdicts.extend(
            (key, v.label.value, v.reason, int(v.confident), v.judge, now)
            for key, v in judgments if v.label is not Label.ERROR)
        if not (self._pending or self._pending_verdicts):
            return
        rows = self._pending
        # In key order: the inserts walk the key index once, not at random (a quarter less CPU
        # for a write of 16K verdicts)
        verdicts = sorted(self._pending_verdicts)
        started = self.clock()
        waited = 0.0 if self._locked_since is None else started - self._locked_since
        left = max(self.lock_wait_s - waited, 0.0)
        busy_ms = int(1000 * (left if wait else min(left, WRITE_ATTEMPT_S)))
        try:
            if busy_ms != self._busy_ms:  # a pragma costs as much as the BEGIN: only on change
                self.db.execute(f"PRAGMA busy_timeout = {busy_ms}")
                self._busy_ms = busy_ms
            # IMMEDIATE: take the write lock up front, so a second writer waits (busy
            # timeout) instead of failing on a lock upgrade.
            self.db.execute("BEGIN IMMEDIATE")
            try:
                self.query_clock.start()
                if rows:
                    self.db.executemany(_INSERT, rows)
                if verdicts:
                    self.db.executemany(_INSERT_JUDGMENT, verdicts)
                self.db.execute("COMMIT")
            except BaseException:
                if self.db.in_transaction:
                    self.db.execute("ROLLBACK")
                raise
        except (sqlite3.Error, OSError) as exc:
            self.query_clock.check(exc)
            locked = isinstance(exc, sqlite3.OperationalError) and (
                "locked" in str(exc) or "busy" in str(exc))
            if locked:
                if self._locked_since is None:
                    self._locked_since = started
                if not wait and self.clock() - self._locked_since < self.lock_wait_s:
                    return  # kept; written with the next attempt
                exc = sqlite3.OperationalError(
                    f"locked by another process for {self.lock_wait_s:g} s")
            self._pending, self._pending_verdicts = [], []
            lost = [f"{n} {what}(s)" for n, what in ((len(rows), "answer"),
                                                      (len(verdicts), "judgment")) if n]
            raise CacheWriteError(f"{self.path}: cannot write the response cache ({exc}); "
                                  f"{' and '.join(lost)} not stored") from None
        self._pending, self._pending_verdicts = [], []
        self._locked_since = None
