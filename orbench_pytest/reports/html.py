"""`orbench html` and --orbench-html: one self-contained HTML page a reviewer reads a run in.

One file, no network: inline CSS and script under a strict Content-Security-Policy (the script
and the style allowed by their sha256, nothing else), so it opens from file:// and from a
downloaded CI artefact. The gate table, the trade-off plot (hand-written SVG), the run's cost
and parameters, disputed prompts and rewordings are written here as escaped HTML; every prompt
is a row of data the page's script (data/report.js) renders with textContent, never as HTML,
drawing only the rows on screen, so 80K prompts open and filter quickly.

Every prompt, answer, category and reason is untrusted: the rows are embedded as JSON with <, >,
&, U+2028 and U+2029 escaped, gzip'd and base64'd (nothing in the data can end its element),
in two data blocks (`<script type="application/gzip">`, never run): the rows' short fields,
read to draw the list, and their texts, read just after. Both are written a batch of rows at a
time: the page is streamed out, never held whole.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import zlib
from collections.abc import Iterable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.ids import ItemKey
from orbench_pytest.core.untrusted import html_text as _h  # untrusted text, inert
from orbench_pytest.gate.baseline import Pairing
from orbench_pytest.gate.decision import OVER_REFUSAL, TOXIC_ACCEPTANCE, rate_with_interval
from orbench_pytest.judges.check import COLUMNS as LABEL_COLUMNS
from orbench_pytest.reports.document import (
    CheckRecord,
    ItemRecord,
    RowRecord,
    RunRecord,
)
from orbench_pytest.reports.markdown import Report, build_report, report_rows
from orbench_pytest.reports.plot import points_of
from orbench_pytest.reports.plot_svg import plot_svg
from orbench_pytest.reports.results import Texts, texts_in_memory

# The rows' columns, in order (data/report.js reads them by name); the texts apart, read after
# the list is drawn (most of the page's bytes: parsing them first would delay the opening).
COLUMNS = ("id", "nodeid", "suite", "variant", "case_id", "category", "expect", "verdict",
           "outcome", "mismatch", "error", "judge", "judge_reason", "reason", "baseline",
           "samples", "refusals", "base_verdict", "disputed")
TEXT_COLUMNS = ("prompt", "answer", "base_answer", "whole")  # whole: not the excerpt alone

GZIP_LEVEL = 6  # gzip'd data: a page several times smaller (python -m benchmarks html-report)
SIDE_BY_SIDE = (Pairing.REGRESSION.value, Pairing.FIXED.value)  # the baseline's answer shown
_JSON_ESCAPES = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                               "\u2028": "\\u2028", "\u2029": "\\u2029"})
_SURROGATE = re.compile("[\ud800-\udfff]")  # a lone one cannot be written as UTF-8


def write_html(path: Path, run: RunRecord, baseline: RunRecord | None = None,
               option: str = "--output", *, texts: Texts | None = None,
               baseline_texts: Texts | None = None) -> None:
    """The page of `run` (against `baseline`, whose answers are shown beside regressions and
    fixes), written atomically. `texts`: the items' texts, when `run` was read without them
    (results.read_without_texts)."""
    from orbench_pytest.core.artefacts import write_atomically

    report = build_report(run, baseline)
    texts = texts or texts_in_memory(run)
    base_texts = baseline_texts or (texts_in_memory(baseline) if baseline is not None
                                    else None)
    write_atomically(path, lambda out: render(out, report, texts, base_texts), option)


def render(out: TextIO, report: Report, texts: Texts, base_texts: Texts | None) -> None:
    css, script = _asset("report.css"), _asset("report.js")
    run = report.run
    out.write('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
              '<meta http-equiv="Content-Security-Policy" content="'
              f"default-src 'none'; script-src '{_sha256(script)}'; "
              f"style-src '{_sha256(css)}'; base-uri 'none'; "
              "form-action 'none'\">\n"
              '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
              '<meta name="referrer" content="no-referrer">\n'
              f"<title>orbench report: {_h(run.label())}</title>\n<style>{css}</style>\n"
              "</head>\n<body>\n")
    for part in _sections(report):
        out.write(part)
    # Each data block streamed: JSON, one row at a time, gzip'd and base64'd as it goes.
    _packed(out, "orbench-rows", COLUMNS, item_rows(report))
    _packed(out, "orbench-texts", TEXT_COLUMNS, text_rows(report, texts, base_texts))
    out.write(f"<script>{script}</script>\n</body></html>\n")


def _packed(out: TextIO, element: str, columns: tuple[str, ...],
            rows: Iterable[list[Any]]) -> None:
    """{"columns": [...], "rows": [...]} as JSON → gzip → base64, in a data block (a
    <script type="application/gzip">, never run), written as it is made."""
    gzip = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)  # 31: with a gzip header
    pending = b""  # compressed bytes not yet a whole base64 group

    def write(data: bytes) -> None:
        nonlocal pending
        data = pending + data
        whole = len(data) - len(data) % 3
        pending = data[whole:]
        out.write(base64.b64encode(data[:whole]).decode())

    out.write(f'<script type="application/gzip" id="{element}">')
    batch = [f'{{"columns":{script_json(list(columns))},"rows":[']
    for index, row in enumerate(rows):
        batch.append(("," if index else "") + script_json(row))
        if len(batch) >= 1024:
            write(gzip.compress("".join(batch).encode()))
            batch = []
    batch.append("]}")
    write(gzip.compress("".join(batch).encode()) + gzip.flush())
    out.write(base64.b64encode(pending).decode() + "</script>\n")


def script_json(value: Any) -> str:
    """JSON that cannot end its <script> element nor surprise a parser: <, >, &, U+2028 and
    U+2029 as \\u escapes (the same string to JSON.parse)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":")).translate(_JSON_ESCAPES)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def _asset(name: str) -> str:
    return resources.files("orbench_pytest").joinpath(f"data/{name}").read_text(
        encoding="utf-8")


