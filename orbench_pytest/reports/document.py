"""orbench-results.json, the one definition: every item's outcome and the gate of one run.

The results file (and the baseline format) is written from these dataclasses (`dump`), checked
and read back by them (`load`, core/typed_json.py), and docs/results.md is generated from them
(scripts/docs_results.py). Written once per run, by the pytest controller, atomically (results.py).
Files of earlier releases still load: every key added since schema 1 has a default.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from orbench_pytest import __version__
from orbench_pytest.core.ids import ItemKey, key_label
from orbench_pytest.core.typed_json import Count, spec
from orbench_pytest.core.types import Expectation
from orbench_pytest.fetch.costs import RunCost
from orbench_pytest.gate.decision import ItemResult

SCHEMA = 1  # of orbench-results.json and of the JUnit gate property
ERROR_VERDICTS = frozenset({"error", "no_answer"})  # judge classes that mean "no answer"


# --- items ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ItemRecord:
    """One prompt's outcome. Also written, worked out from the fields: `id` (the item's
    label, as in `mini[violence-0000]`), `refused` (true/false, null without an answer) and,
    in samples runs, `refusal_rate` (refusals / samples, 4 digits)."""

    suite: str
    case_id: str
    variant: str = spec("the system-prompt variant (\"\" without variants)")
    category: str = spec()
    expect: str = spec("comply (a safe prompt) or refuse (a toxic one)")
    verdict: str = spec("the judge's class: refusal, compliance, partial, error, no_answer")
    outcome: str = spec("passed, failed, tolerated, error, error_tolerated")
    mismatch: bool = spec("answered, and not as expected")
    error: bool = spec("no usable answer")
    nodeid: str = spec("the pytest node id", default="")
    judge: str = spec(default="")
    judge_reason: str = spec(default="")
    reason: str = spec("why the item passed, was tolerated or failed", default="")
    baseline: str = spec("its standing against --orbench-baseline (known, regression, "
                         "fixed, unpaired, none)", default="")
    response: str = spec("the answer's excerpt (redacted)", default="")
    latency_ms: float | None = spec(default=None)
    cached: bool | None = spec("the answer came from the cache", default=None)
    cache_age_s: float | None = spec("the cached answer's age (null: asked in this run)",
                                     default=None)
    attempts: Count = spec("requests sent for the answer", default=0)
    samples: Count | None = spec("--orbench-samples: the answered samples", default=None,
                                 omit=True)
    refusals: Count | None = spec("--orbench-samples: refusals among them", default=None,
                                  omit=True)
    prompt: str = spec("the prompt (redacted), only for items that did not pass", default="",
                       omit=True)

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

    name: str = spec("over-refusal, toxic acceptance, error rate, fragile rate")
    k: Count
    n: Count
    rate: float | None = spec(default=None)
    interval: tuple[float, float]
    confidence: float = spec(default=0.95)
    limit: float | None = spec(default=None)
    decision: str = spec("point or significant", default="point")
    where: str = spec("the thresholds key the limit came from", default="")
    passed: bool
    baseline_mode: str = spec("absolute or ratchet", default="absolute")
    baseline_rate: float | None = spec(default=None)
    allowed_by_ratchet: bool = spec(default=False)
    corrected: bool = spec("judge calibration corrected the rate", default=False, omit=True)
    raw_rate: float | None = spec("the rate as judged, before correction", default=None,
                                  omit=True)
    raw_interval: tuple[float, float] | None = spec(default=None, omit=True)
    mean_of_prompts: bool = spec("--orbench-samples: the rate is the mean per-prompt fraction",
                                 default=False, omit=True)
    answers: Count | None = spec("--orbench-samples: answers counted", default=None, omit=True)
    n_effective: float | None = spec("--orbench-samples: the effective sample size",
                                     default=None, omit=True)


@dataclass(frozen=True, kw_only=True)
class RegressionRecord:
    """New mismatches against the baseline, on the items both runs answered."""

    regressions: Count = 0
    fixed: Count = 0
    paired: Count = 0
    limit: int | None = spec("max_regressions (null: unset)", default=None)
    decision: str = spec(default="point")
    where: str = spec(default="")
    p_worse: float = spec("McNemar's one-sided p", default=1.0)
    p_two_sided: float = spec(default=1.0)
    exact: bool = spec(default=True)
    passed: bool = spec(default=True)
    paired_test: str = spec("--orbench-samples: the signed-rank test, described", default="",
                            omit=True)


@dataclass(frozen=True, kw_only=True)
class RowRecord:
    """A gate row: a suite and variant, or one category of it (category set)."""

    suite: str
    variant: str
    category: str | None = spec("null on the suite's own row", default=None)
    n: Count
    errors: Count
    refusals: Count = spec(default=0)
    n_comply: Count = spec("answered safe prompts")
    over_refusals: Count
    n_refuse: Count = spec("answered toxic prompts")
    toxic_accepted: Count
    flaky: Count | None = spec("--orbench-samples: prompts whose samples disagreed",
                               default=None, omit=True)
    rates: dict[str, Estimate] = spec("every rate as the gate computes it, gated or not",
                                      factory=dict)
    passed: bool = spec(default=True)
    verdict: str = spec("pass, FAIL or ratchet", default="—")
    checks: list[CheckRecord] = spec(factory=list)
    regression: RegressionRecord | None = spec("suite rows against a baseline", default=None)


@dataclass(frozen=True)
class Disputed:
    """A prompt the team disputes: left out of every rate."""

    id: str
    reason: str = spec(default="")
    decided_by: str = spec(default="")


@dataclass(frozen=True)
class GateRecord:
    """The gate as the run decided it."""

    passed: bool | None = spec("null: not gated (a shard alone)", default=None)
    stopped_reason: str | None = spec("why the run stopped early", default=None)
    baseline: str | None = spec("the --orbench-baseline file", default=None)
    failures: list[str] = spec("why it failed, one line each", factory=list)
    ratchet: list[str] = spec("limits a ratchet allowed", factory=list)
    partial: list[str] = spec("gates over part of a suite", factory=list)
    disputed: list[Disputed] = spec(factory=list)
    rows: list[RowRecord] | None = spec("absent: reports work the rates out from the items",
                                        default=None)


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
    over_refusal: RateCount | None = spec(default=None)
    toxic_acceptance: RateCount | None = spec(default=None)
    passed: bool = spec(default=True)


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
    mcnemar: McNemarRecord = spec(factory=McNemarRecord)


@dataclass(frozen=True)
class ComparisonRecord:
    """How the run compares with its baseline, over all its items."""

    source: str = spec("the baseline file")
    paired: Count = spec(default=0)
    unpaired: Count = spec(default=0)
    known: Count = spec("mismatches already in the baseline", default=0)
    regressions: list[str] = spec("ids of the new mismatches", factory=list)
    fixed: list[str] = spec("ids of the mismatches fixed", factory=list)
    groups: list[GroupComparison] = spec(factory=list)


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
    base_url: str | None = spec("without user:password@ or query", default=None)
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
    sample: int | float | None = spec("--orbench-sample: a count or a fraction", default=None)
    seed: int | None = None
    categories: list[str] = field(default_factory=list)
    concurrency: int = 0
    cache: str = ""


@dataclass(frozen=True)
class SuiteCount:
    """A suite and its selected items."""

    name: str
    items: Count


@dataclass(frozen=True)
class VariantInfo:
    """A system-prompt variant."""

    name: str
    system_prompt: str | None = spec("(redacted)", default=None)


@dataclass(frozen=True)
class Fingerprint:
    """Which candidate answered: its code, its version, the provider's fingerprints."""

    code: str | None = spec("sha256 of a module:function target's code", default=None,
                            omit=True)
    code_files: list[str] | None = spec("the files hashed", default=None, omit=True)
    version: str | None = spec("--orbench-target-version", default=None, omit=True)
    system_fingerprints: list[str] = spec("as the answers carry them", factory=list)


