"""The HTML report (--orbench-html, `orbench html`) in a real browser: the gate table and the
rows equal the results file, each filter, search, sort, keys, the permalink, the CSV export,
and hostile answers that would set a marker if anything of them ran."""

from __future__ import annotations

import base64
import csv
import dataclasses
import gzip
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from playwright.sync_api import expect

from orbench_pytest.core.untrusted import csv_cell
from orbench_pytest.judges.check import COLUMNS
from orbench_pytest.reports.html import _packed, gate_cells, script_json
from orbench_pytest.reports.results import read_results
from tests.browser import Page
from tests.helpers import (
    SAFE,
    TOXIC,
    mini_suite,
    no_crash,
    orbench_cli,
    run_orbench,
    write_suite,
)
from tests.openai_server import REFUSAL_TEXT, Reply

GATE = {"defaults": {"max_over_refusal": 0.5, "max_toxic_acceptance": 0.5}}
LONG = "Step {i}. " + "Here is a long and careful answer. " * 30  # past the 300-char excerpt


def _answers(prompt: str, system: Any, body: Any) -> Reply:
    if prompt in (SAFE[0], *TOXIC[1:]):
        return Reply(text=REFUSAL_TEXT)
    return Reply(text=LONG.format(i=SAFE.index(prompt) if prompt in SAFE else 9))


def _worse(prompt: str, system: Any, body: Any) -> Reply:
    if prompt in (SAFE[0], SAFE[2], *TOXIC[1:]):
        return Reply(text=REFUSAL_TEXT)
    return _answers(prompt, system, body)


def _run(pytester: pytest.Pytester, plugin_args: list[str]) -> tuple[Path, Path, str]:
    """In subprocesses: Playwright's sync API keeps an event loop running in this one."""
    mini_suite(pytester.path, GATE)
    run_orbench(pytester, plugin_args, "--orbench-results=old.json", "--orbench-cache=off",
                serve=_answers, subprocess=True)
    result = run_orbench(pytester, plugin_args, "--orbench-results=new.json",
                         "--orbench-html=new.html", "--orbench-baseline=old.json",
                         "--orbench-cache=off", serve=_worse, subprocess=True)
    text = no_crash(result)
    return pytester.path / "new.json", pytester.path / "new.html", text


def _view(page: Any) -> list[str]:
    """The ids of the rows the page shows, in order: read from the page's own data and view
    (only the rows on screen are in the DOM)."""
    return page.evaluate("""() => {
        const spans = [...document.querySelectorAll('#spacer .row')];
        return spans.map((r) => r.querySelector('.id').textContent);
    }""")


def _shows(page: Any, n: int) -> None:
    """Wait until the page shows `n` rows (a search waits for typing to pause). Playwright's
    expect, not wait_for_function: that one evaluates a string, which the page's CSP forbids."""
    expect(page.locator("#count")).to_have_text(re.compile(f"^showing {n} of "))


def _count(page: Any) -> int:
    text = page.locator("#count").text_content()
    return int(re.match(r"showing (\d+) of", text).group(1))


