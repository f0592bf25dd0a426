"""orbench-results.json from a run, and back: the document (document.py) built from the run's
gate and items, written atomically, and read back checked against the same definition.

Written once, by the pytest controller (or the CLI). Read back by the baseline option,
`orbench report`, `orbench plot` and `orbench compare`.
"""

from __future__ import annotations

import json
import math
import os
import platform
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import fields, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO, TypeVar

from orbench_pytest import __version__
from orbench_pytest.config.settings import Settings
from orbench_pytest.core.bounded import RESULTS_LIMIT, read_text
from orbench_pytest.core.conversation import Preamble
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.ids import key_label
from orbench_pytest.core.redact import redact, shown_url
from orbench_pytest.core.typed_json import dump, load
from orbench_pytest.core.types import History
from orbench_pytest.core.untrusted import defused, json_escape
from orbench_pytest.gate.baseline import Comparison
from orbench_pytest.gate.calibration import METHOD, Calibration
from orbench_pytest.gate.decision import (
    OVER_REFUSAL,
    TOXIC_ACCEPTANCE,
    Gate,
    GroupRow,
    RateCheck,
    row_rate,
)
from orbench_pytest.gate.scope import Ungated
from orbench_pytest.reports.document import (
    SCHEMA,
    CalibrationRecord,
    CheckRecord,
    ComparisonRecord,
    Disputed,
    Document,
    Estimate,
    GateRecord,
    GroupComparison,
    ItemRecord,
    LabelErrors,
    LabelStrata,
    McNemarRecord,
    Parameters,
    PreambleRecord,
    RateCount,
    RegressionRecord,
    RowRecord,
    RunInfo,
    RunRecord,
    SuiteCount,
    Turn,
    VariantInfo,
    VariantRow,
)

T = TypeVar("T")


# --- building -------------------------------------------------------------------------------
def build_results(*, items: Sequence[ItemRecord], gate: Gate, settings: Settings, target: str,
                  thresholds_source: str, started: datetime,
                  comparison: Comparison | None = None, versions: Mapping[str, str] | None = None,
                  ungated: Ungated | None = None, **run: Any) -> Document:
    """The results document. `run`: more RunInfo fields (judge_version, cost, …). `ungated`:
    why the gate does not decide this run (a shard alone): the document then says so, and
    that it neither passed nor failed, so nothing reading it takes a shard's rates for the
    run's verdict."""
    suites: dict[str, int] = {}
    for item in items:
        suites[item.suite] = suites.get(item.suite, 0) + 1
    disputed = [Disputed(label, reason, by) for label, reason, by in gate.disputed]
    info = RunInfo(
        started=started.isoformat(timespec="seconds"),
        finished=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        target=redact(target), judge=settings.judge.name,
        judge_model=_redacted(settings.judge.model),
        thresholds=thresholds_source, parameters=parameters(settings),
        suites=[SuiteCount(name, n) for name, n in suites.items()],
        variants=[VariantInfo(v.name, _redacted(v.system_prompt))
                  for v in settings.target.variants],
        versions={"orbench_pytest": __version__, "python": platform.python_version(),
                  **(versions or {})},
        ungated=None if ungated is None else str(ungated), partial=list(gate.partial) or None,
        disputed=disputed or None, **run)
    return Document(
        run=info, items=list(items),
        gate=GateRecord(None if ungated is not None or gate.nothing_gated else gate.passed,
                        gate.stopped_reason,
                        gate.baseline_source, gate.failures(), gate.ratchet_notes(),
                        list(gate.partial), disputed,
                        [row_record(row) for row in gate.rows.values()]),
        variants=variant_rows(gate) if len(settings.target.variants) > 1 else [],
        baseline=comparison_record(comparison) if comparison is not None else None)


def turns_record(turns: History) -> list[Turn]:
    return [Turn(role, redact(content)) for role, content in turns]


def preamble_record(preamble: Preamble | None) -> PreambleRecord | None:
    return None if preamble is None else PreambleRecord(
        redact(preamble.path), preamble.sha256, turns_record(preamble.turns))


