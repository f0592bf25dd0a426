"""Deduplicate: drop candidates that repeat a seed or an earlier candidate nearly word for word.

Similarity is the Jaccard overlap of word n-grams of the normalised texts (case, quotes,
punctuation and spacing do not count). An inverted index of n-grams means each candidate is
compared only with the texts it shares an n-gram with, not with all of them.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from orbench_pytest.judges.judge import normalise

_WORD = re.compile(r"\w+")
DEFAULT_N = 3
DEFAULT_THRESHOLD = 0.6


def ngrams(text: str, n: int = DEFAULT_N) -> frozenset[tuple[str, ...]]:
    flat = normalise(text) or text
    words = _WORD.findall(flat) or ([flat] if flat else [])  # no word: the text itself
    if len(words) < n:  # a short text is one n-gram of its own words
        return frozenset({tuple(words)}) if words else frozenset()
    return frozenset(tuple(words[i:i + n]) for i in range(len(words) - n + 1))


def jaccard(a: frozenset[tuple[str, ...]], b: frozenset[tuple[str, ...]]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


@dataclass(frozen=True, slots=True)
class Duplicate:
    index: int  # of the dropped text among the candidates
    of: str  # id of the seed or candidate it repeats


class NearDuplicateIndex:
    def __init__(self, n: int = DEFAULT_N, threshold: float = DEFAULT_THRESHOLD) -> None:
        self.n = n
        self.threshold = threshold
        self._grams: list[frozenset[tuple[str, ...]]] = []
        self._ids: list[str] = []
        self._by_gram: dict[tuple[str, ...], list[int]] = defaultdict(list)

    def add(self, text_id: str, text: str) -> None:
        grams = ngrams(text, self.n)
        position = len(self._grams)
        self._grams.append(grams)
        self._ids.append(text_id)
        for gram in grams:
            self._by_gram[gram].append(position)

    def nearest(self, text: str) -> tuple[str, float] | None:
        """The most similar indexed text at or above the threshold."""
        grams = ngrams(text, self.n)
        seen = {pos for gram in grams for pos in self._by_gram.get(gram, ())}
        best: tuple[str, float] | None = None
        for pos in seen:
            score = jaccard(grams, self._grams[pos])
            if score >= self.threshold and (best is None or score > best[1]):
                best = (self._ids[pos], score)
        return best


def deduplicate(seeds: Sequence[tuple[str, str]], candidates: Sequence[tuple[str, str]], *,
                n: int = DEFAULT_N, threshold: float = DEFAULT_THRESHOLD
                ) -> tuple[list[int], list[Duplicate]]:
    """(indices of the candidates kept, the ones dropped); the first of near-duplicates stays.

    `seeds` and `candidates` are (id, text) pairs.
    """
    index = NearDuplicateIndex(n, threshold)
    for seed_id, text in seeds:
        index.add(seed_id, text)
    kept: list[int] = []
    dropped: list[Duplicate] = []
    for position, (candidate_id, text) in enumerate(candidates):
        match = index.nearest(text)
        if match is not None:
            dropped.append(Duplicate(position, match[0]))
            continue
        kept.append(position)
        index.add(candidate_id, text)
    return kept, dropped