def test_a_run_writes_the_page_and_it_reads_as_the_results_file(
        pytester: pytest.Pytester, plugin_args: list[str], browser: Any) -> None:
    results, page_path, text = _run(pytester, plugin_args)
    assert f"orbench html: {page_path}" in text
    run = read_results(results)
    items = run.items
    assert all(item.prompt for item in items)  # every prompt kept, passed ones too
    long = next(item for item in items if item.answer.startswith("Step 1."))
    assert long.answer == LONG.format(i=1) and len(long.response) == 300

    view = Page(browser, page_path)
    page = view.page
    try:
        # The gate table: the results file's rows, cell for cell, as the terminal shows them.
        shown = page.eval_on_selector_all(
            "#gate tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.textContent))")
        assert shown == [gate_cells(row) for row in run.gate_rows or []]
        terminal = [line for line in text.splitlines() if line.startswith(("mini", "  "))]
        for cells in shown:
            line = next(line for line in terminal if line.strip().startswith(cells[0].strip()))
            assert [c.strip() for c in re.split(r"\s{2,}", line.strip())] == \
                [c.strip() for c in cells]
        assert page.locator("#limits tbody tr").count() == sum(
            len(row.checks) for row in run.gate_rows or []) + 1  # + the regressions check
        # The plot: the point orbench plot draws.
        from orbench_pytest.reports.plot import points_of

        (point,) = points_of(run)
        drawn = page.locator("#orbench-point-0")
        assert float(drawn.get_attribute("data-over")) == pytest.approx(point.over_refusal)
        assert float(drawn.get_attribute("data-toxic")) == pytest.approx(point.toxic_refusal)
        assert page.locator("#orbench-arrow-0").count() == 1  # from the baseline
        # Every prompt, in the run's order.
        assert _count(page) == len(items)
        assert _view(page) == [item.id for item in items]
        assert page.locator("#cost").text_content().startswith("cost: ")
        # Filters, each against the results file.
        cases = {
            "#f-suite": ("mini", lambda i: i.suite == "mini"),
            "#f-category": ("privacy", lambda i: i.category == "privacy"),
            "#f-expect": ("refuse", lambda i: i.expect == "refuse"),
            "#f-verdict": ("refusal", lambda i: i.verdict == "refusal"),
        }
        for selector, (value, keep) in cases.items():
            page.select_option(selector, value)
            assert _view(page) == [i.id for i in items if keep(i)], selector
            page.select_option(selector, "")
        page.check("#f-mismatch")
        assert _view(page) == [i.id for i in items if i.mismatch]
        page.uncheck("#f-mismatch")
        page.check("#f-regression")
        regressions = [i.id for i in items if i.baseline == "regression"]
        assert regressions and _view(page) == regressions
        page.uncheck("#f-regression")
        # Search over answers and prompts.
        page.fill("#f-text", "STEP 3.")
        _shows(page, 1)
        assert _view(page) == [next(i.id for i in items if i.answer.startswith("Step 3."))]
        page.fill("#f-text", "poison")  # one row shown before, one after: wait for the row
        expect(page.locator("#spacer .row .id")).to_have_text(
            [next(i.id for i in items if "poison" in i.prompt)])
        page.fill("#f-text", "")
        _shows(page, len(items))
        # Sorting: by verdict, then the other way by clicking the column's head.
        page.select_option("#f-sort", "verdict")
        order = sorted(range(len(items)), key=lambda n: (items[n].verdict, n))
        assert _view(page) == [items[n].id for n in order]
        page.click("#list-head span[data-key='verdict']")
        assert _view(page) == [items[n].id for n in reversed(order)]
        page.select_option("#f-sort", "")
        # Keys: j j j k j Enter opens the third row, whole, with its permalink.
        page.focus("#list")
        for key in "jjjkj":
            page.keyboard.press(key)
        page.keyboard.press("Enter")
        third = items[2]
        assert page.locator("#detail h3").first.text_content() == third.id
        assert page.locator("#detail pre.prompt").text_content() == third.prompt
        assert page.locator("#detail pre.answer").text_content() == third.answer
        assert page.evaluate("decodeURIComponent(location.hash.slice(1))") == third.nodeid
        # Regressions: the baseline's answer and verdict beside this run's.
        page.evaluate(f"location.hash = {json.dumps('#' + regressions[0])}")
        regression = next(i for i in items if i.id == regressions[0])
        old = next(i for i in read_results(pytester.path / "old.json").items
                   if i.id == regression.id)
        expect(page.locator("#detail pre.base-answer")).to_have_count(1)
        assert page.locator("#detail pre.answer").text_content() == regression.answer
        assert page.locator("#detail pre.base-answer").text_content() == old.answer
        assert view.errors == [] and page.evaluate("window.__csp") == []
    finally:
        view.close()


def test_a_permalink_opens_its_prompt_whole_even_when_filtered_out(
        pytester: pytest.Pytester, plugin_args: list[str], browser: Any) -> None:
    results, page_path, _ = _run(pytester, plugin_args)
    items = read_results(results).items
    last = items[-1]
    view = Page(browser, page_path, "#" + last.nodeid)
    try:
        page = view.page
        assert page.locator("#detail h3").first.text_content() == last.id
        assert page.locator("#detail pre.prompt").text_content() == last.prompt
        assert page.locator("#detail pre.answer").text_content() == last.answer
        assert page.locator("#detail #permalink").get_attribute("href") == \
            "#" + page.evaluate(f"encodeURIComponent({json.dumps(last.nodeid)})")
        # Filtered out: the permalink shows everything again and opens it.
        page.check("#f-mismatch")
        passed = next(i for i in items if not i.mismatch)
        page.evaluate(f"location.hash = {json.dumps('#' + passed.nodeid)}")
        expect(page.locator("#detail h3").first).to_have_text(passed.id)
        assert not page.is_checked("#f-mismatch") and _count(page) == len(items)
    finally:
        view.close()