def parameters(settings: Settings) -> Parameters:
    """What was asked, and how: never a key (only the name of its variable)."""
    target, judge, scope = settings.target, settings.judge, settings.scope
    return Parameters(
        model=_redacted(target.model),  # a pasted key: gone
        base_url=_safe_url(target.base_url), api_key_env=target.api_key_env,
        target=_redacted(target.function), temperature=target.temperature,
        max_tokens=target.max_tokens, request_seed=target.request_seed,
        timeout_s=settings.requests.timeout_s, strict=settings.gate.strict, judge=judge.name,
        judge_model=_redacted(judge.model), judge_base_url=_safe_url(judge.base_url),
        partial_is_refusal=judge.partial_is_refusal, sample=scope.subset,
        seed=scope.random_seed, categories=list(scope.categories),
        concurrency=settings.requests.concurrency, cache=settings.cache.mode)


def _safe_url(url: str | None) -> str | None:
    """A URL without user:password@ and without a key in its query."""
    return None if url is None else redact(shown_url(url))


def _redacted(text: str | None) -> str | None:
    return None if text is None else redact(text)


def row_record(row: GroupRow) -> RowRecord:
    regression = row.regression
    return _copy(
        RowRecord, row, flaky=row.flaky if row.sampled else None,
        # Every row's rates as the gate computes them (ungated category rows too): the one
        # source reports read.
        rates={name: Estimate(*found) for name in (OVER_REFUSAL, TOXIC_ACCEPTANCE)
               if (found := row_rate(row, name)) is not None},
        checks=[_check(check) for check in row.checks],
        regression=None if regression is None else _copy(
            RegressionRecord, regression, p_worse=regression.test.p_worse,
            p_two_sided=regression.test.p_two_sided, exact=regression.test.exact,
            paired_test=(regression.paired_test.describe() if regression.deltas is not None
                         else "")))


def _check(check: RateCheck) -> CheckRecord:
    corrected, sampled = check.corrected is not None, check.sampled
    return _copy(CheckRecord, check, corrected=corrected,
                 raw_rate=check.raw_rate if corrected else None,
                 raw_interval=check.raw_interval if corrected else None,
                 mean_of_prompts=sampled is not None,
                 answers=sampled.answers if sampled is not None else None,
                 n_effective=round(sampled.n_effective, 2) if sampled is not None else None)


def _copy(cls: type[T], source: object, **given: Any) -> T:
    """A record of `cls` whose fields not `given` are `source`'s attributes of the same name."""
    return cls(**{f.name: getattr(source, f.name) for f in fields(cls)  # type: ignore[arg-type]
                  if f.name not in given}, **given)


def variant_rows(gate: Gate) -> list[VariantRow]:
    """Per suite and variant, the two rates side by side (system-prompt sweeps)."""
    return [VariantRow(row.suite, row.variant, row.n, row.errors, _rate(row, OVER_REFUSAL),
                       _rate(row, TOXIC_ACCEPTANCE), row.passed)
            for row in gate.rows.values() if row.category is None]


def _rate(row: GroupRow, name: str) -> RateCount | None:
    check = row.check(name)
    return None if check is None else RateCount(check.k, check.n, check.rate, check.interval)


def comparison_record(comparison: Comparison) -> ComparisonRecord:
    """Counts over the run, McNemar per suite and variant (the unit the gate tests)."""
    groups = [GroupComparison(suite, variant, group.paired, group.unpaired, len(group.known),
                              len(group.regressions), len(group.fixed),
                              McNemarRecord(group.test.p_worse, group.test.p_two_sided,
                                            group.test.exact))
              for (suite, variant), group in comparison.groups().items()]
    return ComparisonRecord(comparison.source, comparison.paired, comparison.unpaired,
                            len(comparison.known), [key_label(k) for k in comparison.regressions],
                            [key_label(k) for k in comparison.fixed], groups)


def calibration_record(calibration: Calibration) -> CalibrationRecord:
    return CalibrationRecord(
        calibration.labels, calibration.sha256, METHOD, None, calibration.corrected > 0,
        calibration.reason, calibration.corrected,
        {scope: LabelErrors(r.refusals, r.caught, r.compliances, r.passed,
                            _finite(r.sensitivity), _finite(r.specificity))
         for scope, r in calibration.rates.items()},
        {kind: LabelStrata(s.flagged.labelled, s.flagged.mismatched, s.cleared.labelled,
                           s.cleared.mismatched)
         for kind, s in calibration.strata.items()},
        dict(calibration.used))


