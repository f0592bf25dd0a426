"""`orbench report`: a Markdown summary of a run for a pull-request comment or a step summary.

Input is a run read back (records.RunRecord), from pytest's JUnit XML (junit.py) or an
orbench-results.json (results.py): the gate rows as the run decided them, and every item.

Sized for a PR comment: long lists are cut and point at the artefact; toxic prompts answered
show the prompt's start and the judge's class, never the answer itself.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlsplit

from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.ids import key_label
from orbench_pytest.core.statistics import wilson_interval
from orbench_pytest.core.untrusted import clip, markdown_code, markdown_text, terminal_text
from orbench_pytest.gate.baseline import Baseline, Comparison, Pairing, compare
from orbench_pytest.gate.decision import (
    OVER_REFUSAL,
    TOXIC_ACCEPTANCE,
    GroupKey,
    Outcome,
    baseline_row,
    ratchet_line,
    rate_with_interval,
    tally,
)
from orbench_pytest.gate.samples import times
from orbench_pytest.reports.document import ItemRecord, RegressionRecord, RowRecord, RunRecord
from orbench_pytest.reports.rewordings import markdown_lines

MARKER = "<!-- orbench-report -->"  # lets a workflow find and update its one comment
GITHUB_COMMENT_LIMIT = 65_536
PROMPT_CHARS = 120
RESPONSE_CHARS = 100


# --- the report model -----------------------------------------------------------------------
@dataclass
class Rate:
    k: int
    n: int
    low: float
    high: float
    limit: float | None = None
    passed: bool = True
    mean: float | None = None  # --orbench-samples: the mean per-prompt fraction decides

    @property
    def value(self) -> float:
        if self.mean is not None:
            return self.mean
        return self.k / self.n if self.n else 0.0


@dataclass
class Row:
    suite: str
    variant: str
    category: str | None
    n: int
    errors: int
    over: Rate | None
    toxic: Rate | None
    verdict: str  # pass | FAIL | ratchet | — (no limits known)
    regression: RegressionRecord | None = None
    ratchet: list[str] = field(default_factory=list)  # what a ratchet allowed, per rate

    @property
    def key(self) -> GroupKey:
        return (self.suite, self.variant, self.category)


def report_rows(run: RunRecord) -> list[Row]:
    """The gate as the run decided it when the file carries it, else recomputed without limits."""
    if run.gate_rows is not None:
        return [_row_from_gate(raw) for raw in run.gate_rows]
    rows = []
    for group in tally(item.as_result() for item in run.items).values():
        over = _plain_rate(group.over_refusals, group.n_comply)
        toxic = _plain_rate(group.toxic_accepted, group.n_refuse)
        rows.append(Row(group.suite, group.variant, group.category, group.n, group.errors,
                        over, toxic, "—"))
    return rows


def _plain_rate(k: int, n: int) -> Rate | None:
    if not n:
        return None
    low, high = wilson_interval(k, n)
    return Rate(k, n, low, high)


def _row_from_gate(raw: RowRecord) -> Row:
    """A gate row as the run wrote it; its verdict is the gate's, never worked out again."""
    rates: dict[str, Rate] = {}
    for check in raw.checks:
        if check.name in (OVER_REFUSAL, TOXIC_ACCEPTANCE):
            low, high = check.interval
            mean = check.rate if check.mean_of_prompts else None
            rates[check.name] = Rate(check.k, check.n, low, high, check.limit, check.passed,
                                     mean)
    for name, computed in raw.rates.items():
        if name not in rates:  # an ungated row: the gate's rate all the same
            k, n = ((raw.over_refusals, raw.n_comply) if name == OVER_REFUSAL
                    else (raw.toxic_accepted, raw.n_refuse))
            low, high = computed.interval
            rates[name] = Rate(k, n, low, high, mean=computed.rate)
    over = rates.get(OVER_REFUSAL) or _plain_rate(raw.over_refusals, raw.n_comply)
    toxic = rates.get(TOXIC_ACCEPTANCE) or _plain_rate(raw.toxic_accepted, raw.n_refuse)
    ratchet = [ratchet_line(check.name, check.rate or 0.0, check.limit or 0.0,
                            check.baseline_rate or 0.0)
               for check in raw.checks if check.allowed_by_ratchet]
    return Row(raw.suite, raw.variant, raw.category, raw.n, raw.errors, over, toxic,
               raw.verdict, raw.regression, ratchet)


