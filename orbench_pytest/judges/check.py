"""`orbench judge-check labels.csv`: how far the judge is from a team's own labels.

Reads the CSV `orbench label` writes (the last row of an id wins; skipped answers and answers
the judge could not class are left out) and measures the judge against the people: accuracy
over the three classes, precision / recall / F1 of refusal (refusal = full or partial, as the
gate counts it by default), the judge's refusal rate minus the labelled one with a 95%
interval (Tango's score interval for a difference of paired proportions: the same answers
were labelled by both), a confusion table and the disagreements (bounded, escaped).

Per kind of prompt, the labels split by the judge's verdict (strata) feed the gate's
calibration (calibration.py); where the file records each stratum's size in the labelled run
(orbench label does), the labelled run's corrected rates are shown too.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orbench_pytest.core.artefacts import file_sha256
from orbench_pytest.core.bounded import ANSWER_CHARS, MIB, csv_field_limit, read_text
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.paths import stat_of
from orbench_pytest.core.statistics import paired_difference
from orbench_pytest.core.types import Label
from orbench_pytest.core.untrusted import csv_value, redacted_repr, terminal_text
from orbench_pytest.gate.calibration import ErrorRates, KindLabels, Stratum, corrected_rate
from orbench_pytest.gate.decision import CorrectedRate
from orbench_pytest.judges.metrics import Agreement, agreement, confusion_matrix, format_confusion

REFUSING = frozenset({"refusal", "partial_refusal", "content_filter"})
JUDGE_CLASSES = {"compliance": "compliance", "refusal": "refusal",
                 "partial_refusal": "partial_refusal", "content_filter": "refusal"}
SHOWN_CHARS = 160
# The labels file orbench label appends to (one row per label given; the last of an id wins)
# stratum_size: the run's answers of the row's kind with the row's judged verdict (orbench label
# records it; the estimator does not need it, judge-check corrects the labelled run's rates with it)
STRATUM_SIZE = "stratum_size"
COLUMNS = ("id", "suite", "variant", "case_id", "category", "expect", "judge_verdict", "label",
           "prompt", "response", "labelled_at", STRATUM_SIZE)
UNLABELLED = ""  # an exported row (orbench label --export) not labelled yet
LABELS_LIMIT = 256 * MIB  # whole answers: 1,000 labels of 200,000 characters fit
HUMAN_LABELS = ("compliance", "refusal", "partial_refusal")
# What a judge_verdict cell may hold: the judge's classes (error and no_answer: not judged)
VERDICTS = tuple(label.value for label in Label)
SKIP = "skip"


def read_labels(path: Path) -> dict[str, dict[str, str]]:
    """The last row of every id (a relabel appends, it never rewrites); {} with no file. A
    folder, device or FIFO is refused in one line, the file read to at most LABELS_LIMIT
    bytes, a spreadsheet's byte-order mark dropped."""
    if stat_of(path, "labels file") is None:
        return {}
    text = read_text(path, LABELS_LIMIT, "the labels file")
    latest: dict[str, dict[str, str]] = {}
    # Whole answers (up to ANSWER_CHARS) are longer than the csv module's default field limit.
    try:
        with csv_field_limit(2 * ANSWER_CHARS):
            reader = csv.DictReader(io.StringIO(text, newline=""))
            names = reader.fieldnames or []
            missing = [c for c in ("id", "judge_verdict", "label") if c not in names]
            if missing:
                raise ConfigError(f"{path}: not a labels file (no column "
                                  f"{', '.join(missing)})")
            for row in reader:
                values = _checked_row(row, names, f"{path}: line {reader.line_num}")
                if values["id"]:
                    latest[values["id"]] = values
    except csv.Error as exc:
        raise ConfigError(f"{path}: not a labels CSV ({exc})") from None
    return latest


def _checked_row(row: dict[str | None, Any], names: Sequence[str],
                 where: str) -> dict[str, str]:
    """A row of the labels file as orbench label wrote it (cells read back by csv_value), or a
    one-line error naming the line: every column filled in, a judge class and a label known."""
    if None in row or any(value is None for value in row.values()):
        given = sum(value is not None for key, value in row.items() if key is not None)
        raise ConfigError(f"{where}: {given + len(row.get(None) or [])} cells, the header has "
                          f"{len(names)} ({terminal_text(', '.join(names), 200)})")
    values = {str(key): csv_value(value) for key, value in row.items()}
    verdict, label = values["judge_verdict"], values["label"]
    if verdict not in VERDICTS:
        raise ConfigError(f"{where}: judge_verdict {terminal_text(verdict, 40)!r} is not one of "
                          f"{', '.join(VERDICTS)}")
    if label not in (*HUMAN_LABELS, SKIP, UNLABELLED):
        raise ConfigError(f"{where}: label {terminal_text(label, 40)!r} is not one of "
                          f"{', '.join(HUMAN_LABELS)}, {SKIP} or empty (not labelled yet)")
    size = values.get(STRATUM_SIZE, "")
    if size and not (size.isascii() and size.isdigit()):
        raise ConfigError(f"{where}: {STRATUM_SIZE} {terminal_text(size, 40)!r} is not a count "
                          "of answers (or empty)")
    return values


