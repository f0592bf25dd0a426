"""orbench-results.json, the one definition: every item's outcome and the gate of one run.

The results file (and the baseline format) is written from these dataclasses (`dump`), checked
and read back by them (`load`, core/typed_json.py), and docs/results.md is generated from them
(scripts/docs_results.py). Written once per run, by the pytest controller, atomically (results.py).
Files of earlier releases still load: every key added since schema 1 has a default.
`RunRecord` is a finished run read back, from this file or from pytest's JUnit XML (junit.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orbench_pytest import __version__
from orbench_pytest.core.defaults import REWORDING_EDITS
from orbench_pytest.core.ids import ItemKey, key_label
from orbench_pytest.core.typed_json import OMIT, Count
from orbench_pytest.core.types import Expectation
from orbench_pytest.core.untrusted import redacted_repr
from orbench_pytest.gate.baseline import Baseline
from orbench_pytest.gate.decision import ItemResult, group_rates
from orbench_pytest.reports.cost import RunCost

SCHEMA = 1  # of orbench-results.json and of the JUnit gate property
ERROR_VERDICTS = frozenset({"error", "no_answer"})  # judge classes that mean "no answer"


# --- items ----------------------------------------------------------------------------------
@redacted_repr
@redacted_repr
@dataclass(frozen=True)
class Turn:
    """One turn of a conversation (redacted)."""

    role: str  # system, user or assistant
    content: str


@redacted_repr
@dataclass(frozen=True)
class ItemRecord:
    """One prompt's outcome. Also written, worked out from the fields: `id` (the item's
    label, as in `mini[violence-0000]`), `refused` (true/false, null without an answer) and,
    in samples runs, `refusal_rate` (refusals / samples, 4 digits)."""

    suite: str
    case_id: str
    variant: str  # the system-prompt variant ("" without variants)
    category: str
    expect: str  # comply (a safe prompt) or refuse (a toxic one)
    verdict: str  # the judge's class: refusal, compliance, partial, error, no_answer
    outcome: str  # passed, failed, tolerated, error, error_tolerated
    mismatch: bool  # answered, and not as expected
    error: bool  # no usable answer
    nodeid: str = ""  # the pytest node id
    judge: str = ""
    judge_reason: str = ""
    reason: str = ""  # why the item passed, was tolerated or failed
    baseline: str = ""  # against --orbench-baseline: known, regression, fixed, unpaired, none
    response: str = ""  # the answer's excerpt (redacted)
    latency_ms: float | None = None
    cached: bool | None = None  # the answer came from the cache
    cache_age_s: float | None = None  # the cached answer's age (null: asked in this run)
    attempts: Count = 0  # requests sent for the answer
    samples: Count | None = field(default=None, metadata=OMIT)  # --orbench-samples: answered
    refusals: Count | None = field(default=None, metadata=OMIT)  # --orbench-samples: of them
    prompt: str = field(default="", metadata=OMIT)  # the whole prompt (redacted)
    answer: str = field(default="", metadata=OMIT)  # the whole answer (redacted), bounded
    # A conversation row's turns, its prompt the last (redacted); with `prompt`, absent for a
    # single prompt. The run's preamble, sent before them, is run.preamble.
    messages: list[Turn] | None = field(default=None, metadata=OMIT)

    def json_extra(self) -> dict[str, Any]:
        rate = self.refusal_rate
        sampled = {} if self.samples is None else {"refusal_rate": _rounded(rate)}
        return {"id": self.id, "refused": self.refused, **sampled}

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


def sampled_fields(result: ItemResult) -> dict[str, Any]:
    """samples (answered), refusals and refusal_rate: the JUnit properties and results keys."""
    return {"samples": result.answered, "refusals": result.refusals,
            "refusal_rate": _rounded(result.refusal_rate)}


def _rounded(rate: float | None) -> float | None:
    return None if rate is None else round(rate, 4)


# --- the gate -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Estimate:
    """A rate as the gate computed it, with its interval."""

    rate: float
    interval: tuple[float, float]


@dataclass(frozen=True, kw_only=True)
class CheckRecord:
    """One limit of a row: k of n, the rate and interval that decide, the limit."""

    name: str  # over-refusal, toxic acceptance, error rate, fragile rate
    k: Count
    n: Count
    rate: float | None = None
    interval: tuple[float, float]
    confidence: float = 0.95
    limit: float | None = None
    decision: str = "point"  # point or significant
    where: str = ""  # the thresholds key the limit came from
    passed: bool
    baseline_mode: str = "absolute"  # absolute or ratchet
    baseline_rate: float | None = None
    allowed_by_ratchet: bool = False
    corrected: bool = field(default=False, metadata=OMIT)  # judge calibration corrected the rate
    raw_rate: float | None = field(default=None, metadata=OMIT)  # as judged, before correction
    raw_interval: tuple[float, float] | None = field(default=None, metadata=OMIT)
    mean_of_prompts: bool = field(default=False, metadata=OMIT)  # samples: rate = mean fraction
    answers: Count | None = field(default=None, metadata=OMIT)  # --orbench-samples: answers counted
    n_effective: float | None = field(default=None, metadata=OMIT)  # samples: effective size


@dataclass(frozen=True, kw_only=True)
class RegressionRecord:
    """New mismatches against the baseline, on the items both runs answered."""

    regressions: Count = 0
    fixed: Count = 0
    paired: Count = 0
    limit: int | None = None  # max_regressions (null: no limit)
    decision: str = "point"
    where: str = ""
    p_worse: float = 1.0  # McNemar's one-sided p
    p_two_sided: float = 1.0
    exact: bool = True
    passed: bool = True
    paired_test: str = field(default="", metadata=OMIT)  # samples: the signed-rank test


@dataclass(frozen=True, kw_only=True)
class RowRecord:
    """A gate row: a suite and variant, or one category of it (category set)."""

    suite: str
    variant: str
    category: str | None = None  # null on the suite's own row
    n: Count
    errors: Count
    refusals: Count = 0
    n_comply: Count  # answered safe prompts
    over_refusals: Count
    n_refuse: Count  # answered toxic prompts
    toxic_accepted: Count
    flaky: Count | None = field(default=None, metadata=OMIT)  # samples: prompts split
    rates: dict[str, Estimate] = field(default_factory=dict)  # every rate, gated or not
    passed: bool = True
    verdict: str = "—"  # pass, FAIL or ratchet
    checks: list[CheckRecord] = field(default_factory=list)
    regression: RegressionRecord | None = None  # suite rows against a baseline


@redacted_repr
@dataclass(frozen=True)
class Disputed:
    """A prompt the team disputes: left out of every rate."""

    id: str
    reason: str = ""
    decided_by: str = ""


@dataclass(frozen=True)
class GateRecord:
    """The gate as the run decided it."""

    passed: bool | None = None  # null: not gated (a shard alone)
    stopped_reason: str | None = None  # why the run stopped early
    baseline: str | None = None  # the --orbench-baseline file
    failures: list[str] = field(default_factory=list)  # why it failed, one line each
    ratchet: list[str] = field(default_factory=list)  # limits a ratchet allowed
    partial: list[str] = field(default_factory=list)  # gates over part of a suite
    disputed: list[Disputed] = field(default_factory=list)
    rows: list[RowRecord] | None = None  # absent: reports work the rates out from the items


@dataclass(frozen=True)
class RateCount:
    """One rate of a variant: k of n."""

    k: Count
    n: Count
    rate: float | None
    interval: tuple[float, float]


@dataclass(frozen=True)
class VariantRow:
    """Per suite and variant, the two rates side by side (written with several variants)."""

    suite: str
    variant: str
    n: Count
    errors: Count
    over_refusal: RateCount | None = None
    toxic_acceptance: RateCount | None = None
    passed: bool = True


# --- the baseline comparison ----------------------------------------------------------------
@dataclass(frozen=True)
class McNemarRecord:
    """McNemar's exact (or approximate) test on the discordant pairs."""

    p_worse: float = 1.0
    p_two_sided: float = 1.0
    exact: bool = True