@dataclass(frozen=True)
class Fact:
    """One fact of a report's header: `value` is untrusted text (a count for "prompts"),
    `detail` plain words after it."""

    name: str
    value: str
    detail: str = ""


@dataclass
class Report:
    run: RunRecord
    rows: list[Row]
    baseline: RunRecord | None = None
    baseline_rows: dict[GroupKey, Row] = field(default_factory=dict)
    comparison: Comparison | None = None
    snapshot: Baseline | None = None  # the baseline's mismatches by item

    @property
    def passed(self) -> bool:
        if self.run.gate_passed is not None:
            return bool(self.run.gate_passed)
        return not any(item.outcome in (Outcome.FAILED, Outcome.ERROR) for item in self.run.items)

    def facts(self) -> list[Fact]:
        """The run's header line, built once for the Markdown comment and the HTML page:
        target, judge, thresholds, prompts, preamble, baseline."""
        run, info = self.run, self.run.run
        facts = [Fact("target", info.target or run.label())]
        facts += [Fact(name, value) for name, value in (("judge", info.judge),
                                                         ("thresholds", info.thresholds)) if value]
        facts.append(Fact("prompts", str(len(run.items))))
        if info.preamble is not None:
            facts.append(Fact("preamble", Path(info.preamble.path).name,
                              f"({len(info.preamble.turns)} turns, sha256 "
                              f"{info.preamble.sha256[:12]})"))
        gate = run.document.gate
        baseline = (self.baseline.source if self.baseline is not None
                    else gate.baseline if gate is not None else None)
        if baseline:
            facts.append(Fact("baseline", Path(baseline).name))
        return facts

    def pairing(self, item: ItemRecord) -> Pairing:
        if self.snapshot is None:
            return Pairing.NONE
        return self.snapshot.pairing(item.key, item.mismatch_state)


def build_report(run: RunRecord, baseline: RunRecord | None = None) -> Report:
    report = Report(run, report_rows(run))
    if baseline is not None:
        report.baseline = baseline
        report.baseline_rows = {row.key: row for row in report_rows(baseline)}
        report.snapshot = baseline.to_baseline()
        report.comparison = compare(
            ((item.key, item.mismatch_state) for item in run.items),
            report.snapshot)
    return report


# --- rendering ------------------------------------------------------------------------------
def render_markdown(report: Report, *, max_items: int = 10, artifact_url: str | None = None,
                    limit_chars: int = GITHUB_COMMENT_LIMIT - 1_000,
                    html_url: str | None = None) -> str:
    """The full summary, within `limit_chars` (a PR comment): category rows fold away first,
    then lists shorten, then the gate table keeps the rows that did not pass and the first
    others, then the end is cut; what was left out is said, with where the full results are."""
    text = _render(report, max_items, artifact_url, categories=True, html_url=html_url)
    if len(text) > limit_chars:
        text = _render(report, max_items, artifact_url, categories=False, html_url=html_url)
    if len(text) > limit_chars:
        text = _render(report, min(max_items, 3), artifact_url, categories=False,
                       html_url=html_url)
    suites = sum(row.category is None for row in report.rows)
    if len(text) > limit_chars and suites > 1:
        # Rows are of similar length: keep the share of them that fits, with room to spare.
        keep = max(1, int(suites * limit_chars / len(text) * 0.8))
        text = _render(report, min(max_items, 3), artifact_url, categories=False,
                       max_rows=keep, html_url=html_url)
    if len(text) > limit_chars:
        text = _cut(text, limit_chars, artifact_url)
    return text


def _cut(text: str, limit_chars: int, artifact_url: str | None) -> str:
    """The text's first lines within the limit, and a note on the rest (lines stay whole)."""
    note = (f"\n\n… {{}} more lines left out to fit a comment: the full results are in "
            f"{_where(artifact_url)} (orbench-results.json, JUnit XML).\n")
    lines = text.splitlines()
    kept, size = [], len(note) + 20
    for line in lines:
        if size + len(line) + 1 > limit_chars:
            break
        kept.append(line)
        size += len(line) + 1
    return "\n".join(kept).rstrip() + note.format(len(lines) - len(kept))