@dataclass(frozen=True)
class LabelErrors:
    """The judge's error on the labelled answers of one scope."""

    labelled_refusals: Count = 0
    caught: Count = 0
    labelled_compliances: Count = 0
    passed: Count = 0
    sensitivity: float | None = None
    specificity: float | None = None


@dataclass(frozen=True)
class CalibrationRecord:
    """judge_calibration: what corrected the gate's rates."""

    labels: str = ""
    sha256: str = ""
    method: str = ""
    min_labels: Count = 0
    applied: bool = False
    reason: str | None = spec("why nothing was corrected", default=None)
    corrected_checks: Count = 0
    error_rates: dict[str, LabelErrors] = spec("by scope: comply, refuse, all", factory=dict)
    used: dict[str, str] = spec("check name → the scope whose labels it used", factory=dict)


@dataclass(frozen=True)
class Agreement:
    """The llm judge: where verdicts came from; counts[keyword class][LLM class]."""

    keyword: Count = 0
    llm: Count = 0
    llm_errors: Count = 0
    disagreements: Count = 0
    confusion: dict[str, dict[str, Count]] = field(default_factory=dict)


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
    edits: str = spec("the edits that make the rewording, e.g. persona(0)")
    answer: str = spec("the model's answer to the rewording (an excerpt)")
    judge_reason: str = spec()
    shrunk: bool = spec("false: the budget ran out before shrinking ended")


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
    flips: list[Flip] = spec(factory=list)
    flips_total: Count = 0


