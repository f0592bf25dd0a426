"""A completed run as the results document (reports/document.py's model): its items, with the
gate, the comparison and the cost the run computed once (session_run.CompletedRun).

Here, in the run zone, because the run's own types (Selected, ItemState) are its input: the
reports zone below builds documents and knows nothing of how a run holds its items.
"""

from __future__ import annotations

from collections.abc import Mapping

from orbench_pytest.core.redact import redact
from orbench_pytest.core.types import History
from orbench_pytest.reports.document import Document, Fingerprint, ItemRecord
from orbench_pytest.reports.results import (
    build_results,
    calibration_record,
    preamble_record,
    turns_record,
)
from orbench_pytest.reports.summary import judge_agreement
from orbench_pytest.run.runner import ItemState
from orbench_pytest.run.session_run import CompletedRun


def run_document(run: CompletedRun, versions: Mapping[str, str] | None = None) -> Document:
    """The results document of a plugin (or runner) run."""
    outcome, settings = run.outcome, run.settings
    items = [item_record(s.nodeid, s.case.case_id, s.case.prompt, state, s.case.history)
             for s in run.selected if (state := outcome.states.get(s.nodeid)) is not None]
    fingerprints = sorted({a.system_fingerprint for a in outcome.verdicts.answers.values()
                           if a.system_fingerprint})
    return build_results(
        items=items, gate=outcome.gate, settings=settings, target=outcome.target_label,
        thresholds_source=run.thresholds.source, started=run.started, versions=versions,
        comparison=outcome.comparison, ungated=run.ungated, judge_version=outcome.judge_version,
        target_fingerprint=Fingerprint(**(outcome.fingerprint or {}),
                                       system_fingerprints=fingerprints),
        judge_calibration=(calibration_record(outcome.calibration)
                           if outcome.calibration is not None else None),
        cost=run.cost, judge_agreement=judge_agreement(outcome.judge_stats),
        rewordings=run.rewordings, preamble=preamble_record(settings.target.preamble))


def item_record(nodeid: str, case_id: str, prompt: str, state: ItemState,
                history: History = ()) -> ItemRecord:
    result, answer, verdict = state.result, state.answer, state.answer.verdict
    return ItemRecord(
        result.suite, case_id, result.variant, result.category, result.expect,
        verdict.label.value, state.outcome.value, result.mismatch, result.is_error,
        nodeid=nodeid, judge=verdict.judge, judge_reason=redact(verdict.reason),
        reason=redact(state.reason), baseline=result.baseline.value,
        response=redact(answer.excerpt), latency_ms=round(answer.latency_ms, 1),
        cached=answer.cached, attempts=answer.attempts,
        cache_age_s=None if answer.age_s is None else round(answer.age_s, 1),
        samples=result.answered if result.sampled else None, refusals=result.refusals,
        prompt=redact(prompt), answer=redact(answer.text),
        messages=turns_record((*history, ("user", prompt))) if history else None)