@dataclass(frozen=True)
class GroupComparison:
    """The comparison of one suite and variant."""

    suite: str
    variant: str
    paired: Count = 0
    unpaired: Count = 0
    known: Count = 0
    regressions: Count = 0
    fixed: Count = 0
    mcnemar: McNemarRecord = field(default_factory=McNemarRecord)


@dataclass(frozen=True)
class ComparisonRecord:
    """How the run compares with its baseline, over all its items."""

    source: str  # the baseline file
    paired: Count = 0
    unpaired: Count = 0
    known: Count = 0  # mismatches already in the baseline
    regressions: list[str] = field(default_factory=list)  # ids of the new mismatches
    fixed: list[str] = field(default_factory=list)  # ids of the mismatches fixed
    groups: list[GroupComparison] = field(default_factory=list)


# --- the run --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Tool:
    """What wrote the file."""

    name: str = "orbench-pytest"
    version: str = __version__


@dataclass(frozen=True)
class Parameters:
    """What was asked, and how: never a key (only the name of its variable)."""

    model: str | None = None
    base_url: str | None = None  # without user:password@ or query
    api_key_env: str = ""
    target: str | None = None
    temperature: float = 0.0
    max_tokens: int | None = None
    request_seed: int | None = None
    timeout_s: float = 0.0
    strict: bool = False
    judge: str = ""
    judge_model: str | None = None
    judge_base_url: str | None = None
    partial_is_refusal: bool = False
    sample: int | float | None = None  # --orbench-subset: a count or a fraction
    seed: int | None = None
    categories: list[str] = field(default_factory=list)
    concurrency: int = 0
    cache: str = ""


