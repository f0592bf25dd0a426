"""orbench-results.json: every item's outcome and the gate of one run (the baseline format).

Schema 1, one JSON object:
  schema: 1
  tool: {name, version}
  run: {started, finished, target, judge, judge_model, thresholds, parameters, suites,
        variants, versions, ungated (only on a shard alone: why no gate decides it)}
  items: [{id, nodeid, suite, case_id, variant, category, expect, verdict, judge,
           judge_reason, refused, mismatch, error, outcome, reason, baseline, response,
           prompt (only for items that did not pass), latency_ms, cached, cache_age_s,
           attempts}]
  run.target_fingerprint: {code, code_files (a module:function target), version,
        system_fingerprints (the provider's, as the answers carry them)}
  gate: {passed (null when ungated), stopped_reason, failures, rows: [{suite, variant,
         category, n, errors, refusals, n_comply, over_refusals, n_refuse, toxic_accepted,
         passed, verdict, checks, regression}]}
  variants: [per suite and variant: over-refusal and toxic-acceptance rates] (several variants)
  baseline: {source, paired, unpaired, known, regressions, fixed, mcnemar} or null

Written once, by the pytest controller (or the CLI), atomically. Read back by the baseline
option, `orbench report`, `orbench plot` and `orbench compare`.
"""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import urlsplit, urlunsplit

from orbench_pytest import __version__
from orbench_pytest.config.settings import Settings
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.ids import key_label
from orbench_pytest.core.redact import redact
from orbench_pytest.gate.baseline import Comparison, Pairing
from orbench_pytest.gate.decision import (
    OVER_REFUSAL,
    TOXIC_ACCEPTANCE,
    Gate,
    GroupRow,
    ItemResult,
    Outcome,
    row_rate,
)
from orbench_pytest.reports.records import SCHEMA, ItemRecord, RunRecord
from orbench_pytest.reports.summary import judge_agreement_dict, run_cost

if TYPE_CHECKING:
    from orbench_pytest.run.runner import RunOutcome, Selected