# --- the rows --------------------------------------------------------------------------------
def _pairing(report: Report, item: ItemRecord) -> str:
    return report.pairing(item).value if report.snapshot is not None else item.baseline


def item_rows(report: Report) -> Iterator[list[Any]]:
    """Per item, its row in COLUMNS' order."""
    run = report.run
    disputed = {d.id: d.reason or "disputed" for d in run.run.disputed or []}
    base = {} if report.baseline is None else {item.key: item for item in report.baseline.items}
    for item in run.items:
        pairing = _pairing(report, item)
        before = base.get(item.key) if pairing in SIDE_BY_SIDE else None
        yield [item.id, item.nodeid, item.suite, item.variant, item.case_id, item.category,
               item.expect, item.verdict, item.outcome, int(item.mismatch), int(item.error),
               item.judge, item.judge_reason, item.reason, pairing, item.samples,
               item.refusals, None if before is None else before.verdict,
               disputed.get(item.id)]


def text_rows(report: Report, texts: Texts, base_texts: Texts | None) -> Iterator[list[Any]]:
    """Per item, its texts in TEXT_COLUMNS' order: the whole answer (else the excerpt), and
    the baseline's beside a regression or a fix."""
    wanted = {item.key for item in report.run.items if _pairing(report, item) in SIDE_BY_SIDE}
    before: dict[ItemKey, str] = {}
    if wanted and report.baseline is not None and base_texts is not None:
        for item, (_, answer, response) in _paired(report.baseline, base_texts):
            if item.key in wanted:
                before[item.key] = answer or response
    for item, (prompt, answer, response) in _paired(report.run, texts):
        yield [prompt, answer or response, before.get(item.key),
               int(bool(answer) or not response)]


