"""When a cached answer may stand in for the candidate: its age, and the provider's
`system_fingerprint`.

Age: an answer older than `--orbench-cache-max-age` (default: `defaults.MAX_AGE`) is asked again.

system_fingerprint: providers that return one change it when their backend changes. Each
answer is stored with the fingerprint it came with. A run whose cached answers carry one asks
the endpoint once (the oldest of those answers) before using the rest: when the fresh answer
shows a fingerprint that none of the cached answers carries, the cached answers with another
(or no) fingerprint are stale and asked again. A fingerprint already seen among them is not a
change: providers serve several backends at once. Answers stored without a fingerprint are
judged by their age alone.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from orbench_pytest.core import defaults
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.types import Response

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_AGE = re.compile(r"^(\d+(?:\.\d+)?)([smhdw])$")


def parse_max_age(raw: str | None, option: str = "--orbench-cache-max-age") -> float | None:
    """Seconds; None means no limit. '0' never reuses an answer."""
    text = (defaults.MAX_AGE if raw is None else str(raw)).strip().lower()
    if text in ("none", "inf"):
        return None
    if text == "0":
        return 0.0
    match = _AGE.match(text)
    if match is None:
        raise ConfigError(f"{option}: {raw!r} is not an age (e.g. 30d, 12h, 90m, 45s, 2w; "
                          "0 = never reuse an answer, none = no limit)")
    return float(match.group(1)) * _UNITS[match.group(2)]



def format_age(seconds: float | None) -> str:
    """A short age for people: '45s', '12m', '5h 3m', '3d 4h'; 'no limit' for None."""
    if seconds is None or math.isinf(seconds):
        return "no limit"
    whole = int(max(0.0, seconds))
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h" if hours else f"{days}d"
    if hours:
        return f"{hours}h {minutes}m" if minutes else f"{hours}h"
    if minutes:
        return f"{minutes}m"
    return f"{secs}s"


def within_age(found: Mapping[str, Response], max_age_s: float | None,
               now: float) -> dict[str, Response]:
    """The answers young enough to reuse (an answer of unknown age is not)."""
    if max_age_s is None:
        return dict(found)
    return {key: r for key, r in found.items()
            if r.created is not None and now - r.created < max_age_s}


def probe_key(cached: Mapping[str, Response]) -> str | None:
    """The cached answer to ask again to learn the current system_fingerprint: the oldest
    that carries one; None when none does (nothing to compare with)."""
    carrying = [(r.created or 0.0, key) for key, r in cached.items() if r.system_fingerprint]
    return min(carrying)[1] if carrying else None


def stale_keys(cached: Mapping[str, Response], fresh: str | None) -> set[str]:
    """The cached answers a fresh `system_fingerprint` makes stale (see the module doc)."""
    if not fresh:
        return set()
    known = {r.system_fingerprint for r in cached.values() if r.system_fingerprint}
    if fresh in known:
        return set()
    return {key for key, r in cached.items() if r.system_fingerprint != fresh}