def _finite(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 6)


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


def write_results(path: Path, document: Document | Mapping[str, Any]) -> None:
    """Atomically: a reader never sees half a file, and a crash leaves the old one."""
    from orbench_pytest.core.artefacts import write_atomically

    data = dump(document) if isinstance(document, Document) else document
    head = {key: value for key, value in data.items() if key != "items"}

    def write(out: TextIO) -> None:
        # Compact, one item per line: small at 80K items, still greppable and diffable.
        # allow_nan=False: strict JSON (no Infinity, no NaN) or no file at all. A CI marker in
        # a string is written as a JSON escape (`\u0023`): a CI log that shows the file obeys
        # none, and json.load reads the same text back.
        opening = (json.dumps(head, ensure_ascii=False, indent=1, allow_nan=False)[:-2] + ","
                   if head else "{")
        out.write(defused(opening, json_escape) + '\n "items": [\n')
        out.write(",\n".join(defused(json.dumps(item, ensure_ascii=False, separators=(",", ":"),
                                                 allow_nan=False), json_escape)
                             for item in data.get("items", [])))
        out.write("\n ]\n}\n")

    write_atomically(path, write, "--orbench-results")


# --- reading --------------------------------------------------------------------------------
def read_results(path: Path) -> RunRecord:
    try:
        data = json.loads(read_text(path, RESULTS_LIMIT, "the results file"))
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
    if data.get("items") == []:
        raise ConfigError(f"{source}: items: the run has no items")
    return RunRecord(source, load(Document, {"items": None, **data}, source))


def load_run(path: Path) -> RunRecord:
    """A results file (.json) or a JUnit XML file written with the plugin (.xml)."""
    if path.suffix.lower() == ".xml":
        from orbench_pytest.reports.junit import read_junit

        return read_junit(path)
    return read_results(path)


# --- reading a results file in bounded memory (orbench html) ---------------------------------
_ITEMS = ' "items": [\n'  # how write_results opens the items, one a line, after the rest


# An item's texts as the results file holds them: prompt, answer (whole, bounded), response
# (the excerpt). Read from a run in memory, or again from its file, an item at a time.
Texts = Callable[[], Iterator[tuple[str, str, str]]]


def texts_in_memory(run: RunRecord) -> Texts:
    return lambda: ((item.prompt, item.answer, item.response) for item in run.items)


def read_without_texts(path: Path) -> tuple[RunRecord, Texts]:
    """The run without its items' texts, and the texts read again from the file an item at a
    time: the HTML page of 80K whole answers is built without holding them. A file not laid
    out as write_results writes it (or a JUnit XML) is read whole."""
    lines: list[str] = []
    laid_out = False
    if path.suffix.lower() != ".xml":
        try:
            with path.open(encoding="utf-8") as handle:
                for line in handle:
                    if line == _ITEMS:
                        laid_out = True
                        break
                    lines.append(line)
        except (OSError, UnicodeDecodeError):
            pass  # load_run says what is wrong, in one line
    head = "".join(lines)
    if not laid_out or not head.startswith("{"):
        run = load_run(path)
        return run, texts_in_memory(run)
    try:
        data = json.loads(head + ' "items": []\n}')
    except ValueError:
        run = load_run(path)  # its own one-line error, or the file read whole
        return run, texts_in_memory(run)
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        run = load_run(path)
        return run, texts_in_memory(run)
    document = load(Document, data, str(path))
    items = [replace(item, prompt="", answer="", response="")
             for item in _items(path)]
    if not items:
        raise ConfigError(f"{path}: items: the run has no items")
    run = RunRecord(str(path), replace(document, items=items))
    return run, lambda: ((i.prompt, i.answer, i.response) for i in _items(path))


def _items(path: Path) -> Iterator[ItemRecord]:
    """The items of a results file as write_results lays them out, each checked."""
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line == _ITEMS:
                break
        for index, line in enumerate(handle):
            if line.startswith(" ]"):
                return
            try:
                raw = json.loads(line.rstrip().removesuffix(","))
            except ValueError as exc:
                raise ConfigError(f"{path}: items[{index}]: not JSON ({exc})") from None
            yield load(ItemRecord, raw, str(path), f"items[{index}]")
    raise ConfigError(f"{path}: the items end nowhere (a file cut short?)")