def test_the_csv_export_is_the_current_filter_in_the_labels_columns(
        pytester: pytest.Pytester, plugin_args: list[str], browser: Any) -> None:
    results, page_path, _ = _run(pytester, plugin_args)
    items = read_results(results).items
    view = Page(browser, page_path)
    try:
        page = view.page
        page.check("#f-mismatch")
        with page.expect_download() as download:
            page.click("#export")
        text = Path(download.value.path()).read_text(encoding="utf-8")
    finally:
        view.close()
    rows = list(csv.reader(io.StringIO(text)))
    assert tuple(rows[0]) == COLUMNS
    assert rows[1:] == [_label_row(i) for i in items if i.mismatch]
    # judge-check reads it: every row not labelled yet.
    (pytester.path / "labels.csv").write_text(text, encoding="utf-8")
    from orbench_pytest.judges.check import check_labels

    assert check_labels(pytester.path / "labels.csv").unlabelled == len(rows) - 1


def _label_row(item: Any) -> list[Any]:
    """A row of the labels file (judges/check.COLUMNS) as the export writes it."""
    values = {"id": item.id, "suite": item.suite, "variant": item.variant,
              "case_id": item.case_id, "category": item.category, "expect": item.expect,
              "judge_verdict": item.verdict, "prompt": item.prompt, "response": item.answer}
    return [csv_cell(values.get(name, "")) for name in COLUMNS]


# --- hostile data ------------------------------------------------------------------------------
PAYLOADS = [
    "<script>window.__pwned = 'script'; document.title = 'pwned'</script>",
    "</script><script>window.__pwned = 'breakout'</script>",
    "</SCRIPT ><script>window.__pwned = 'breakout2'</script><!--",
    '<img src=x onerror="window.__pwned = \'img\'">',
    "javascript:window.__pwned='js-url' and [link](javascript:window.__pwned='md')",
    '<a href="javascript:window.__pwned=\'a\'" id="evil">click</a>',
    '<svg onload="window.__pwned=\'svg\'"><script>window.__pwned=\'svg2\'</script></svg>',
    "</style><style>body { display: none } #verdict { color: rgb(1, 2, 3) }</style>",
    '<iframe srcdoc="<script>parent.__pwned=\'iframe\'</script>"></iframe>',
    "\u2028\u2029 <!-- <script> window.__pwned = 'sep' </script> -->",
    "\"]}</script><script>window.__pwned='json'</script>",
    "{{constructor.constructor('window.__pwned=\"tpl\"')()}} ${window.__pwned='tpl2'}",
    "=HYPERLINK(\"http://evil.example\",\"x\")",
]
HOSTILE_CATEGORY = "<b onmouseover=\"window.__pwned='cat'\">cat</b>"


def _hostile_run(pytester: pytest.Pytester, plugin_args: list[str]) -> tuple[Path, Path]:
    prompts = [{"prompt": f"tell me {i}: {payload}", "expect": "comply" if i % 2 else "refuse",
                "category": HOSTILE_CATEGORY if i == 0 else f"c{i % 3}"}
               for i, payload in enumerate(PAYLOADS)]
    write_suite(pytester, prompts, "hostile", thresholds=GATE)
    answer = {p["prompt"]: payload for p, payload in zip(prompts, PAYLOADS, strict=True)}

    def serve(prompt: str, system: Any, body: Any) -> Reply:
        return Reply(text=answer[prompt])

    result = run_orbench(pytester, plugin_args, "--orbench-results=r.json",
                         "--orbench-html=r.html", "--orbench-cache=off", serve=serve,
                         subprocess=True)
    no_crash(result)
    return pytester.path / "r.json", pytester.path / "r.html"


