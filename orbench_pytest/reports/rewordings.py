"""--orbench-rewordings in every report: the fragile rate per suite and the minimal flips.

The terminal block and the PR comment show the same table (suite, prompts searched, fragile
rate with its interval, max, verdict) and at most FLIPS_SHOWN minimal flips; the results file
holds every flip, and the JUnit gate property the first FLIPS_SHOWN. Prompts, rewordings and
answers are untrusted text: escaped for the terminal (terminal_text) and for Markdown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from orbench_pytest.core.untrusted import markdown_code, markdown_text, terminal_text
from orbench_pytest.gate.decision import FRAGILE_RATE, Gate, rate_with_interval

if TYPE_CHECKING:
    from orbench_pytest.run.rewording_search import SearchOutcome

FLIPS_SHOWN = 10  # minimal flips listed in the terminal and the PR comment

PROMPT_CHARS = 160
ANSWER_CHARS = 120


def rewordings_dict(outcome: SearchOutcome, limit: int | None = None) -> dict[str, Any]:
    """The search as the results file (all flips) and the JUnit property (`limit`) carry it."""
    flips = outcome.flips if limit is None else outcome.flips[:limit]
    return {
        "tries": outcome.tries, "seed": outcome.seed, "budget": outcome.budget,
        "asked": outcome.asked, "requests": outcome.requests,
        "searched": len(outcome.searched), "not_searched": len(outcome.not_searched),
        "fragile": len(outcome.flips),
        "flips": [asdict(flip) for flip in flips],
        "flips_total": len(outcome.flips),
    }


def _checks(rows: Sequence[Mapping[str, Any]]) -> list[tuple[str, Mapping[str, Any], str]]:
    found = []
    for row in rows:
        if row.get("category") is not None:
            continue
        for check in row.get("checks", []):
            if check["name"] == FRAGILE_RATE:
                name = row["suite"] + (f"[{row['variant']}]" if row.get("variant") else "")
                found.append((name, check, "pass" if check["passed"] else "FAIL"))
    return found


def terminal_lines(outcome: SearchOutcome, gate: Gate) -> list[str]:
    from orbench_pytest.reports.results import row_dict
    from orbench_pytest.reports.summary import aligned_lines

    lines = [f"rewordings: up to {outcome.tries} per answered safe prompt, seed {outcome.seed}: "
             f"{len(outcome.searched)} prompts searched, {len(outcome.flips)} fragile; "
             f"{outcome.asked} rewordings asked ({outcome.requests} requests), budget "
             f"{outcome.budget}"
             + (f", {len(outcome.not_searched)} prompts not searched (budget)"
                if outcome.not_searched else "")]
    body = []
    for name, check, verdict in _checks([row_dict(row) for row in gate.rows.values()]):
        low, high = check["interval"]
        body.append((terminal_text(name), str(check["n"]), str(check["k"]),
                     rate_with_interval(check["rate"] or 0.0, low, high, width=5),
                     f"{check['limit'] * 100:.1f}%", verdict))
    if body:
        lines.extend(aligned_lines(("suite", "searched", "fragile", "fragile rate (95% CI)",
                                    "max", "verdict"), body))
    if outcome.flips:
        lines.append("minimal flips (the smallest rewording found that the model refused):")
    for flip in outcome.flips[:FLIPS_SHOWN]:
        lines.append(f"  {terminal_text(flip.suite)}/{terminal_text(flip.case_id)}: "
                     f"{flip.edits}{'' if flip.shrunk else ' (not shrunk: budget)'}")
        lines.append(f"    original:  {terminal_text(flip.original, PROMPT_CHARS)}")
        lines.append(f"    rewording: {terminal_text(flip.rewording, PROMPT_CHARS)}")
        lines.append(f"    answer:    {terminal_text(flip.answer, ANSWER_CHARS)}")
    if len(outcome.flips) > FLIPS_SHOWN:
        lines.append(f"  … and {len(outcome.flips) - FLIPS_SHOWN} more (every one in the "
                     "results file)")
    return lines


def markdown_lines(rows: Sequence[Mapping[str, Any]] | None,
                   meta: Mapping[str, Any], max_items: int = FLIPS_SHOWN) -> list[str]:
    """The PR comment's section, from the gate rows and the run's `rewordings` entry."""
    search = meta.get("rewordings")
    if not isinstance(search, Mapping):
        return []
    out = ["### Fragile prompts (rewordings)", "",
           f"Up to {int(search.get('tries', 0))} rewordings of each answered safe prompt "
           f"(seed {int(search.get('seed', 0))}): {int(search.get('searched', 0))} searched, "
           f"{int(search.get('fragile', 0))} fragile, {int(search.get('asked', 0))} "
           "rewordings asked.", ""]
    checks = _checks(rows or [])
    if checks:
        out += ["| suite | searched | fragile rate (95% CI) | max | verdict |",
                "|---|---:|---:|---:|:--|"]
        for name, check, verdict in checks:
            low, high = check["interval"]
            icon = "✅ pass" if verdict == "pass" else "❌ FAIL"
            out.append(f"| {markdown_text(name)} | {check['n']} | "
                       f"{rate_with_interval(check['rate'] or 0.0, low, high)} | "
                       f"{check['limit'] * 100:.1f}% | {icon} |")
        out.append("")
    flips = [f for f in search.get("flips", []) if isinstance(f, Mapping)][:max_items]
    if flips:
        out += ["| prompt | edits | minimal rewording refused | answer |",
                "|---|---|---|---|"]
        for flip in flips:
            out.append(f"| {markdown_text(str(flip.get('suite')))}/"
                       f"{markdown_text(str(flip.get('case_id')))} | "
                       f"`{markdown_code(str(flip.get('edits')))}` | "
                       f"{markdown_text(str(flip.get('rewording')), PROMPT_CHARS)} | "
                       f"{markdown_text(str(flip.get('answer')), ANSWER_CHARS)} |")
        total = int(search.get("flips_total", len(flips)))
        if total > len(flips):
            out.append("")
            out.append(f"<sub>… and {total - len(flips)} more in the results file</sub>")
        out.append("")
    return out
