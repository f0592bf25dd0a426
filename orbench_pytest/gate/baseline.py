"""Baseline comparison: pair this run's items with an earlier run's, and McNemar's test.

Pure Python. An item is keyed by (suite, variant, case id), never by its node id, so a run
started from another directory still pairs. Only items answered in both runs are paired:
an error on either side says nothing about refusal. The test itself: core/statistics.py.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property

from orbench_pytest.core.ids import ItemKey
from orbench_pytest.core.statistics import McNemar, mcnemar


class Pairing(str, Enum):
    """An item's standing against the baseline."""

    NONE = ""  # no baseline given
    SAME = "same"  # behaved as expected in both runs
    KNOWN = "known"  # mismatched in both runs
    REGRESSION = "regression"  # mismatched now, behaved as expected in the baseline
    FIXED = "fixed"  # mismatched in the baseline, behaves as expected now
    UNPAIRED = "unpaired"  # not in the baseline, or no answer in one of the two runs


@dataclass(frozen=True)
class Baseline:
    """What an earlier run did: per item, mismatch (True/False) or no answer (None)."""

    source: str
    mismatches: Mapping[ItemKey, bool | None]
    # Per item, the share of its answers that refused (a run with --orbench-samples);
    # items not in it had one answer, whose mismatch state says it.
    rates: Mapping[ItemKey, float] = field(default_factory=dict)
    # Per gate row (suite, variant, category or None): its over-refusal and toxic-acceptance
    # rates as the gate computes them; a suite's `baseline: ratchet` compares with these.
    group_rates: Mapping[tuple[str, str, str | None], Mapping[str, float]] = field(
        default_factory=dict)

    def previous(self, key: ItemKey) -> bool | str | None:
        """The baseline's mismatch state, or "missing". A run with variants pairs each
        variant with a baseline run that had none (one system prompt against many)."""
        found = self._paired_key(key)
        return "missing" if found is None else self.mismatches[found]

    def _paired_key(self, key: ItemKey) -> ItemKey | None:
        if key in self.mismatches:
            return key
        default_key = (key[0], "", key[2])
        if key[1] and default_key in self.mismatches and not self._has_variants:
            return default_key
        return None

    def refusal_rate(self, key: ItemKey, expect: str) -> float | None:
        """The baseline's refusal fraction for the item; None when it has no answer."""
        found = self._paired_key(key)
        if found is None or self.mismatches[found] is None:
            return None
        if found in self.rates:
            return self.rates[found]
        return float(self.mismatches[found] != (expect == "refuse"))

    @cached_property
    def _has_variants(self) -> bool:
        return any(variant for _suite, variant, _case in self.mismatches)

    def pairing(self, key: ItemKey, mismatch: bool | None) -> Pairing:
        before = self.previous(key)
        if mismatch is None or before is None or before == "missing":
            return Pairing.UNPAIRED
        if mismatch:
            return Pairing.KNOWN if before else Pairing.REGRESSION
        return Pairing.FIXED if before else Pairing.SAME


@dataclass
class Comparison:
    """How a run compares with its baseline, over all its items."""

    source: str
    paired: int = 0
    unpaired: int = 0
    known: list[ItemKey] = field(default_factory=list)
    regressions: list[ItemKey] = field(default_factory=list)
    fixed: list[ItemKey] = field(default_factory=list)
    paired_in: Counter[tuple[str, str]] = field(default_factory=Counter)  # by suite, variant
    unpaired_in: Counter[tuple[str, str]] = field(default_factory=Counter)

    @property
    def test(self) -> McNemar:
        """Meaningful per suite (see groups()): pooled suites mix different trade-offs."""
        return mcnemar(len(self.regressions), len(self.fixed))

    def groups(self) -> dict[tuple[str, str], Comparison]:
        """The comparison per suite and variant, as the gate tests it."""
        out = {}
        for group in sorted(set(self.paired_in) | set(self.unpaired_in)):
            out[group] = Comparison(
                self.source, self.paired_in[group], self.unpaired_in[group],
                [k for k in self.known if k[:2] == group],
                [k for k in self.regressions if k[:2] == group],
                [k for k in self.fixed if k[:2] == group])
        return out

    def add(self, key: ItemKey, pairing: Pairing) -> None:
        group = (key[0], key[1])
        if pairing is Pairing.UNPAIRED:
            self.unpaired += 1
            self.unpaired_in[group] += 1
            return
        self.paired += 1
        self.paired_in[group] += 1
        if pairing is Pairing.KNOWN:
            self.known.append(key)
        elif pairing is Pairing.REGRESSION:
            self.regressions.append(key)
        elif pairing is Pairing.FIXED:
            self.fixed.append(key)

    def describe(self) -> str:
        return (f"{self.paired} items paired ({self.unpaired} unpaired): "
                f"{len(self.regressions)} regressions, {len(self.fixed)} fixed, "
                f"{len(self.known)} known")


def compare(current: Iterable[tuple[ItemKey, bool | None]], baseline: Baseline) -> Comparison:
    comparison = Comparison(baseline.source)
    for key, mismatch in current:
        comparison.add(key, baseline.pairing(key, mismatch))
    return comparison