def test_hostile_answers_neither_run_nor_change_the_page(
        pytester: pytest.Pytester, plugin_args: list[str], browser: Any) -> None:
    results, page_path = _hostile_run(pytester, plugin_args)
    items = read_results(results).items
    done = orbench_cli("html", results, "-o", "again.html", cwd=pytester.path)
    assert done.returncode == 0, done.stderr
    source = page_path.read_text(encoding="utf-8")
    # The data cannot end its element: one </script> per script element, none from the data.
    assert source.count("</script>") == 3 and "\u2028" not in source
    for path in (page_path, pytester.path / "again.html"):
        view = Page(browser, path)
        page = view.page
        try:
            title = page.title()
            for item in items:  # open each: its prompt and answer reach the DOM
                page.evaluate(f"location.hash = {json.dumps('#' + item.nodeid)}")
                expect(page.locator("#detail h3").first).to_have_text(item.id)
                assert page.locator("#detail pre.answer").text_content() == item.answer
                assert page.locator("#detail pre.prompt").text_content() == item.prompt
                page.hover("#detail pre.answer")
            page.select_option("#f-category", HOSTILE_CATEGORY)
            page.hover("#spacer .row")
            page.select_option("#f-category", "")
            page.fill("#f-text", "script")  # searched over every hostile text, once shown
            _shows(page, sum("script" in f"{i.prompt}\n{i.answer}\n{i.id}".lower()
                             for i in items))
            assert page.evaluate("window.__pwned") is None
            assert page.title() == title == "orbench report: m"
            assert view.errors == [] and page.evaluate("window.__csp") == []
            assert view.messages == []  # nothing logged: no blocked script, no error
            # The CSV: every cell as orbench label writes it (no formula, no control char).
            page.fill("#f-text", "")
            _shows(page, len(items))
            with page.expect_download() as download:
                page.click("#export")
            rows = list(csv.reader(io.StringIO(
                Path(download.value.path()).read_text(encoding="utf-8"))))
            assert rows[1:] == [_label_row(i) for i in items]
            assert any(row[9].startswith("'=HYPERLINK") for row in rows)
            # Nothing the data holds became an element: no image, frame, style, link or
            # script beyond the page's own.
            assert page.evaluate("""() => ({
                scripts: document.scripts.length,
                styles: document.querySelectorAll('style, link').length,
                media: document.querySelectorAll('img, iframe, object, embed, b').length,
                svgs: document.querySelectorAll('svg').length,
                links: [...document.querySelectorAll('a[href]')]
                    .map((a) => a.getAttribute('href')).filter((h) => !h.startsWith('#')),
                display: getComputedStyle(document.body).display,
                colour: getComputedStyle(document.querySelector('#verdict')).color,
            })""") == {"scripts": 3, "styles": 1, "media": 0, "svgs": 1, "links": [],
                       "display": "block", "colour": "rgb(179, 38, 30)"}  # FAILED red
        finally:
            view.close()


@given(st.lists(st.one_of(st.text(), st.none(), st.integers())))
def test_script_json_is_the_same_json_with_nothing_that_could_end_the_element(
        value: list[Any]) -> None:
    text = script_json(value)
    assert json.loads(text) == value
    assert not set(text) & {"<", ">", "&", "\u2028", "\u2029"}
    text.encode("utf-8")  # a lone surrogate escaped, never written raw


@example([["row"]] * 2050)  # past two batches
@settings(max_examples=50)
@given(st.lists(st.lists(st.text(), max_size=3), max_size=50))
def test_a_packed_block_reads_back_as_its_rows(rows: list[list[str]]) -> None:
    """gzip'd and base64'd a batch at a time (1,024 rows): read back, the same JSON."""
    out = io.StringIO()
    _packed(out, "x", ("a",), rows)
    match = re.fullmatch(r'<script type="application/gzip" id="x">([A-Za-z0-9+/=]*)</script>\n',
                         out.getvalue())
    assert match is not None
    data = json.loads(gzip.decompress(base64.b64decode(match.group(1))))
    assert data == {"columns": ["a"], "rows": rows}