@dataclass(frozen=True)
class SuiteCount:
    """A suite and its selected items."""

    name: str
    items: Count


@redacted_repr
@dataclass(frozen=True)
class VariantInfo:
    """A system-prompt variant."""

    name: str
    system_prompt: str | None = None  # (redacted)


@dataclass(frozen=True)
class Fingerprint:
    """Which candidate answered: its code, its version, the provider's fingerprints."""

    code: str | None = field(default=None, metadata=OMIT)  # sha256 of a module:function's code
    code_files: list[str] | None = field(default=None, metadata=OMIT)  # the files hashed
    version: str | None = field(default=None, metadata=OMIT)  # --orbench-target-version
    system_fingerprints: list[str] = field(default_factory=list)  # as the answers carry them


@dataclass(frozen=True)
class LabelErrors:
    """The judge's error on the labelled answers of one scope (descriptive)."""

    labelled_refusals: Count = 0
    caught: Count = 0
    labelled_compliances: Count = 0
    passed: Count = 0
    sensitivity: float | None = None
    specificity: float | None = None


@redacted_repr
@dataclass(frozen=True)
class LabelStrata:
    """One kind's labels split by the judge's verdict: how many, and how many people found a
    mismatch (a refusal of a safe prompt, an answer to a toxic one)."""

    judged_mismatch_labels: Count = 0
    judged_mismatch_mismatches: Count = 0
    judged_match_labels: Count = 0
    judged_match_mismatches: Count = 0


@redacted_repr
@dataclass(frozen=True)
class CalibrationRecord:
    """judge_calibration: what corrected the gate's rates."""

    labels: str = ""
    sha256: str = ""
    method: str = ""
    # the Rogan–Gladen correction's minimum labels (files it wrote keep it)
    min_labels: Count | None = field(default=None, metadata=OMIT)
    applied: bool = False  # some rate was corrected
    reason: str | None = None  # why nothing was corrected
    corrected_checks: Count = 0
    error_rates: dict[str, LabelErrors] = field(default_factory=dict)  # comply, refuse, all
    strata: dict[str, LabelStrata] = field(default_factory=dict, metadata=OMIT)  # comply, refuse
    used: dict[str, str] = field(default_factory=dict)  # check name → the kind of its labels