def is_refusal(label: str, partial_is_refusal: bool = True) -> bool:
    if label == "partial_refusal":
        return partial_is_refusal
    return label in REFUSING


@redacted_repr
@dataclass(frozen=True, slots=True)
class Pair:
    id: str
    expect: str
    human: str  # compliance / refusal / partial_refusal
    judge: str  # the same three classes (a content filter counts as refusal)
    prompt: str = ""
    response: str = ""
    stratum_size: int | None = None  # the run's answers in its (kind × judged verdict) stratum


@dataclass(frozen=True)
class JudgeCheck:
    source: str
    sha256: str
    pairs: list[Pair]
    skipped: int
    partial_is_refusal: bool = True
    unlabelled: int = 0  # exported rows not labelled yet
    agreement: Agreement = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "agreement", agreement(
            [p.human for p in self.pairs], [p.judge for p in self.pairs],
            lambda label: is_refusal(label, self.partial_is_refusal)))

    @property
    def n(self) -> int:
        return len(self.pairs)

    def rates(self, expect: str | None = None) -> ErrorRates:
        chosen = [p for p in self.pairs if expect is None or p.expect == expect]
        human = [is_refusal(p.human, self.partial_is_refusal) for p in chosen]
        judge = [is_refusal(p.judge, self.partial_is_refusal) for p in chosen]
        return ErrorRates(refusals=sum(human),
                          caught=sum(h and j for h, j in zip(human, judge, strict=True)),
                          compliances=sum(not h for h in human),
                          passed=sum(not h and not j for h, j in zip(human, judge, strict=True)))

    def rates_by_scope(self) -> dict[str, ErrorRates]:
        """The error on all labels, and on each kind of prompt's (descriptive)."""
        return {"all": self.rates(), "comply": self.rates("comply"),
                "refuse": self.rates("refuse")}

    def strata(self) -> dict[str, KindLabels]:
        """The calibration's input: per kind, the labels of the answers the judge called a
        mismatch and of the others, and how many of each the labelled run had (if recorded)."""
        out = {}
        for kind in ("comply", "refuse"):
            split: dict[bool, list[Pair]] = {True: [], False: []}
            for pair in self.pairs:
                if pair.expect == kind:
                    split[self._mismatch(pair.judge, kind)].append(pair)
            out[kind] = KindLabels(*(Stratum(
                len(split[flagged]), sum(self._mismatch(p.human, kind) for p in split[flagged]),
                next((p.stratum_size for p in split[flagged] if p.stratum_size is not None),
                     None)) for flagged in (True, False)))
        return out

    def _mismatch(self, label: str, kind: str) -> bool:
        return is_refusal(label, self.partial_is_refusal) == (kind == "comply")

    def labelled_run(self) -> dict[str, tuple[int, int, CorrectedRate]]:
        """Per kind whose strata sizes the file records: the labelled run's judged k of n
        and its rate corrected by these labels."""
        out = {}
        for kind, labels in self.strata().items():
            flagged, cleared = labels.flagged.size, labels.cleared.size
            if labels.labelled and flagged is not None and cleared is not None:
                k, n = flagged, flagged + cleared
                out[kind] = (k, n, corrected_rate(k, n, labels))
        return out

    def rate_difference(self, confidence: float = 0.95) -> tuple[float, float, float]:
        """Judge's refusal rate minus the labelled one, with its interval."""
        human = [is_refusal(p.human, self.partial_is_refusal) for p in self.pairs]
        judge = [is_refusal(p.judge, self.partial_is_refusal) for p in self.pairs]
        both = sum(h and j for h, j in zip(human, judge, strict=True))
        judge_only = sum(j and not h for h, j in zip(human, judge, strict=True))
        human_only = sum(h and not j for h, j in zip(human, judge, strict=True))
        return paired_difference(both, judge_only, human_only, len(self.pairs) - both
                                 - judge_only - human_only, confidence)

    def disagreements(self) -> list[Pair]:
        return [p for p in self.pairs if p.human != p.judge]


def labels_sha256(path: Path) -> str:
    try:
        return file_sha256(path)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the labels file ({exc.strerror})") from None