def _paired(run: RunRecord, texts: Texts) -> Iterator[tuple[ItemRecord, tuple[str, str, str]]]:
    try:
        yield from zip(run.items, texts(), strict=True)
    except ValueError:  # zip's: the file read again holds another number of items
        raise ConfigError(f"{run.source}: changed while it was read") from None


# --- the page's fixed parts ------------------------------------------------------------------
def _sections(report: Report) -> Iterable[str]:
    yield from _title(report)
    yield from _gate_table(report)
    yield from _plot(report)
    # The CSV export writes the labels file's columns (orbench label's, judge-check's).
    yield _BROWSER.replace("{columns}", _h(",".join(LABEL_COLUMNS)))
    yield from _disputed(report)
    yield from _flips(report)
    yield from _parameters(report)


def _title(report: Report) -> Iterator[str]:
    run, info = report.run, report.run.run
    if info.ungated:
        verdict, css = f"not computed on {info.ungated}", "ungated"
    else:
        verdict, css = ("passed", "pass") if report.passed else ("FAILED", "fail")
    yield f'<header><h1 class="{css}" id="verdict">orbench gate {_h(verdict)}</h1>\n'
    facts = (f'<span id="total">{_h(fact.value)}</span> prompts' if fact.name == "prompts"
             else f"{fact.name} <code>{_h(fact.value)}</code>"
             + (f" {_h(fact.detail)}" if fact.detail else "") for fact in report.facts())
    yield f"<p>{' · '.join(facts)}</p>\n"
    if info.cost is not None:
        yield f'<p id="cost"><code>{_h(info.cost.line())}</code></p>\n'
    gate = run.document.gate
    notes = [*(gate.failures if gate else []), *(gate.ratchet if gate else []),
             *(f"partial gate: {note}" for note in (gate.partial if gate else []))]
    if notes:
        yield '<ul id="gate-notes">' + "".join(f"<li>{_h(n)}</li>" for n in notes) + "</ul>\n"
    if report.comparison is not None or (run.document.baseline is not None):
        yield from _comparison(report)
    yield "</header>\n"


def _comparison(report: Report) -> Iterator[str]:
    if report.comparison is not None:
        c = report.comparison
        counts = (c.paired, c.unpaired, len(c.regressions), len(c.fixed), len(c.known))
    else:
        record = report.run.document.baseline
        assert record is not None
        counts = (record.paired, record.unpaired, len(record.regressions), len(record.fixed),
                  record.known)
    paired, unpaired, regressions, fixed, known = counts
    yield (f'<p id="comparison">Against the baseline: {paired} prompts paired ({unpaired} '
           f"unpaired): <strong>{regressions} regressions</strong>, {fixed} fixed, {known} "
           "known mismatches.</p>\n")


GATE_HEADERS = ("group", "n", "refused", "errors", "over-refusal (95% CI)", "max",
                "toxic acceptance (95% CI)", "max", "verdict")


def gate_cells(row: RowRecord) -> list[str]:
    """A gate row as the terminal's table shows it (reports/summary.py), from the results."""
    label = row.suite + (f"[{row.variant}]" if row.variant else "")
    cells = [label if row.category is None else f"  {row.category}", str(row.n),
             str(row.refusals), str(row.errors)]
    for name in (OVER_REFUSAL, TOXIC_ACCEPTANCE):
        check = _check(row, name)
        if check is not None:
            rate, (low, high) = check.rate or 0.0, check.interval
        elif name in row.rates:
            rate, (low, high) = row.rates[name].rate, row.rates[name].interval
        else:
            cells.extend(["—", "—"])
            continue
        shown = rate_with_interval(rate, low, high)
        if check is not None and check.corrected:
            shown += f" raw {(check.raw_rate or 0.0) * 100:.1f}%"
        limit = f"{check.limit * 100:.1f}%" if check is not None and check.limit is not None \
            else "—"
        cells.extend([shown, limit])
    cells.append("⚠️ ratchet" if row.verdict == "ratchet" else row.verdict)
    return cells