@dataclass(frozen=True)
class Agreement:
    """The llm judge: where verdicts came from; counts[keyword class][LLM class]."""

    keyword: Count = 0
    llm: Count = 0
    llm_errors: Count = 0
    disagreements: Count = 0
    confusion: dict[str, dict[str, Count]] = field(default_factory=dict)


@redacted_repr
@dataclass(frozen=True)
class Flip:
    """A fragile prompt and the smallest rewording found that the model refused."""

    nodeid: str
    suite: str
    variant: str
    case_id: str
    category: str
    original: str
    rewording: str
    edits: str  # the edits that make the rewording, e.g. persona(0)
    answer: str  # the model's whole answer to the rewording (at most 8,192 characters)
    judge_reason: str
    shrunk: bool  # false: the budget ran out before shrinking ended
    # what the edits add: wording (the key left out), persona, purpose, persona + purpose
    kind: str = field(default="wording", metadata=OMIT)


@dataclass(frozen=True)
class Rewordings:
    """--orbench-rewordings: the search, and every minimal flip."""

    tries: Count = 0
    seed: int = 0
    budget: Count = 0
    asked: Count = 0
    requests: Count = 0
    searched: Count = 0
    not_searched: Count = 0
    fragile: Count = 0
    flips: list[Flip] = field(default_factory=list)
    flips_total: Count = 0
    # the kinds of edit tried (the key left out: all of them, the default)
    edits: list[str] = field(default_factory=lambda: list(REWORDING_EDITS), metadata=OMIT)
    # rewordings the judge refused without being sure: not counted as flips (left out: none)
    unsure: Count = field(default=0, metadata=OMIT)


@dataclass(frozen=True)
class RunInfo:
    """The run: when, against what, judged how, with which parameters."""

    started: str = ""  # ISO 8601, seconds
    finished: str = ""
    target: str | None = None  # the target's label
    judge: str | None = None
    judge_model: str | None = None
    thresholds: str | None = None  # the thresholds file
    parameters: Parameters | None = None
    suites: list[SuiteCount] = field(default_factory=list)
    variants: list[VariantInfo] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)  # orbench_pytest, python, pytest
    judge_version: str | None = field(default=None, metadata=OMIT)  # a new one re-judges the cache
    ungated: str | None = field(default=None, metadata=OMIT)  # a shard alone: why not gated
    target_fingerprint: Fingerprint | None = field(default=None, metadata=OMIT)
    judge_calibration: CalibrationRecord | None = field(default=None, metadata=OMIT)
    cost: RunCost | None = field(default=None, metadata=OMIT)  # tokens, requests, retries, time, $
    judge_agreement: Agreement | None = field(default=None, metadata=OMIT)
    partial: list[str] | None = field(default=None, metadata=OMIT)  # as gate.partial (PR comment)
    disputed: list[Disputed] | None = field(default=None, metadata=OMIT)  # as gate.disputed
    rewordings: Rewordings | None = field(default=None, metadata=OMIT)
    preamble: PreambleRecord | None = field(default=None, metadata=OMIT)


@dataclass(frozen=True)
class PreambleRecord:
    """--orbench-preamble: the turns sent before every prompt of the run (redacted)."""

    path: str
    sha256: str  # of the file's bytes: what the cache keys and a baseline compare
    turns: list[Turn] = field(default_factory=list)


@dataclass(frozen=True)
class Document:
    """The results file. The JUnit gate property is a part of it: run (target, judge,
    thresholds, ungated, partial, disputed, cost, the first rewordings), the gate without its
    failure lines, the baseline comparison without its id lists."""

    schema: int = SCHEMA
    tool: Tool = field(default_factory=Tool)
    run: RunInfo = field(default_factory=RunInfo)
    items: list[ItemRecord] = field(default_factory=list)  # every selected item
    gate: GateRecord | None = None  # absent or null: reports work it out from the items
    variants: list[VariantRow] = field(default_factory=list)  # written with several variants
    baseline: ComparisonRecord | None = None  # with --orbench-baseline


# --- a run read back -------------------------------------------------------------------------
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
