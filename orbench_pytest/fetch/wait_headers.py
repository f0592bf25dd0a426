"""The one parser of the waits an endpoint asks for: `retry-after-ms`, then `Retry-After`
(seconds or an HTTP date), as the OpenAI-compatible target and the Batch API client read them.

A header is untrusted text from a server or a proxy: every value gives a finite wait in
[0, WAIT_CEILING_S] or none. Negative is no wait, `inf`, `1e400` and a date in year 9999 are
the ceiling (the retry policy then ends the run: a wait past its cap), `nan`, words and
malformed dates are no header at all. The wall clock is injected for dates.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from email.utils import parsedate_to_datetime

# Longer than any wait a run accepts (the policy's cap is a minute), short enough that every
# figure computed from it stays a finite float and an int.
WAIT_CEILING_S = 1e9


def wait_seconds(headers: Mapping[str, str] | None, now: float | None = None,
                 clock: Callable[[], float] = time.time) -> float | None:
    """The wait `headers` ask for, in seconds; None when they ask for none they can state."""
    if headers is None:
        return None
    millis = _number(headers.get("retry-after-ms"))
    if millis is not None:
        return _bounded(millis / 1000)
    value = headers.get("retry-after")
    if not value:
        return None
    seconds = _number(value)
    if seconds is not None:
        return _bounded(seconds)
    try:
        when = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, OverflowError, IndexError):
        return None
    return _bounded(when - (clock() if now is None else now))


def _number(text: str | None) -> float | None:
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return None if math.isnan(value) else value


def _bounded(seconds: float) -> float:
    return min(max(seconds, 0.0), WAIT_CEILING_S)
