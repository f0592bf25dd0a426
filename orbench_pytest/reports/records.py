"""A finished run as reports read it back: its items and the gate it decided.

Built from orbench-results.json (results.py) or from pytest's JUnit XML (junit.py); read by
`orbench report`, `orbench plot` and the baseline option.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from orbench_pytest.gate.baseline import Baseline
from orbench_pytest.gate.decision import group_rates
from orbench_pytest.reports.document import Document, ItemRecord, RowRecord, RunInfo


@dataclass
class RunRecord:
    """A run read back: the document (from a JUnit XML: its gate property and the items)."""

    source: str
    document: Document

    @property
    def items(self) -> list[ItemRecord]:
        return self.document.items

    @property
    def run(self) -> RunInfo:
        return self.document.run

    @property
    def gate_rows(self) -> list[RowRecord] | None:
        """The gate rows as the run decided them, if known."""
        return None if self.document.gate is None else self.document.gate.rows

    @property
    def gate_passed(self) -> bool | None:
        return None if self.document.gate is None else self.document.gate.passed

    def to_baseline(self) -> Baseline:
        rates = {item.key: rate for item in self.items
                 if item.refusals is not None and (rate := item.refusal_rate) is not None}
        return Baseline(self.source, {item.key: item.mismatch_state for item in self.items},
                        rates, group_rates(item.as_result() for item in self.items))

    def label(self) -> str:
        """A short name for plots and tables."""
        return self.run.target or Path(self.source).stem

    def variants(self) -> list[str]:
        return list(dict.fromkeys(item.variant for item in self.items))
