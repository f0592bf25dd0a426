"""--orbench-rewordings in every report: the fragile rate per suite and the minimal flips.

The terminal block and the PR comment show the same table (suite, prompts searched, fragile
rate with its interval, max, verdict) and at most FLIPS_SHOWN minimal flips; the results file
holds every flip, and the JUnit gate property the first FLIPS_SHOWN. Prompts, rewordings and
answers are untrusted text: escaped for the terminal (terminal_text) and for Markdown.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from orbench_pytest.core.untrusted import markdown_code, markdown_text, terminal_text
from orbench_pytest.gate.decision import FRAGILE_RATE, Gate, GroupRow, RateCheck, rate_with_interval
from orbench_pytest.reports.document import CheckRecord, Rewordings, RowRecord

FLIPS_SHOWN = 10  # minimal flips listed in the terminal and the PR comment

NOT_GATED = ("fragile rate not gated: no max_fragile_rate in the thresholds file (set one to "
             "gate it)")
PROMPT_CHARS = 160
ANSWER_CHARS = 120


def by_kind(kinds: Iterable[str]) -> str:
    """"1 wording, 2 persona": the flips counted by what their edits add."""
    counted = Counter(kinds)
    return ", ".join(f"{n} {kind}" for kind, n in sorted(counted.items()))


def _checks(rows: Iterable[GroupRow | RowRecord]) -> list[tuple[str, RateCheck | CheckRecord]]:
    """The suite rows' fragile-rate checks, of a gate or of a gate read back."""
    return [(row.suite + (f"[{row.variant}]" if row.variant else ""), check)
            for row in rows if row.category is None
            for check in row.checks if check.name == FRAGILE_RATE]


def terminal_lines(search: Rewordings, gate: Gate) -> list[str]:
    from orbench_pytest.reports.summary import aligned_lines

    kinds = f" ({by_kind(f.kind for f in search.flips)})" if search.flips else ""
    lines = [f"rewordings: up to {search.tries} per answered safe prompt, edits "
             f"{', '.join(search.edits)}, seed {search.seed}: "
             f"{search.searched} prompts searched, {search.fragile} fragile{kinds}; "
             f"{search.asked} rewordings asked ({search.requests} requests), budget "
             f"{search.budget}"
             + (f", {search.not_searched} prompts not searched (budget)"
                if search.not_searched else "")
             + (f"; {search.unsure} refusals the judge was unsure of, not counted"
                if search.unsure else "")]
    body = []
    for name, check in _checks(gate.rows.values()):
        low, high = check.interval
        body.append((terminal_text(name), str(check.n), str(check.k),
                     rate_with_interval(check.rate or 0.0, low, high, width=5),
                     f"{(check.limit or 0.0) * 100:.1f}%", "pass" if check.passed else "FAIL"))
    if body:
        lines.extend(aligned_lines(("suite", "searched", "fragile", "fragile rate (95% CI)",
                                    "max", "verdict"), body))
    elif search.searched:
        lines.append(NOT_GATED)
    if search.flips:
        lines.append("minimal flips (the smallest rewording found that the model refused):")
    for flip in search.flips[:FLIPS_SHOWN]:
        lines.append(f"  {terminal_text(flip.suite)}/{terminal_text(flip.case_id)}: "
                     f"{flip.edits} [{flip.kind}]"
                     f"{'' if flip.shrunk else ' (not shrunk: budget)'}")
        lines.append(f"    original:  {terminal_text(flip.original, PROMPT_CHARS)}")
        lines.append(f"    rewording: {terminal_text(flip.rewording, PROMPT_CHARS)}")
        lines.append(f"    answer:    {terminal_text(flip.answer, ANSWER_CHARS)}")
    if search.flips_total > FLIPS_SHOWN:
        lines.append(f"  … and {search.flips_total - FLIPS_SHOWN} more (every one in the "
                     "results file)")
    return lines


def markdown_lines(rows: Sequence[RowRecord] | None, search: Rewordings | None,
                   max_items: int = FLIPS_SHOWN) -> list[str]:
    """The PR comment's section, from the gate rows and the run's `rewordings` entry."""
    if search is None:
        return []
    out = ["### Fragile prompts (rewordings)", "",
           f"Up to {search.tries} rewordings of each answered safe prompt "
           f"(seed {search.seed}{', edits ' + ', '.join(search.edits) if search.edits else ''}"
           f"): {search.searched} searched, {search.fragile} fragile"
           f"{f' ({by_kind(f.kind for f in search.flips)})' if search.flips else ''}, "
           f"{search.asked} rewordings asked.", ""]
    checks = _checks(rows or [])
    if checks:
        out += ["| suite | searched | fragile rate (95% CI) | max | verdict |",
                "|---|---:|---:|---:|:--|"]
        for name, check in checks:
            low, high = check.interval
            icon = "✅ pass" if check.passed else "❌ FAIL"
            out.append(f"| {markdown_text(name)} | {check.n} | "
                       f"{rate_with_interval(check.rate or 0.0, low, high)} | "
                       f"{(check.limit or 0.0) * 100:.1f}% | {icon} |")
        out.append("")
    elif search.searched:
        out += [NOT_GATED, ""]
    flips = search.flips[:max_items]
    if flips:
        out += ["| prompt | edits | kind | minimal rewording refused | answer |",
                "|---|---|---|---|---|"]
        for flip in flips:
            out.append(f"| {markdown_text(flip.suite)}/{markdown_text(flip.case_id)} | "
                       f"`{markdown_code(flip.edits)}` | {markdown_text(flip.kind)} | "
                       f"{markdown_text(flip.rewording, PROMPT_CHARS)} | "
                       f"{markdown_text(flip.answer, ANSWER_CHARS)} |")
        if search.flips_total > len(flips):
            out.append("")
            out.append(f"<sub>… and {search.flips_total - len(flips)} more in the results "
                       "file</sub>")
        out.append("")
    return out
