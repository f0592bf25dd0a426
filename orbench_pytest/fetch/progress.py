"""Progress of the fetch phase: one rewritten line on a terminal, sparse lines in CI logs."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any

ETA_AFTER_S = 2.0  # no estimate before: the first answers say little of the rate
ETA_WINDOW_S = 30.0  # the rate of the last half minute (answers from the cache come first, fast)


class ProgressLine:
    """Callable as fetcher.Progress. `write(text, rewrite)` does the printing."""

    def __init__(self, write: Callable[[str, bool], None], is_tty: bool,
                 log_every_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic,
                 noun: str = "prompts answered", eta: str = "ETA") -> None:
        self._write = write
        self._noun = noun  # what is counted: "prompts answered", "rewordings asked"
        self._eta = eta  # "ETA at most" where the total is a bound, not a plan
        self._clock = clock
        self._tty = is_tty
        self._every = log_every_s
        self._started = clock()
        self._recent: deque[tuple[float, int]] = deque([(self._started, 0)])
        self._last = 0.0
        self._last_decile = -1
        self._concurrency: int | None = None

    @classmethod
    def for_reporter(cls, reporter: Any, **kwargs: Any) -> ProgressLine | None:
        """On pytest's terminal reporter; none without one, nor with -q in a CI log.
        `kwargs`: the constructor's (log_every_s, noun, eta)."""
        if reporter is None:
            return None
        tty = bool(getattr(reporter, "isatty", False))
        if reporter.config.option.verbose < 0 and not tty:
            return None

        def write(text: str, rewrite: bool) -> None:
            if rewrite:
                reporter.rewrite(text, erase=True)
            else:
                reporter.write_line(text)

        return cls(write, tty, **kwargs)

    def end(self) -> None:
        """Ends a line rewritten in place (the next output starts on a line of its own)."""
        if self._tty:
            self._write("", False)

    @property
    def rewrites(self) -> bool:
        """True when the line is rewritten in place: the caller ends it."""
        return self._tty

    def __call__(self, done: int, total: int, errors: int,
                 concurrency: int | None = None) -> None:
        """`concurrency`: the fetch engine's concurrency limit now (it adapts to the endpoint)."""
        self._concurrency = concurrency
        now = self._clock()
        self._recent.append((now, done))
        while len(self._recent) > 2 and now - self._recent[1][0] >= ETA_WINDOW_S:
            self._recent.popleft()
        final = done == total
        if self._tty:
            if final or now - self._last >= 0.1:
                self._last = now
                self._write(self.text(done, total, errors, now), True)
            return
        # Not a terminal: a line per 10% or every few seconds, never carriage returns.
        decile = done * 10 // max(total, 1)
        if final or decile > self._last_decile or now - self._last >= self._every:
            self._last_decile = decile
            self._last = now
            self._write(self.text(done, total, errors, now), False)

    def text(self, done: int, total: int, errors: int, now: float) -> str:
        elapsed = max(now - self._started, 1e-9)
        rate = done / elapsed
        concurrency = ("" if self._concurrency is None
                       else f"concurrency {self._concurrency}, ")
        eta = self.eta_s(done, total, now)
        left = "" if eta is None else f", {self._eta} {format_duration(eta)}"
        return (f"orbench: {done}/{total} {self._noun}, {rate:.1f}/s, "
                f"{errors} errors, {concurrency}{elapsed:.1f}s{left}")

    def eta_s(self, done: int, total: int, now: float) -> float | None:
        """Seconds left at the rate of the last ETA_WINDOW_S; None until it can be told."""
        if done >= total or now - self._started < ETA_AFTER_S:
            return None
        since, then = self._recent[0]
        if done <= then or now <= since:
            return None
        return (total - done) * (now - since) / (done - then)


def format_duration(seconds: float) -> str:
    """42s, 3m05s, 1h02m."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