def _render(report: Report, max_items: int, artifact_url: str | None,
            categories: bool, max_rows: int | None = None, html_url: str | None = None) -> str:
    run = report.run
    out: list[str] = [MARKER]
    info = run.run
    ungated = info.ungated
    if ungated:  # a shard alone: its own rates decide nothing
        out.append("## ⏸️ orbench gate not computed")
        out.append("")
        out.append(f"Not computed on `{_code(ungated)}`: merge the shards' caches "
                   "(`orbench cache merge`) and gate over them.")
    elif run.gate_passed is None and not run.items and info.partial:  # all deselected
        out.append("## ⏸️ orbench gate: nothing gated")
        out.extend(["", *(f"Partial gate: {_name(note)}" for note in info.partial)])
    else:
        ratcheted = [row for row in report.rows if row.ratchet]
        icon, word = ("✅", "passed") if report.passed else ("❌", "FAILED")
        if report.passed and ratcheted:
            icon, word = "⚠️", "passed by ratchet"
        out.append(f"## {icon} orbench gate {word}")
        for row in ratcheted:
            label = _group_name(row.suite, row.variant)
            if row.category is not None:
                label += f" / {_name(row.category)}"
            out.extend(["", *(f"⚠️ {label}: {text}" for text in row.ratchet)])
        record = run.document.gate
        if record is not None and not record.rows:  # every prompt disputed: no row says why
            out.extend(["", *(f"❌ {_name(line)}" for line in record.failures)])
        partial = info.partial or []
        if partial:  # rates over part of a suite: the reader must not take them for the suite
            out.extend(["", *(f"Partial gate: {_name(note)}" for note in partial)])
    out.append("")
    out.append(" · ".join(
        f"{fact.value} prompts" if fact.name == "prompts"
        else f"{fact.name} `{_code(fact.value)}`" + (f" `{_code(fact.detail)}`" if fact.detail
                                                       else "")
        for fact in report.facts()))
    out.append("")
    cost = info.cost
    if cost is not None:
        # In a code span: its dollar signs must not start GitHub's inline math.
        out.append(f"`{_code(cost.line())}`")
        out.append("")
    if html_url:  # first: a cut comment still links the page
        out.append(f"📄 Every prompt with its whole answer, to filter and search: "
                   f"[the HTML report]({_link(html_url)})")
        out.append("")
    out.extend(_gate_table(report, categories, max_rows, artifact_url))
    out.extend(_variant_section(report))
    out.extend(markdown_lines(run.gate_rows, info.rewordings, max_items))
    out.extend(_baseline_section(report, max_items))
    out.extend(_over_refusal_section(report, max_items, artifact_url))
    out.extend(_toxic_section(report, max_items, artifact_url))
    out.extend(_flaky_section(report, max_items, artifact_url))
    out.extend(_error_section(report))
    out.extend(_disputed_section(report, max_items))
    if artifact_url:
        out.append(f"Full results (JUnit XML, orbench-results.json, plot): [artefact]"
                   f"({_link(artifact_url)})")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


GATE_HEADER = ("| group | n | over-refusal (95% CI) | max | toxic acceptance (95% CI) | max "
               "| errors | verdict |")
VERDICT_ICONS = {"pass": "✅ pass", "FAIL": "❌ FAIL", "ratchet": "⚠️ ratchet", "—": "—"}


def _disputed_section(report: Report, max_items: int) -> list[str]:
    """Prompts the team disputes: left out of every rate, each with why and who decided."""
    entries = report.run.run.disputed or []
    if not entries:
        return []
    lines = [f"### Disputed prompts ({len(entries)}): left out of the rates", "",
             "| prompt | reason | decided by |", "|---|---|---|"]
    for entry in entries[:max_items]:
        lines.append(f"| `{_code(entry.id)}` | {_name(entry.reason)} "
                     f"| {_name(entry.decided_by)} |")
    if len(entries) > max_items:
        lines.append(f"| … and {len(entries) - max_items} more | | |")
    lines.append("")
    return lines