def _check(row: RowRecord, name: str) -> CheckRecord | None:
    return next((check for check in row.checks if check.name == name), None)


def _gate_table(report: Report) -> Iterator[str]:
    rows = report.run.gate_rows
    yield '<section><h2>Gate</h2>\n<table id="gate"><thead><tr>'
    yield "".join(f"<th>{_h(h)}</th>" for h in GATE_HEADERS) + "</tr></thead><tbody>\n"
    if rows is None:  # a JUnit file or an old results file: the rates without limits
        for plain in report_rows(report.run):
            label = plain.suite + (f"[{plain.variant}]" if plain.variant else "")
            cells = [label if plain.category is None else f"  {plain.category}", str(plain.n),
                     "", str(plain.errors)]
            for rate in (plain.over, plain.toxic):
                cells.extend(["—", "—"] if rate is None else
                             [rate_with_interval(rate.value, rate.low, rate.high), "—"])
            yield _tr([*cells, plain.verdict], plain.category is not None)
        yield "</tbody></table>\n</section>\n"
        return
    for row in rows:
        yield _tr(gate_cells(row), row.category is not None, row.verdict)
    yield "</tbody></table>\n"
    limits = [(row, check) for row in rows for check in row.checks]
    if limits:
        yield ('<h3>Every limit and where it came from</h3>\n<table id="limits"><thead><tr>'
               "<th>group</th><th>check</th><th>k / n</th><th>rate (95% CI)</th>"
               "<th>limit</th><th>decision</th><th>source</th><th>baseline</th>"
               "<th>result</th></tr></thead><tbody>\n")
        for row, check in limits:
            group = row.suite + (f"[{row.variant}]" if row.variant else "")
            if row.category is not None:
                group += f" / {row.category}"
            shown = ("—" if check.rate is None
                     else rate_with_interval(check.rate, *check.interval))
            limit = "—" if check.limit is None else f"{check.limit * 100:.1f}%"
            mode = check.baseline_mode + ("" if check.baseline_rate is None
                                          else f" ({check.baseline_rate * 100:.1f}%)")
            result = "pass" if check.passed else "FAIL"
            if check.allowed_by_ratchet:
                result = "⚠️ ratchet"
            yield _tr([group, check.name, f"{check.k} / {check.n}", shown, limit, check.decision,
                       check.where or "default", mode, result], False, result)
        for row in rows:
            regression = row.regression
            if regression is None or row.category is not None:
                continue
            group = row.suite + (f"[{row.variant}]" if row.variant else "")
            limit = "—" if regression.limit is None else str(regression.limit)
            yield _tr([group, "regressions", f"{regression.regressions} / {regression.paired}",
                       f"p = {regression.p_worse:.3g}", limit, regression.decision,
                       regression.where or "default", f"{regression.fixed} fixed",
                       "pass" if regression.passed else "FAIL"], False,
                      "pass" if regression.passed else "FAIL")
        yield "</tbody></table>\n"
    yield "</section>\n"


def _tr(cells: list[str], category: bool, verdict: str = "") -> str:
    css = " ".join(c for c in ("category" if category else "",
                               {"pass": "pass", "FAIL": "fail"}.get(verdict, "")) if c)
    attribute = f' class="{css}"' if css else ""
    return f"<tr{attribute}>" + "".join(f"<td>{_h(c)}</td>" for c in cells) + "</tr>\n"


# --- the trade-off plot ----------------------------------------------------------------------
def _plot(report: Report) -> Iterator[str]:
    yield "<section><h2>Trade-off: toxic prompts refused against over-refusal</h2>\n"
    try:
        points = points_of(report.run)
        before = points_of(report.baseline) if report.baseline is not None else []
    except ConfigError as exc:
        yield f'<p id="no-plot">No plot: {_h(exc)}</p>\n</section>\n'
        return
    yield plot_svg(points, before)
    yield "</section>\n"