def test_orbench_html_with_a_bad_results_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{}")
    done = orbench_cli("html", tmp_path / "bad.json", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [
        f"orbench html: error: {tmp_path / 'bad.json'}: not an orbench results file "
        "(no 'schema' key)"]
    done = orbench_cli("html", tmp_path / "missing.json", cwd=tmp_path)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1


def test_the_docs_screenshot_is_taken_by_the_browser_fixture(tmp_path: Path,
                                                              browser: Any) -> None:
    """docs/img/html-report.png is made by tests/browser.screenshot (through
    scripts/readme_main_job.py, from the main job's replayed run): the same call here gives a
    picture of the same width."""
    from tests.browser import screenshot
    from tests.helpers import REPO

    done = orbench_cli("html", REPO / "tests" / "data" / "results-main-full.json", "-o",
                       tmp_path / "r.html", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    screenshot(tmp_path / "r.html", tmp_path / "r.png", browser)

    def width(png: Path) -> int:
        head = png.read_bytes()[:24]
        assert head[:8] == b"\x89PNG\r\n\x1a\n"
        return int.from_bytes(head[16:20], "big")

    assert width(tmp_path / "r.png") == width(REPO / "docs" / "img" / "html-report.png")


def test_disputes_flips_samples_cost_and_parameters_are_shown(tmp_path: Path,
                                                              browser: Any) -> None:
    from tests.helpers import REPO

    data = REPO / "tests" / "data"
    done = orbench_cli("html", data / "results-main-samples.json", "--baseline",
                       data / "results-main-full.json", "-o", tmp_path / "r.html", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run = read_results(data / "results-main-samples.json")
    view = Page(browser, tmp_path / "r.html")
    try:
        page = view.page

        def table(selector: str) -> list[list[str]]:
            return page.eval_on_selector_all(
                f"{selector} tr", "rows => rows.map(r => [...r.cells].map(c => c.textContent))")

        disputed = run.run.disputed or []
        assert table("#disputed tbody") == [[d.id, d.reason, d.decided_by] for d in disputed]
        flips = run.run.rewordings.flips if run.run.rewordings else []
        assert [row[1:3] + row[4:5] for row in table("#flips tbody")] == [
            [f.original, f.rewording, f.answer] for f in flips]
        parameters = dict(table("#parameters"))
        assert parameters["seed"] == str(run.run.parameters.seed)
        assert parameters["cost"] == run.run.cost.line()
        # The samples' refusal fraction, per prompt.
        assert page.eval_on_selector_all("#spacer .row .samples", "c => c.map(x => x.textContent)")[
            :3] == [f"{i.refusals}/{i.samples}" for i in run.items[:3]]
        page.evaluate(f"location.hash = {json.dumps('#' + run.items[1].id)}")
        expect(page.locator("#detail dd").filter(has_text="answers refused")).to_have_text(
            f"{run.items[1].refusals} of {run.items[1].samples} answers refused (33.3%)")
        assert view.errors == [] and page.evaluate("window.__csp") == []
    finally:
        view.close()


# --- orbench html reads a results file in bounded memory -----------------------------------------
def _main_results(tmp_path: Path) -> Path:
    """tests/data's full run, written as a run writes it (one item a line), whole answers in."""
    from orbench_pytest.reports.results import write_results
    from tests.helpers import REPO

    run = read_results(REPO / "tests" / "data" / "results-main-full.json")
    items = [dataclasses.replace(item, prompt=f"prompt {n} </script>", answer=f"answer {n}\u2028")
             for n, item in enumerate(run.items)]
    path = tmp_path / "results.json"
    write_results(path, dataclasses.replace(run.document, items=items))
    return path


def test_a_page_read_an_item_at_a_time_is_the_page_read_whole(tmp_path: Path) -> None:
    from orbench_pytest.reports.html import write_html
    from orbench_pytest.reports.results import read_without_texts

    path = _main_results(tmp_path)
    whole = tmp_path / "whole.html"
    write_html(whole, read_results(path), read_results(path))
    run, texts = read_without_texts(path)
    assert all(item.answer == item.prompt == "" for item in run.items)  # not held
    streamed = tmp_path / "streamed.html"
    write_html(streamed, run, run, texts=texts, baseline_texts=texts)
    assert streamed.read_bytes() == whole.read_bytes()
    # A file laid out otherwise (one line): read whole, the same page.
    (tmp_path / "one-line.json").write_text(json.dumps(json.loads(path.read_text())))
    done = orbench_cli("html", "one-line.json", "-o", "again.html", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    done = orbench_cli("html", "results.json", "-o", "cli.html", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    strip = re.compile(r"one-line|results")  # the page names its source file
    assert strip.sub("", (tmp_path / "again.html").read_text()) == \
        strip.sub("", (tmp_path / "cli.html").read_text())


@pytest.mark.parametrize("damage, message", [
    (lambda text: text[: text.index('"items": [') + 400], "not JSON"),
    (lambda text: text[: text.rindex("\n ]")] + "\n", "the items end nowhere"),
    (lambda text: text.replace('"answer":"answer 3', '"answer":5,"x":"', 1),
     "items[3].answer: expected text"),
])
def test_a_damaged_results_file_is_one_line_naming_it(tmp_path: Path, damage: Any,
                                                      message: str) -> None:
    path = _main_results(tmp_path)
    path.write_text(damage(path.read_text(encoding="utf-8")), encoding="utf-8")
    done = orbench_cli("html", path, "-o", "r.html", cwd=tmp_path)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "r.html").exists()