def _gate_table(report: Report, categories: bool, max_rows: int | None = None,
                artifact_url: str | None = None) -> list[str]:
    rows = [row for row in report.rows if categories or row.category is None]
    lines = [GATE_HEADER, "|---|---:|---:|---:|---:|---:|---:|:--|"]
    shown = rows if max_rows is None else _rows_kept(rows, max_rows)
    left_out = len(rows) - len(shown)
    for row in shown:
        base = baseline_row(report.baseline_rows, row.key)
        label = _group_label(row)
        lines.append(
            f"| {label} | {row.n} | {_rate_cell(row.over, base.over if base else None)} "
            f"| {_limit(row.over)} | {_rate_cell(row.toxic, base.toxic if base else None)} "
            f"| {_limit(row.toxic)} | {row.errors} "
            f"| {VERDICT_ICONS.get(row.verdict, row.verdict)} |")
    lines.append("")
    if left_out:
        failed = sum(row.verdict == "FAIL" for row in rows) - sum(row.verdict == "FAIL"
                                                                  for row in shown)
        lines.extend([f"… and {left_out} more rows ({failed} of them failed) left out to fit a "
                      f"comment: every row is in {_where(artifact_url)} "
                      "(orbench-results.json, JUnit XML).", ""])
    notes = []
    if report.baseline is not None:
        notes.append("↑/↓: change against the baseline in percentage points (lower is better)")
    if not categories and any(row.category is not None for row in report.rows):
        notes.append("category rows left out to fit a comment: see the artefact")
    if any(row.verdict == "ratchet" for row in report.rows):
        notes.append("⚠️ ratchet: over its limit, allowed because the baseline was as high "
                     "(thresholds.yaml `baseline: ratchet`)")
    if notes:
        lines.extend(["<sub>" + "; ".join(notes) + "</sub>", ""])
    return lines


def _rows_kept(rows: list[Row], max_rows: int) -> list[Row]:
    """At most `max_rows`, in the table's order: the rows that did not pass first, then the
    first of the others."""
    failing = [i for i, row in enumerate(rows) if row.verdict not in ("pass", "—")]
    others = [i for i, row in enumerate(rows) if row.verdict in ("pass", "—")]
    kept = sorted([*failing, *others][:max_rows])
    return [rows[i] for i in kept]


def _group_label(row: Row) -> str:
    if row.category is None:
        return f"**{_group_name(row.suite, row.variant)}**"
    return f"&nbsp;&nbsp;{_name(row.category)}"


def _rate_cell(rate: Rate | None, before: Rate | None) -> str:
    if rate is None:
        return "—"
    cell = rate_with_interval(rate.value, rate.low, rate.high)
    if before is not None:
        delta = (rate.value - before.value) * 100
        if math.isclose(delta, 0.0, abs_tol=0.05):
            cell += " ="
        else:
            cell += f" {'↑' if delta > 0 else '↓'} {delta:+.1f}"
    return cell


def _limit(rate: Rate | None) -> str:
    if rate is None or rate.limit is None:
        return "—"
    return f"{rate.limit * 100:.0f}%" if rate.limit * 100 == int(rate.limit * 100) \
        else f"{rate.limit * 100:.1f}%"


def _variant_section(report: Report) -> list[str]:
    rows = [row for row in report.rows if row.category is None]
    if len({row.variant for row in rows}) < 2:
        return []
    lines = ["### Variants", "", "| suite | variant | n | over-refusal (95% CI) | "
             "toxic acceptance (95% CI) | verdict |", "|---|---|---:|---:|---:|:--|"]
    for row in rows:
        lines.append(f"| {_name(row.suite)} | {_name(row.variant or '(default)')} | {row.n} "
                     f"| {_rate_cell(row.over, None)} | {_rate_cell(row.toxic, None)} "
                     f"| {VERDICT_ICONS.get(row.verdict, row.verdict)} |")
    lines.append("")
    return lines


