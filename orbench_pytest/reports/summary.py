"""The gate table as text for the terminal summary (pure formatting)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from orbench_pytest.core.conversation import Preamble
from orbench_pytest.core.ids import key_label
from orbench_pytest.core.types import Label
from orbench_pytest.core.untrusted import terminal_line, terminal_text
from orbench_pytest.fetch.costs import Prices, RunCost, Spending
from orbench_pytest.fetch.engine import FetchReport
from orbench_pytest.fetch.freshness import format_age
from orbench_pytest.gate.baseline import Comparison
from orbench_pytest.gate.decision import (
    OVER_REFUSAL,
    TOXIC_ACCEPTANCE,
    Gate,
    GroupRow,
    ItemResult,
    RateCheck,
    rate_with_interval,
    row_rate,
)
from orbench_pytest.gate.samples import times
from orbench_pytest.judges.judge import RoutingStats
from orbench_pytest.judges.verdicts import Verdicts

if TYPE_CHECKING:
    from orbench_pytest.reports.document import Agreement
    from orbench_pytest.run.rewording_search import SearchOutcome

HEADERS = ("group", "n", "refused", "errors", "over-refusal (95% CI)", "max",
           "toxic acceptance (95% CI)", "max", "verdict")
# --orbench-samples: a prompt is refused or not by its suite's refuse_at rule over its answers,
# while a rate is the mean of the prompts' fractions; each header says which it is.
SAMPLED_HEADERS = ("group", "prompts", "refused by refuse_at", "errors",
                   "over-refusal, mean of prompts (95% CI)", "max",
                   "toxic acceptance, mean of prompts (95% CI)", "max", "verdict")


def _rate(row: GroupRow, name: str) -> tuple[str, str]:
    found = row_rate(row, name)  # an ungated row's rate and interval, as the gate's
    if found is None:
        return "—", "—"
    rate, (low, high) = found
    check: RateCheck | None = row.check(name)
    if check is not None:
        rate, (low, high) = check.rate or 0.0, check.interval
    limit = f"{check.limit * 100:.1f}%" if check else "—"
    shown = rate_with_interval(rate, low, high, width=5)
    if check is not None and check.corrected is not None:  # judge_calibration
        shown += f" raw {(check.raw_rate or 0.0) * 100:.1f}%"
    return shown, limit


def table_rows(gate: Gate) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for row in gate.rows.values():
        over, over_max = _rate(row, OVER_REFUSAL)
        toxic, toxic_max = _rate(row, TOXIC_ACCEPTANCE)
        label = terminal_line(row.label if row.category is None else f"  {row.category}")
        rows.append((label, str(row.n), str(row.refusals), str(row.errors), over, over_max,
                     toxic, toxic_max, shown_verdict(row.verdict)))
    return rows


def table_lines(gate: Gate) -> list[str]:
    sampled = any(row.sampled for row in gate.rows.values())
    return aligned_lines(SAMPLED_HEADERS if sampled else HEADERS, table_rows(gate))


def aligned_lines(headers: tuple[str, ...], body: Sequence[tuple[str, ...]],
                  left: int = 1) -> list[str]:
    """Text columns (the first `left`) flush left, numbers flush right."""
    rows = [headers, *body]
    widths = [max(len(r[i]) for r in rows) for i in range(len(headers))]
    lines = []
    for index, row in enumerate(rows):
        cells = [cell.ljust(w) if i < left else cell.rjust(w)
                 for i, (cell, w) in enumerate(zip(row, widths, strict=True))]
        lines.append("  ".join(cells).rstrip())
        if index == 0:
            lines.append("  ".join("-" * w for w in widths))
    return lines


def cache_line(report: FetchReport, verdicts: Verdicts, max_age_s: float | None) -> str | None:
    """How much of the run the cache answered, how old that is, and what it asked again."""
    parts = []
    if report.cache_hits:
        ages = [a.age_s for a in verdicts.answers.values() if a.cached and a.age_s is not None]
        oldest = f"the oldest {format_age(max(ages))} old" if ages else "of unknown age"
        parts.append(f"{report.cache_hits} answers from the cache, {oldest} "
                     f"(max age {format_age(max_age_s)})")
    if report.expired:
        parts.append(f"{report.expired} older than the max age asked again")
    if report.stale:
        parts.append(f"{report.stale} asked again: the system_fingerprint changed")
    return "cache: " + "; ".join(parts) if parts else None


def run_cost(report: FetchReport, price_input: float | None = None,
             price_output: float | None = None,
             rewordings: SearchOutcome | None = None) -> RunCost:
    """What the run cost: the tokens of the answers it asked, its requests by kind (the
    suites' prompts, the LLM judge's, the backend check and the rewordings search's), retries
    and time, and with prices given, dollars."""
    spent, retries, wall_s = Spending(), report.retries, report.wall_s
    spent.add(report.spent)
    if rewordings is not None:
        spent.add(rewordings.spent)
        retries, wall_s = retries + rewordings.retries, wall_s + rewordings.wall_s
    return RunCost.of(spent, retries, wall_s, Prices(price_input, price_output),
                      cached=report.cache_hits)


def judged_line(verdicts: Verdicts) -> str | None:
    """How many answers the judge read, how many verdicts the cache gave, and the CPU cost."""
    if not verdicts.judged and not verdicts.judgments_cached:
        return None
    return (f"judged: {verdicts.judged} answers, {verdicts.judgments_cached} verdicts from the "
            f"cache, judge CPU {verdicts.judge_cpu_s:.1f}s")


def shown_verdict(verdict: str) -> str:
    """A row's verdict in the terminal: a ratchet-allowed row is marked, never a plain pass."""
    return "⚠️ ratchet" if verdict == "ratchet" else verdict


def verdict_line(gate: Gate, preamble: Preamble | None = None) -> str:
    """The gate line: its verdict, what a ratchet allowed, a partial selection, disputes, and
    the preamble every prompt was asked after."""
    notes = gate.ratchet_notes()
    extra = gate.notes()  # none that a failure already names
    if preamble is not None:
        extra.append(terminal_text(f"after preamble {preamble.path} ({len(preamble.turns)} "
                                   f"turns, sha256 {preamble.sha256[:12]})"))
    if gate.nothing_gated:
        return "orbench gate: NOTHING GATED — " + "; ".join(gate.partial)
    if gate.passed:
        head = "orbench gate: PASSED ⚠️ by ratchet" if notes else "orbench gate: PASSED"
        return f"{head} — {'; '.join(notes + extra)}" if notes or extra else head
    return "orbench gate: FAILED — " + "; ".join(gate.failures() + notes + extra)


VARIANT_HEADERS = ("suite", "variant", "n", "errors", "over-refusal (95% CI)",
                   "toxic acceptance (95% CI)", "verdict")


def variant_lines(gate: Gate) -> list[str]:
    """System-prompt / parameter sweeps: one line per suite and variant, rates side by side."""
    rows = [row for row in gate.rows.values() if row.category is None]
    if len({row.variant for row in rows}) < 2:
        return []
    body: list[tuple[str, ...]] = []
    for row in rows:
        body.append((row.suite, row.variant or "(default)", str(row.n), str(row.errors),
                     _rate(row, OVER_REFUSAL)[0].strip(), _rate(row, TOXIC_ACCEPTANCE)[0].strip(),
                     shown_verdict(row.verdict)))
    return ["variants:", *aligned_lines(VARIANT_HEADERS, body, left=2)]


def flaky_lines(items: Sequence[tuple[str, ItemResult]], gate: Gate,
                limit: int = 10) -> list[str]:
    """--orbench-samples: prompts refused some of the times asked, counted per suite and
    category, the first `limit` named (bounded output, whatever the run's size)."""
    flaky = [(label, item) for label, item in items if item.flaky]
    if not any(row.sampled for row in gate.rows.values()):
        return []
    lines = [f"flaky prompts (refused some of the times asked): {len(flaky)}"]
    for row in gate.rows.values():
        if row.category is None and row.flaky:
            parts = [f"{r.category} {r.flaky}" for r in gate.rows.values()
                     if r.category is not None and (r.suite, r.variant) == (row.suite, row.variant)
                     and r.flaky]
            lines.append(f"  {row.label}: {row.flaky} ({', '.join(parts)})")
    for label, item in flaky[:limit]:
        assert item.refusals is not None
        lines.append(f"  {label}: {times(item.refusals, item.answered)} "
                     f"(expected {item.expect})")
    if len(flaky) > limit:
        lines.append(f"  … and {len(flaky) - limit} more (every one in the results file)")
    return lines


def baseline_lines(comparison: Comparison, gate: Gate, limit: int = 10) -> list[str]:
    """Against --orbench-baseline: how many paired, the test per suite, the ids that moved."""
    lines = [f"baseline {comparison.source}: {comparison.describe()}"]
    for row in gate.rows.values():
        if row.regression is not None:
            verdict = "pass" if row.regression.passed else "FAIL"
            lines.append(f"  {row.label}: {row.regression.describe()} — {verdict}")
    for title, keys in (("regressions", comparison.regressions), ("fixed", comparison.fixed)):
        if keys:
            shown = ", ".join(key_label(key) for key in keys[:limit])
            more = f" … and {len(keys) - limit} more" if len(keys) > limit else ""
            lines.append(f"  {title} ({len(keys)}): {shown}{more}")
    return lines


AGREEMENT_LABELS = (Label.COMPLIANCE, Label.REFUSAL, Label.PARTIAL_REFUSAL)


def _labels_of(stats: RoutingStats) -> list[Label]:
    """The three classes always, in order; any other label seen (e.g. an answer of markdown
    alone: no answer) after them."""
    seen = dict.fromkeys(label for pair in stats.pairs for label in pair)
    return [*AGREEMENT_LABELS, *(label for label in seen if label not in AGREEMENT_LABELS)]


def judge_lines(stats: RoutingStats | None, ask_always: bool) -> list[str]:
    """llm / hybrid: where the verdicts came from, and keyword against LLM where both judged."""
    if stats is None or stats.total == 0:
        return []
    if ask_always:
        lines = [f"judge: the LLM judged {stats.llm} answers ({stats.llm_errors} unreadable "
                 "or unanswered: errors)"]
    else:
        lines = [f"judge routing: keyword decided {stats.keyword} (rules and classifier "
                 f"agreed), the LLM {stats.llm} where they disagreed "
                 f"({stats.llm_errors} unreadable or unanswered: errors)"]
    if stats.pairs:
        from orbench_pytest.judges.metrics import confusion_matrix, format_confusion

        keyword = [k for k, _ in stats.pairs]
        llm = [v for _, v in stats.pairs]
        agree = sum(k == v for k, v in stats.pairs)
        lines.append(f"keyword vs LLM judge on the {len(stats.pairs)} answers both judged: "
                     f"{agree} agree (rows keyword, columns LLM)")
        counts = confusion_matrix(keyword, llm, _labels_of(stats))
        lines.extend("  " + line for line in
                     format_confusion(counts, "keyword", "llm").splitlines())
    return lines


def judge_agreement(stats: RoutingStats | None) -> Agreement | None:
    """The same for the results file: counts[keyword][llm] by label value."""
    from orbench_pytest.reports.document import Agreement  # the results file's, loaded with it

    if stats is None or stats.total == 0:
        return None
    from orbench_pytest.judges.metrics import confusion_matrix  # an LLM judge's run only

    counts = confusion_matrix([k for k, _ in stats.pairs], [v for _, v in stats.pairs],
                              _labels_of(stats))
    return Agreement(stats.keyword, stats.llm, stats.llm_errors, stats.disagreements,
                     {k.value: {v.value: n for v, n in row.items()} for k, row in counts.items()})