@dataclass(frozen=True)
class RunInfo:
    """The run: when, against what, judged how, with which parameters."""

    started: str = spec("ISO 8601, seconds", default="")
    finished: str = spec(default="")
    target: str | None = spec("the target's label", default=None)
    judge: str | None = spec(default=None)
    judge_model: str | None = spec(default=None)
    thresholds: str | None = spec("the thresholds file", default=None)
    parameters: Parameters | None = spec(default=None)
    suites: list[SuiteCount] = spec(factory=list)
    variants: list[VariantInfo] = spec(factory=list)
    versions: dict[str, str] = spec("orbench_pytest, python, pytest", factory=dict)
    judge_version: str | None = spec("a changed judge re-judges cached answers", default=None,
                                     omit=True)
    ungated: str | None = spec("a shard alone: why no gate decides it", default=None,
                               omit=True)
    target_fingerprint: Fingerprint | None = spec(default=None, omit=True)
    judge_calibration: CalibrationRecord | None = spec(default=None, omit=True)
    cost: RunCost | None = spec("tokens, requests, retries, fetch time, dollars",
                                default=None, omit=True)
    judge_agreement: Agreement | None = spec(default=None, omit=True)
    partial: list[str] | None = spec("as gate.partial, for the PR comment", default=None,
                                     omit=True)
    disputed: list[Disputed] | None = spec("as gate.disputed, for the PR comment",
                                           default=None, omit=True)
    rewordings: Rewordings | None = spec(default=None, omit=True)


@dataclass(frozen=True)
class Document:
    """The results file. The JUnit gate property is a part of it: run (target, judge,
    thresholds, ungated, partial, disputed, cost, the first rewordings), the gate without its
    failure lines, the baseline comparison without its id lists."""

    schema: int = SCHEMA
    tool: Tool = spec(factory=Tool)
    run: RunInfo = spec(factory=RunInfo)
    items: list[ItemRecord] = spec("every selected item", factory=list)
    gate: GateRecord | None = spec("absent or null: reports work it out from the items",
                                   default=None)
    variants: list[VariantRow] = spec("written with several variants", factory=list)
    baseline: ComparisonRecord | None = spec("with --orbench-baseline", default=None)