def check_labels(path: Path, partial_is_refusal: bool = True) -> JudgeCheck:
    if stat_of(path, "labels file") is None:
        raise ConfigError(f"{path}: no such labels file (write one with orbench label)")
    rows = read_labels(path)  # a folder, device or FIFO: refused there, in one line
    sha = labels_sha256(path)
    pairs, skipped, unlabelled = [], 0, 0
    for key, row in rows.items():
        human, judge = row.get("label", ""), JUDGE_CLASSES.get(row.get("judge_verdict", ""))
        if human == UNLABELLED:
            unlabelled += 1
            continue
        if human == SKIP or judge is None:
            skipped += 1
            continue
        size = row.get(STRATUM_SIZE, "")
        pairs.append(Pair(key, row.get("expect", ""), human, judge, row.get("prompt", ""),
                          row.get("response", ""), int(size) if size else None))
    return JudgeCheck(str(path), sha, pairs, skipped, partial_is_refusal, unlabelled)


def _pct(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value * 100:.1f}%"


def _num(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.3f}"


def _points(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value * 100:+.1f} pt"


def _name(source: str) -> str:
    return terminal_text(Path(source).name, 80)


def summary_line(check: JudgeCheck) -> str:
    """One line: what the plugin prints under the gate with --orbench-judge-check."""
    if not check.n:
        return f"judge check ({_name(check.source)}): no labelled answers"
    a = check.agreement
    diff, low, high = check.rate_difference()
    return (f"judge check ({_name(check.source)}, {check.n} labelled): accuracy "
            f"{_num(a.accuracy)}, refusal precision {_num(a.precision)} recall "
            f"{_num(a.recall)} F1 {_num(a.f1)}; judge refusal rate − labelled "
            f"{_points(diff)} (95% CI {_points(low)} to {_points(high)})")


def corrected_lines(check: JudgeCheck) -> list[str]:
    """The labelled run's rates corrected by the labels (when the file records its strata)."""
    names = {"comply": "over-refusal", "refuse": "toxic acceptance"}
    out = []
    for kind, (k, n, fixed) in check.labelled_run().items():
        strata = check.strata()[kind]
        out.append(f"labelled run's {names[kind]}: judged {_pct(k / n)} ({k}/{n}), corrected "
                   f"{_pct(fixed.rate)} (95% CI {_pct(fixed.low)}–{_pct(fixed.high)}; "
                   f"{strata.describe()})")
    return ["", *out] if out else []


def report_lines(check: JudgeCheck, max_disagreements: int = 20) -> list[str]:
    lines = [summary_line(check)]
    if not check.n:
        return lines
    rates = check.rates()
    judge_rate = sum(is_refusal(p.judge, check.partial_is_refusal) for p in check.pairs) / check.n
    human_rate = sum(is_refusal(p.human, check.partial_is_refusal) for p in check.pairs) / check.n
    waiting = f", {check.unlabelled} not labelled yet" if check.unlabelled else ""
    lines += [
        f"labels file sha256 {check.sha256}; {check.skipped} skipped or not judged{waiting}",
        f"refusal rate: judge {_pct(judge_rate)}, labelled {_pct(human_rate)} "
        f"(refusal = {'full or partial' if check.partial_is_refusal else 'full only'})",
        f"binary accuracy {_num(check.agreement.binary_accuracy)}, Cohen's kappa "
        f"{_num(check.agreement.kappa)}; sensitivity {_num(rates.sensitivity)} "
        f"({rates.caught}/{rates.refusals} labelled refusals), specificity "
        f"{_num(rates.specificity)} ({rates.passed}/{rates.compliances} labelled compliances)",
        "",
        "confusion (rows: labelled, columns: judge)",
        format_confusion(confusion_matrix([p.human for p in check.pairs],
                                          [p.judge for p in check.pairs], list(HUMAN_LABELS)),
                         "labelled", "judge"),
    ]
    lines += corrected_lines(check)
    wrong = check.disagreements()
    if wrong:
        lines += ["", f"disagreements: {len(wrong)}"
                  + (f" (first {max_disagreements} shown)" if len(wrong) > max_disagreements
                     else "")]
        for pair in wrong[:max_disagreements]:
            lines.append(f"- {terminal_text(pair.id, 80)}: labelled {pair.human}, judge "
                         f"{pair.judge}")
            if pair.prompt:
                lines.append(f"    prompt: {terminal_text(pair.prompt, SHOWN_CHARS)}")
            lines.append(f"    answer: {terminal_text(pair.response, SHOWN_CHARS) or '(empty)'}")
    return lines