# --- writing --------------------------------------------------------------------------------
def build_results(
    *,
    items: Sequence[dict[str, Any]],
    gate: Gate,
    settings: Settings,
    target: str,
    thresholds_source: str,
    started: datetime,
    comparison: Comparison | None = None,
    versions: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The results document. `items` come from item_record() (one per selected item)."""
    suites: dict[str, int] = {}
    for item in items:
        suites[item["suite"]] = suites.get(item["suite"], 0) + 1
    return {
        "schema": SCHEMA,
        "tool": {"name": "orbench-pytest", "version": __version__},
        "run": {
            "started": started.isoformat(timespec="seconds"),
            "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "target": redact(target),
            "judge": settings.judge,
            "judge_model": _redacted(settings.judge_model),
            "thresholds": thresholds_source,
            "parameters": parameters(settings),
            "suites": [{"name": name, "items": n} for name, n in suites.items()],
            "variants": [{"name": v.name, "system_prompt": _redacted(v.system_prompt)}
                         for v in settings.variants],
            "versions": {"orbench_pytest": __version__, "python": platform.python_version(),
                         **(versions or {})},
        },
        "items": list(items),
        "gate": gate_dict(gate),
        "variants": variant_rows(gate) if len(settings.variants) > 1 else [],
        "baseline": comparison_dict(comparison) if comparison is not None else None,
    }


def results_from_run(outcome: RunOutcome, selected: Sequence[Selected], settings: Settings,
                     thresholds_source: str, started: datetime,
                     versions: Mapping[str, str] | None = None,
                     ungated: str | None = None) -> dict[str, Any]:
    """The results document of a plugin (or runner) run. `ungated`: why the gate does not
    decide this run (a shard alone): the document then says so, and that it neither passed
    nor failed, so nothing reading it takes a shard's own rates for the run's verdict."""
    items = []
    for s in selected:
        state = outcome.states.get(s.nodeid)
        if state is None:
            continue
        answer = state.answer
        items.append(item_record(
            s.nodeid, s.case.case_id, s.case.prompt, state.result, answer.verdict.label.value,
            answer.verdict.judge, answer.verdict.reason, state.outcome, state.reason,
            answer.excerpt, answer.latency_ms, answer.cached, answer.attempts,
            age_s=answer.age_s))
    source = outcome.gate.baseline_source
    comparison = (comparison_of(selected, outcome.states, source) if source is not None
                  else None)
    data = build_results(items=items, gate=outcome.gate, settings=settings,
                         target=outcome.target_label, thresholds_source=thresholds_source,
                         started=started, comparison=comparison, versions=versions)
    data["run"]["judge_version"] = outcome.judge_version
    if ungated is not None:
        data["run"]["ungated"] = ungated
        data["gate"]["passed"] = None
    data["run"]["target_fingerprint"] = {
        **(outcome.fingerprint or {}),
        "system_fingerprints": sorted({a.system_fingerprint for a in outcome.report.answers.values()
                                       if a.system_fingerprint}),
    }
    if outcome.calibration is not None:
        data["run"]["judge_calibration"] = outcome.calibration.as_dict()
    data["run"]["cost"] = run_cost(outcome.report, settings.price_input,
                                   settings.price_output).to_dict()
    agreement = judge_agreement_dict(outcome.judge_stats)
    if agreement is not None:
        data["run"]["judge_agreement"] = agreement
    return data


def comparison_of(selected: Sequence[Selected], states: Mapping[str, Any],
                  source: str) -> Comparison:
    """The baseline comparison of a run, from the pairing each item was given."""
    comparison = Comparison(source)
    for s in selected:
        state = states.get(s.nodeid)
        if state is None or state.result.baseline is Pairing.NONE:
            continue
        comparison.add((s.case.suite, s.variant.name, s.case.case_id), state.result.baseline)
    return comparison


def item_record(nodeid: str, case_id: str, prompt: str, result: ItemResult, verdict_label: str,
                judge: str, judge_reason: str, outcome: Outcome, reason: str, response: str,
                latency_ms: float, cached: bool, attempts: int,
                age_s: float | None = None) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": key_label((result.suite, result.variant, case_id)),
        "nodeid": nodeid,
        "suite": result.suite,
        "case_id": case_id,
        "variant": result.variant,
        "category": result.category,
        "expect": result.expect,
        "verdict": verdict_label,
        "judge": judge,
        "judge_reason": redact(judge_reason),
        "refused": result.refused,
        "mismatch": result.mismatch,
        "error": result.is_error,
        "outcome": outcome.value,
        "reason": redact(reason),
        "baseline": result.baseline.value,
        "response": redact(response),
        "latency_ms": round(latency_ms, 1),
        "cached": cached,
        "cache_age_s": None if age_s is None else round(age_s, 1),  # null: asked in this run
        "attempts": attempts,
    }
    if result.sampled:  # --orbench-samples: what the prompt's answers did
        record.update(sampled_fields(result))
    if outcome is not Outcome.PASSED:
        record["prompt"] = redact(prompt)
    return record


def sampled_fields(result: ItemResult) -> dict[str, Any]:
    """samples (answered), refusals and refusal_rate: the JUnit properties and results keys."""
    rate = result.refusal_rate
    return {"samples": result.answered, "refusals": result.refusals,
            "refusal_rate": None if rate is None else round(rate, 4)}


def parameters(settings: Settings) -> dict[str, Any]:
    """What was asked, and how: never a key (only the name of its variable)."""
    return {
        "model": _redacted(settings.model),  # a key pasted into it is not written
        "base_url": _safe_url(settings.base_url),
        "api_key_env": settings.api_key_env,
        "target": _redacted(settings.target),
        "temperature": settings.temperature,
        "max_tokens": settings.max_tokens,
        "request_seed": settings.request_seed,
        "timeout_s": settings.timeout_s,
        "strict": settings.strict,
        "judge": settings.judge,
        "judge_model": _redacted(settings.judge_model),
        "judge_base_url": _safe_url(settings.judge_base_url),
        "partial_is_refusal": settings.partial_is_refusal,
        "sample": settings.sample,
        "seed": settings.seed,
        "categories": list(settings.categories),
        "concurrency": settings.concurrency,
        "cache": settings.cache_mode,
    }


def _safe_url(url: str | None) -> str | None:
    """A URL without user:password@ and without a key in its query."""
    if url is None:
        return None
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return redact(urlunsplit((parts.scheme, netloc, parts.path, "", "")))


def _redacted(text: str | None) -> str | None:
    return None if text is None else redact(text)


def gate_dict(gate: Gate) -> dict[str, Any]:
    return {
        "passed": gate.passed,
        "stopped_reason": gate.stopped_reason,
        "baseline": gate.baseline_source,
        "failures": gate.failures(),
        "ratchet": gate.ratchet_notes(),
        "partial": gate.partial,
        "disputed": [{"id": label, "reason": reason, "decided_by": decided_by}
                     for label, reason, decided_by in gate.disputed],
        "rows": [row_dict(row) for row in gate.rows.values()],
    }


def row_dict(row: GroupRow) -> dict[str, Any]:
    regression = row.regression
    return {
        "suite": row.suite,
        "variant": row.variant,
        "category": row.category,
        "n": row.n,
        "errors": row.errors,
        "refusals": row.refusals,
        "n_comply": row.n_comply,
        "over_refusals": row.over_refusals,
        "n_refuse": row.n_refuse,
        "toxic_accepted": row.toxic_accepted,
        **({"flaky": row.flaky} if row.sampled else {}),
        # Every row's rates as the gate computes them (ungated category rows too): the one
        # source reports read (issue 31).
        "rates": {name: {"rate": found[0], "interval": list(found[1])}
                  for name in (OVER_REFUSAL, TOXIC_ACCEPTANCE)
                  if (found := row_rate(row, name)) is not None},
        "passed": row.passed,
        "verdict": row.verdict,
        "checks": [{
            "name": check.name, "k": check.k, "n": check.n, "rate": check.rate,
            "interval": list(check.interval), "confidence": check.confidence,
            "limit": check.limit, "decision": check.decision, "where": check.where,
            "passed": check.passed, "baseline_mode": check.baseline_mode,
            "baseline_rate": check.baseline_rate,
            "allowed_by_ratchet": check.allowed_by_ratchet,
            **({"corrected": True, "raw_rate": check.raw_rate,
                "raw_interval": list(check.raw_interval)}
               if check.corrected is not None else {}),
            **({"mean_of_prompts": True, "answers": check.sampled.answers,
                "n_effective": round(check.sampled.n_effective, 2)}
               if check.sampled is not None else {}),
        } for check in row.checks],
        "regression": None if regression is None else {
            "regressions": regression.regressions, "fixed": regression.fixed,
            "paired": regression.paired, "limit": regression.limit,
            "decision": regression.decision, "where": regression.where,
            "p_worse": regression.test.p_worse, "p_two_sided": regression.test.p_two_sided,
            "exact": regression.test.exact, "passed": regression.passed,
            **({"paired_test": regression.paired_test.describe()}
               if regression.deltas is not None else {}),
        },
    }


def variant_rows(gate: Gate) -> list[dict[str, Any]]:
    """Per suite and variant, the two rates side by side (system-prompt sweeps)."""
    rows = []
    for row in gate.rows.values():
        if row.category is not None:
            continue
        rows.append({
            "suite": row.suite, "variant": row.variant, "n": row.n, "errors": row.errors,
            "over_refusal": _rate(row, OVER_REFUSAL),
            "toxic_acceptance": _rate(row, TOXIC_ACCEPTANCE),
            "passed": row.passed,
        })
    return rows


def _rate(row: GroupRow, name: str) -> dict[str, Any] | None:
    check = row.check(name)
    if check is None:
        return None
    return {"k": check.k, "n": check.n, "rate": check.rate, "interval": list(check.interval)}


def comparison_dict(comparison: Comparison) -> dict[str, Any]:
    """Counts over the run, McNemar per suite and variant (the unit the gate tests)."""
    groups = []
    for (suite, variant), group in comparison.groups().items():
        test = group.test
        groups.append({"suite": suite, "variant": variant, "paired": group.paired,
                       "unpaired": group.unpaired, "known": len(group.known),
                       "regressions": len(group.regressions), "fixed": len(group.fixed),
                       "mcnemar": {"p_worse": test.p_worse, "p_two_sided": test.p_two_sided,
                                   "exact": test.exact}})
    return {
        "source": comparison.source,
        "paired": comparison.paired,
        "unpaired": comparison.unpaired,
        "known": len(comparison.known),
        "regressions": [key_label(key) for key in comparison.regressions],
        "fixed": [key_label(key) for key in comparison.fixed],
        "groups": groups,
    }


def check_writable(path: Path, option: str = "--orbench-results") -> None:
    """Before any request: a results path that cannot be written fails the run at once."""
    from orbench_pytest.core.artefacts import resolved_target

    path = resolved_target(path, option)  # no folder, device or FIFO; through symlinks
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError(f"{option}: cannot write {path} ({parent} is not a folder)")
    if not os.access(parent, os.W_OK):
        raise ConfigError(f"{option}: cannot write {path} ({parent} is not writable)")


def write_results(path: Path, data: Mapping[str, Any]) -> None:
    """Atomically: a reader never sees half a file, and a crash leaves the old one."""
    from orbench_pytest.core.artefacts import write_atomically

    head = {key: value for key, value in data.items() if key != "items"}

    def write(out: TextIO) -> None:
        # Compact, one item per line: small at 80K items, still greppable and diffable.
        opening = json.dumps(head, ensure_ascii=False, indent=1)[:-2] + "," if head else "{"
        out.write(opening + '\n "items": [\n')
        out.write(",\n".join(json.dumps(item, ensure_ascii=False, separators=(",", ":"))
                             for item in data.get("items", [])))
        out.write("\n ]\n}\n")

    write_atomically(path, write, "--orbench-results")


# --- reading --------------------------------------------------------------------------------
def read_results(path: Path) -> RunRecord:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read results file ({exc.strerror})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not JSON ({exc})") from None
    except (ValueError, RecursionError) as exc:  # a 5,000-digit number, deep nesting
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise ConfigError(f"{path}: not usable JSON ({reason})") from None
    return parse_results(data, str(path))


def parse_results(data: Any, source: str) -> RunRecord:
    if not isinstance(data, dict) or "schema" not in data:
        raise ConfigError(f"{source}: not an orbench results file (no 'schema' key)")
    if data["schema"] != SCHEMA:
        raise ConfigError(f"{source}: results schema {data['schema']!r} is not supported "
                          f"(this orbench-pytest reads schema {SCHEMA})")
    from orbench_pytest.reports.results_schema import check_document

    raw_items = data.get("items")
    if not isinstance(raw_items, list):
        raise ConfigError(f"{source}: items: expected a list")
    if not raw_items:
        raise ConfigError(f"{source}: items: the run has no items")
    check_document(data, source)
    items = [_item_from_dict(raw, source, index) for index, raw in enumerate(raw_items)]
    gate = data.get("gate") or {}
    run = data.get("run") or {}
    return RunRecord(source, items, gate.get("rows"), gate.get("passed"), dict(run))



def _item_from_dict(raw: Any, source: str, index: int) -> ItemRecord:
    from orbench_pytest.reports.results_schema import check_item

    check_item(raw, source, index)
    return ItemRecord(
        suite=str(raw["suite"]), case_id=str(raw["case_id"]), variant=str(raw["variant"]),
        category=str(raw["category"]), expect=str(raw["expect"]), verdict=str(raw["verdict"]),
        outcome=str(raw["outcome"]), mismatch=bool(raw["mismatch"]), error=bool(raw["error"]),
        judge=str(raw.get("judge", "")), judge_reason=str(raw.get("judge_reason", "")),
        reason=str(raw.get("reason", "")), response=str(raw.get("response", "")),
        prompt=str(raw.get("prompt", "")), latency_ms=raw.get("latency_ms"),
        cached=raw.get("cached"), nodeid=str(raw.get("nodeid", "")),
        baseline=str(raw.get("baseline", "")),
        refusals=_count(raw.get("refusals")), samples=_count(raw.get("samples")),
    )


def _count(value: Any) -> int | None:
    """A sample count read back: a whole number >= 0, else absent (one answer per prompt)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def load_run(path: Path) -> RunRecord:
    """A results file (.json) or a JUnit XML file written with the plugin (.xml)."""
    if path.suffix.lower() == ".xml":
        from orbench_pytest.reports.junit import read_junit

        return read_junit(path)
    return read_results(path)

