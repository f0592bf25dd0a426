"""The shards of a CI matrix (`--orbench-shard=K/N`).

A shard (K of N) takes the items whose key's SHA-256 (suite, variant, case id) falls in it: the
same split on every machine, Python version and hash seed, independent of which other items
exist, so N CI jobs that each collect the same suites ask disjoint sets that together cover all.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.ids import ItemKey
from orbench_pytest.core.untrusted import terminal_text

_DIGITS = re.compile(r"[0-9]{1,9}")
MAX_SHARDS = 999_999_999  # the most shards --orbench-shard names (nine digits)


@dataclass(frozen=True)
class Shard:
    """--orbench-shard=K/N: this run's part of the selected items."""

    index: int  # K, from 1
    count: int  # N

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def holds(self, key: ItemKey) -> bool:
        return shard_of(key, self.count) == self.index


def parse_shard(text: str) -> Shard:
    index, sep, count = str(text).partition("/")
    # ASCII digits only: int() would take 1_0, ١ and spaces too
    shard = Shard(int(index), int(count)) if sep and _DIGITS.fullmatch(index) \
        and _DIGITS.fullmatch(count) else None
    if shard is None or not 1 <= shard.index <= shard.count:
        raise ConfigError(f"--orbench-shard: {terminal_text(repr(text), 60)} is not K/N with "
                          f"1 <= K <= N <= {MAX_SHARDS:,} (e.g. 2/4: the second of four "
                          "shards)")
    return shard


def shard_of(key: ItemKey, count: int) -> int:
    """The shard (1..count) an item belongs to."""
    blob = "\0".join(key).encode("utf-8")
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "big") % count + 1