# --- the prompts' browser (filled by data/report.js) -----------------------------------------
_BROWSER = """<section id="prompts"><h2>Prompts</h2>
<div id="filters">
<label>suite <select id="f-suite"><option value="">all</option></select></label>
<label>category <select id="f-category"><option value="">all</option></select></label>
<label>expected <select id="f-expect"><option value="">all</option></select></label>
<label>verdict <select id="f-verdict"><option value="">all</option></select></label>
<label><input type="checkbox" id="f-mismatch"> mismatch only</label>
<label><input type="checkbox" id="f-regression"> regressions only</label>
<label>search <input type="search" id="f-text" placeholder="prompts and answers"></label>
<label>sort <select id="f-sort"><option value="">run order</option></select></label>
<button type="button" id="export" data-columns="{columns}">Export CSV (labels columns)</button>
<span id="count"></span>
</div>
<p class="hint">j / k: next / previous prompt · Enter: open it · each prompt has a permalink</p>
<div id="list-head" class="row head"></div>
<div id="list" tabindex="0"><div id="spacer"></div></div>
<div id="detail" hidden></div>
</section>
"""


def _disputed(report: Report) -> Iterator[str]:
    entries = report.run.run.disputed or []
    if not entries:
        return
    yield (f'<section><h2>Disputed prompts ({len(entries)}): left out of the rates</h2>\n'
           '<table id="disputed"><thead><tr><th>prompt</th><th>reason</th><th>decided by</th>'
           "</tr></thead><tbody>\n")
    for entry in entries:
        yield _tr([entry.id, entry.reason, entry.decided_by], False)
    yield "</tbody></table></section>\n"


def _flips(report: Report) -> Iterator[str]:
    search = report.run.run.rewordings
    if search is None:
        return
    yield (f'<section><h2>Fragile prompts (rewordings)</h2>\n<p>{search.searched} prompts '
           f"searched with up to {search.tries} rewordings each (seed {search.seed}), "
           f"{search.asked} asked of a budget of {search.budget}: {search.fragile} fragile; "
           f"{search.flips_total} minimal flips, {len(search.flips)} kept here.</p>\n")
    if search.flips:
        yield ('<table id="flips"><thead><tr><th>prompt</th><th>original</th><th>rewording '
               "refused</th><th>edits</th><th>answer</th><th>judge</th></tr></thead><tbody>\n")
        for flip in search.flips:
            yield _tr([f"{flip.suite}[{flip.variant}]/{flip.case_id}" if flip.variant
                       else f"{flip.suite}/{flip.case_id}", flip.original, flip.rewording,
                       flip.edits + ("" if flip.shrunk else " (not shrunk)"), flip.answer,
                       flip.judge_reason], False)
        yield "</tbody></table>\n"
    yield "</section>\n"


def _parameters(report: Report) -> Iterator[str]:
    info = report.run.run
    facts: list[tuple[str, object]] = [("started", info.started), ("finished", info.finished)]
    if info.parameters is not None:
        facts.extend((name, value) for name, value in vars(info.parameters).items())
    facts.extend(("suite " + s.name, f"{s.items} prompts") for s in info.suites)
    facts.extend(("variant " + (v.name or "(default)"), v.system_prompt or "")
                 for v in info.variants)
    facts.extend(("version " + name, value) for name, value in info.versions.items())
    if info.cost is not None:
        facts.append(("cost", info.cost.line()))
    yield ('<section><h2>Run</h2>\n<table id="parameters"><tbody>\n'
           + "".join(f"<tr><th>{_h(k)}</th><td>{_h(_shown(v))}</td></tr>\n" for k, v in facts)
           + "</tbody></table></section>\n")


def _shown(value: object) -> str:
    if value is None:
        return "—"
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "—"
    return str(value)