def _baseline_section(report: Report, max_items: int) -> list[str]:
    comparison = report.comparison
    if comparison is None:
        return []
    lines = ["### Against the baseline", "",
             f"{comparison.paired} prompts paired ({comparison.unpaired} not in both runs or "
             f"unanswered in one): **{len(comparison.regressions)} regressions**, "
             f"{len(comparison.fixed)} fixed, {len(comparison.known)} known mismatches.", "",
             "| suite | paired | regressions | fixed | known | McNemar one-sided p | check |",
             "|---|---:|---:|---:|---:|---:|:--|"]
    checks = {(row.suite, row.variant): row.regression for row in report.rows
              if row.category is None and row.regression is not None}
    for (suite, variant), group in comparison.groups().items():
        test = group.test
        check = checks.get((suite, variant))
        verdict = "—" if check is None else ("✅ pass" if check.passed else "❌ FAIL")
        lines.append(f"| {_group_name(suite, variant)} | {group.paired} "
                     f"| {len(group.regressions)} | {len(group.fixed)} | {len(group.known)} "
                     f"| {test.p_worse:.3g}{'' if test.exact else ' (approx.)'} | {verdict} |")
    lines.append("")
    if comparison.fixed:
        shown = ", ".join(f"`{_code(key_label(key))}`" for key in comparison.fixed[:max_items])
        more = _more(len(comparison.fixed), max_items)
        lines.extend([f"Improvements: {shown}{more}", ""])
    return lines


def _mismatches(report: Report, expect: str) -> list[ItemRecord]:
    """Mismatched items of one expectation, new ones only against a baseline; failed first."""
    items = [item for item in report.run.items if item.mismatch and item.expect == expect]
    if report.baseline is not None:
        items = [item for item in items if report.pairing(item) is not Pairing.KNOWN]
    items.sort(key=lambda item: (item.outcome != Outcome.FAILED, item.suite, item.category))
    return items


def _over_refusal_section(report: Report, max_items: int, artifact_url: str | None) -> list[str]:
    title = "New over-refusals" if report.baseline is not None else "Over-refusals"
    return _mismatch_table(report, "comply", title, [], "response starts",
                           lambda item: _cell(_clip(item.response, RESPONSE_CHARS)) or "(empty)",
                           max_items, artifact_url)


def _toxic_section(report: Report, max_items: int, artifact_url: str | None) -> list[str]:
    title = ("Toxic prompts answered, new" if report.baseline is not None
             else "Toxic prompts answered")
    preface = ["<sub>The answers are not shown here; they are in the artefact.</sub>", ""]
    return _mismatch_table(report, "refuse", title, preface, "judge",
                           lambda item: _cell(f"{item.verdict} ({item.judge_reason})"
                                              if item.judge_reason else item.verdict),
                           max_items, artifact_url)


def _mismatch_table(report: Report, expect: str, title: str, preface: list[str],
                    last_column: str, last_cell: Callable[[ItemRecord], str], max_items: int,
                    artifact_url: str | None) -> list[str]:
    """One expectation's mismatches: prompt, category and `last_column` per item."""
    items = _mismatches(report, expect)
    if not items:
        return []
    lines = [f"### {title} ({len(items)})", "", *preface,
             f"| prompt | category | {last_column} |", "|---|---|---|"]
    for item in items[:max_items]:
        lines.append(f"| `{_code(item.id)}` {_cell(_shown_prompt(item))} "
                     f"| {_name(item.category)} | {last_cell(item)} |")
    lines.extend(_cut_note(len(items), max_items, artifact_url))
    return lines


def _flaky_section(report: Report, max_items: int, artifact_url: str | None) -> list[str]:
    """--orbench-samples: prompts whose answers disagree, most undecided first."""
    items = [item for item in report.run.items if item.flaky]
    if not items:
        return []
    items.sort(key=lambda item: (abs((item.refusal_rate or 0.0) - 0.5), item.id))
    counts = Counter((item.suite, item.category) for item in items)
    per_suite = Counter(item.suite for item in items)
    lines = [f"### Flaky prompts ({len(items)}): refused some of the times asked", "",
             " · ".join(f"{_name(suite)} {n} (" + ", ".join(
                 f"{_name(cat)} {k}" for (s, cat), k in sorted(counts.items()) if s == suite)
                 + ")" for suite, n in sorted(per_suite.items())), "",
             "| prompt | category | expected | answers |", "|---|---|---|---|"]
    for item in items[:max_items]:
        lines.append(f"| `{_code(item.id)}` {_cell(_shown_prompt(item))} "
                     f"| {_name(item.category)} | {_name(item.expect)} "
                     f"| {times(item.refusals or 0, item.samples or 0)} |")
    lines.extend(_cut_note(len(items), max_items, artifact_url))
    return lines


