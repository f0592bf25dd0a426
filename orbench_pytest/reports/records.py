"""A finished run as reports read it back: its items and the gate it decided.

Built from orbench-results.json (results.py) or from pytest's JUnit XML (junit.py); read by
`orbench report`, `orbench plot` and the baseline option.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orbench_pytest.core.ids import ItemKey, key_label
from orbench_pytest.core.types import Expectation
from orbench_pytest.gate.baseline import Baseline
from orbench_pytest.gate.decision import ItemResult, group_rates

SCHEMA = 1  # of orbench-results.json and of the JUnit gate property
ERROR_VERDICTS = frozenset({"error", "no_answer"})  # judge classes that mean "no answer"


@dataclass(frozen=True)
class ItemRecord:
    """One item as reports see it, whether read from a results file or from JUnit XML."""

    suite: str
    case_id: str
    variant: str
    category: str
    expect: str
    verdict: str  # the judge's class (types.Label value)
    outcome: str  # gate.Outcome value
    mismatch: bool  # answered, and not as expected
    error: bool  # no usable answer
    judge: str = ""
    judge_reason: str = ""
    reason: str = ""  # why the item passed / xfailed / failed
    response: str = ""
    prompt: str = ""
    latency_ms: float | None = None
    cached: bool | None = None
    nodeid: str = ""
    baseline: str = ""
    # --orbench-samples: refusals among the answered samples (None: one answer per prompt)
    refusals: int | None = None
    samples: int | None = None

    @property
    def refusal_rate(self) -> float | None:
        if self.error:
            return None
        if self.refusals is not None and self.samples:
            return self.refusals / self.samples
        return float(bool(self.refused))

    @property
    def flaky(self) -> bool:
        return self.refusals is not None and 0 < self.refusals < (self.samples or 0)

    @property
    def key(self) -> ItemKey:
        return (self.suite, self.variant, self.case_id)

    @property
    def id(self) -> str:
        return key_label(self.key)

    @property
    def mismatch_state(self) -> bool | None:
        """What a baseline keeps of the item: mismatch or not, None without an answer."""
        return None if self.error else self.mismatch

    @property
    def refused(self) -> bool | None:
        if self.error:
            return None
        return self.mismatch != (self.expect == "refuse")

    def as_result(self) -> ItemResult:
        expect: Expectation = "refuse" if self.expect == "refuse" else "comply"
        return ItemResult(self.suite, self.category, expect, self.refused, self.variant,
                          refusals=self.refusals, answered=self.samples or 1)


@dataclass
class RunRecord:
    """A run read back: its items, and the gate rows as the run decided them (if known)."""

    source: str
    items: list[ItemRecord]
    gate_rows: list[dict[str, Any]] | None = None
    gate_passed: bool | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def to_baseline(self) -> Baseline:
        rates = {item.key: rate for item in self.items
                 if item.refusals is not None and (rate := item.refusal_rate) is not None}
        return Baseline(self.source, {item.key: item.mismatch_state for item in self.items},
                        rates, group_rates(item.as_result() for item in self.items))

    def label(self) -> str:
        """A short name for plots and tables."""
        target = self.meta.get("target")
        return str(target) if target else Path(self.source).stem

    def variants(self) -> list[str]:
        return list(dict.fromkeys(item.variant for item in self.items))
