"""Stratified, reproducible sampling of suite rows (`--orbench-subset`, a suite's `subset:`).

The same (strata, size, seed) picks the same rows on every machine, Python version and process:
rows are ranked by a keyed BLAKE2 hash of (seed, stratum, position in stratum), never by the
global RNG, `hash()` or set order. Ranking by hash also nests samples: with one seed, the rows
of a 100-prompt sample are all in the 200-prompt sample, so a larger run reuses cached answers.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

from orbench_pytest.core.errors import ConfigError

_ALLOWED = ("a count N ≥ 1 (e.g. 200), a fraction in (0, 1] (e.g. 0.1), a percentage (e.g. 10%) "
            "or all")


def parse_sample(value: str | int | float, name: str = "--orbench-subset") -> int | float:
    """'200' → 200 rows; '0.1' or '10%' → a tenth of each suite; '1.0' or 'all' → all rows."""
    if isinstance(value, bool):
        raise ConfigError(f"{name}: {value!r} is not allowed ({_ALLOWED})")
    if isinstance(value, int):
        return _count(value, name)
    text = str(value).strip()
    if text.lower() == "all":
        return 1.0
    try:
        if text.endswith("%"):
            return _fraction(float(text[:-1]) / 100, text, name)
        if isinstance(value, float) or any(mark in text.lower() for mark in ".e"):
            return _fraction(float(text), text, name)
        return _count(int(text), name)
    except ValueError:
        raise ConfigError(f"{name}: {text!r} is not allowed ({_ALLOWED})") from None


def _count(count: int, name: str) -> int:
    if count < 1:
        raise ConfigError(f"{name}: {count} is not allowed ({_ALLOWED})")
    return count


def _fraction(fraction: float, text: str, name: str) -> float:
    if not (math.isfinite(fraction) and 0 < fraction <= 1):
        raise ConfigError(f"{name}: {text!r} is not allowed ({_ALLOWED})")
    return fraction


def sample_count(total: int, size: int | float) -> int:
    """How many of `total` rows a sample of `size` (a count or a fraction) keeps."""
    if total <= 0:
        return 0
    if isinstance(size, float):
        # Round half up (not to even) and keep at least one row: 0.001 of 500 is still a sample.
        return min(total, max(1, math.floor(size * total + 0.5)))
    return min(total, size)


def stratified_sample(strata: Sequence[str], size: int | float, seed: int) -> list[int]:
    """Sorted indices of a sample of `size` rows, proportional per stratum.

    Largest-remainder allocation keeps each stratum within one row of its share; when the
    sample has at least as many rows as there are strata, every stratum gets a row (taken from
    the most over-served stratum, so shares move as little as possible).
    """
    positions: dict[str, list[int]] = {}
    for index, stratum in enumerate(strata):
        positions.setdefault(stratum, []).append(index)
    count = sample_count(len(strata), size)
    if count >= len(strata):
        return list(range(len(strata)))
    allocation = allocate({name: len(rows) for name, rows in positions.items()}, count)
    picked: list[int] = []
    for name, rows in positions.items():
        if allocation[name]:
            picked.extend(_pick(rows, allocation[name], seed, name))
    return sorted(picked)


def allocate(sizes: dict[str, int], count: int) -> dict[str, int]:
    """Split `count` over strata of `sizes` (largest remainder, ties by name, ≥1 each if room)."""
    total = sum(sizes.values())
    quota = {name: count * size / total for name, size in sizes.items()}
    allocation = {name: math.floor(share) for name, share in quota.items()}
    left = count - sum(allocation.values())
    by_remainder = sorted(sizes, key=lambda name: (-(quota[name] - allocation[name]), name))
    for name in by_remainder[:left]:
        allocation[name] += 1
    if count >= len(sizes):
        _give_every_stratum_one(allocation, quota)
    return allocation


def _give_every_stratum_one(allocation: dict[str, int], quota: dict[str, float]) -> None:
    empty = sorted((name for name, got in allocation.items() if got == 0),
                   key=lambda name: (-quota[name], name))
    for name in empty:
        donor = max((other for other, got in allocation.items() if got >= 2),
                    key=lambda other: (allocation[other] - quota[other], other))
        allocation[donor] -= 1
        allocation[name] = 1


def _pick(rows: list[int], count: int, seed: int, stratum: str) -> list[int]:
    if count >= len(rows):
        return rows
    salt = f"{seed}:{stratum}:".encode()
    ranked = sorted(range(len(rows)), key=lambda position: _rank(salt, position))
    return [rows[position] for position in ranked[:count]]


def _rank(salt: bytes, position: int) -> bytes:
    return hashlib.blake2b(salt + str(position).encode(), digest_size=8).digest()