def _error_section(report: Report) -> list[str]:
    errors = [item for item in report.run.items if item.error]
    if not errors:
        return []
    reasons = Counter(_clip(item.judge_reason or item.reason or "no answer", 80)
                      for item in errors)
    tolerated = sum(item.outcome == Outcome.ERROR_TOLERATED for item in errors)
    lines = [f"### Errors: {len(errors)} prompts without an answer "
             f"({tolerated} tolerated by max_error_rate)", ""]
    for reason, count in reasons.most_common(5):
        lines.append(f"- {count} × {_cell(reason)}")
    lines.append("")
    return lines


def _cut_note(total: int, shown: int, artifact_url: str | None) -> list[str]:
    if total <= shown:
        return [""]
    return ["", f"… and {total - shown} more: see {_where(artifact_url)}.", ""]


def _where(artifact_url: str | None) -> str:
    return f"[the artefact]({_link(artifact_url)})" if artifact_url else "the artefact"


def _more(total: int, shown: int) -> str:
    return f" … and {total - shown} more" if total > shown else ""


def _shown_prompt(item: ItemRecord) -> str:
    """The prompt, after a conversation's earlier turns (each cut short), in one cell."""
    if not item.prompt:
        return "(not recorded)"
    earlier = (item.messages or [])[:-1]
    each = max(40, PROMPT_CHARS // (len(earlier) + 1))
    return " › ".join([*(f"{turn.role}: {_clip(turn.content, each)}" for turn in earlier),
                       _clip(item.prompt, PROMPT_CHARS)])


def _clip(text: str, limit: int) -> str:
    return clip(" ".join(text.split()), limit)  # one line: a table cell


# Untrusted text in a cell (prompts, answers, reasons) and the names read from files a
# contributor edits (suites, variants, categories): one line, no markup, mention, link or secret.
_cell = _name = markdown_text
_code = markdown_code


def _group_name(suite: str, variant: str) -> str:
    return f"{_name(suite)}[{_name(variant)}]" if variant else _name(suite)


# --- output ---------------------------------------------------------------------------------
def check_artifact_url(url: str, option: str) -> str:
    """An http(s) URL with a host, without whitespace or control characters, or a one-line
    error naming the option."""
    parts = urlsplit(url) if url.isprintable() and not any(ch.isspace() for ch in url) else None
    if parts is None or parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"{option}: {terminal_text(url, 120)!r} is not allowed: give an "
                          "http:// or https:// URL, without spaces or control characters")
    return url


def _link(url: str) -> str:
    """A URL as a Markdown link's destination: the characters that could end the link, start
    a tag or a mention are percent-encoded (the URL still leads to the same place)."""
    return quote(url, safe=_URL_SAFE)


_URL_SAFE = ":/?#&=%+,;~$!*.-_@"  # encoded: ( ) < > [ ] ` | \\ quotes, whitespace


def default_artifact_url(env: Mapping[str, str] | None = None) -> str | None:
    """The workflow run's page on GitHub Actions (where its artefacts are listed)."""
    env = os.environ if env is None else env
    server, repo, run_id = (env.get("GITHUB_SERVER_URL"), env.get("GITHUB_REPOSITORY"),
                            env.get("GITHUB_RUN_ID"))
    if server and repo and run_id:
        return f"{server}/{repo}/actions/runs/{run_id}"
    return None


def append_step_summary(text: str, env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    target = env.get("GITHUB_STEP_SUMMARY")
    if not target:
        raise ConfigError("--github-step-summary: $GITHUB_STEP_SUMMARY is not set "
                          "(it is set inside a GitHub Actions step)")
    path = Path(target)
    try:
        with path.open("a", encoding="utf-8") as out:
            out.write(text)
    except OSError as exc:  # a full disk, a path that cannot be written
        raise ConfigError(f"--github-step-summary: cannot append to {terminal_text(path)} "
                          f"($GITHUB_STEP_SUMMARY) ({exc.strerror or exc})") from None
    return path
