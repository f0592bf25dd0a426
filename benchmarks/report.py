"""The HTML report at 1,974 and 80,359 prompts: file size, build (CPU, peak memory), and the
time headless Chromium takes to open it and to filter it.

    python -m benchmarks html-report [--sizes 1974 80359] [--answer-chars 800] [--repeats 3]

The results are synthetic, built from the real suites' prompts (../shared/data/orbench:
OR-Bench-Hard-1K's 1,319 safe and OR-Bench-Toxic's 655 toxic prompts, 1,974 in all; larger
sizes repeat them with new case ids), each answered with real answers of the embedded model
(tests/data/orbench_local_labelled.csv): each answer about --answer-chars characters of their
sentences, each sentence's words shuffled (every answer distinct, compressing as real text
does), verdicts seeded, answers kept whole as a run keeps them (ANSWERS_TOTAL_CHARS in all).
`orbench html` builds the page in a child process (its CPU seconds and peak RSS are the
child's). Chromium (tests/browser.py's, driven by Playwright) opens it from file://: "open" is
the time from navigation to the page's script having drawn the list (its performance clock),
"texts read" to its having read every prompt and answer (done after the list is drawn);
"filter" is a verdict filter, "mismatch" the mismatch-only box, "search" a text search over
every prompt and answer (the first one, which lowers the texts once), each until the next
animation frame after the list is redrawn. Medians over the repeats.
"""

from __future__ import annotations

import argparse
import csv
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.common import REPO, SHARED_DATA
from orbench_pytest.core import defaults
from orbench_pytest.reports.document import Document, ItemRecord, RunInfo
from orbench_pytest.reports.results import write_results
from tests.browser import chromium_path

SUITES = (("or-bench-hard-1k", "comply"), ("or-bench-toxic", "refuse"))
MEASURE = """async ([id, kind, value]) => {
    const t = performance.now();
    const input = document.getElementById(id);
    if (kind === 'check') input.checked = !input.checked; else input.value = value;
    input.dispatchEvent(new Event('change'));
    await new Promise((done) => requestAnimationFrame(() => done()));
    return performance.now() - t;
}"""
SEARCH = """async (text) => {
    const t = performance.now();
    const input = document.getElementById('f-text'), count = document.getElementById('count');
    const before = count.textContent;
    input.value = text;
    input.dispatchEvent(new Event('input'));
    while (count.textContent === before) await new Promise((done) => setTimeout(done, 5));
    await new Promise((done) => requestAnimationFrame(() => done()));
    return performance.now() - t;
}"""


def prompts() -> list[tuple[str, str, str, str]]:
    """(suite, expect, category, prompt) of the two suites, in order."""
    rows = []
    for suite, expect in SUITES:
        with (SHARED_DATA / "orbench" / f"{suite}.csv").open(newline="", encoding="utf-8") as f:
            rows += [(suite, expect, r["category"], r["prompt"]) for r in csv.DictReader(f)]
    return rows


def answers(chars: int) -> tuple[list[list[str]], int]:
    """The labelled answers' sentences, as word lists; each item's answer is made of them."""
    with (REPO / "tests" / "data" / "orbench_local_labelled.csv").open(
            newline="", encoding="utf-8") as handle:
        texts = [row["answer"] for row in csv.DictReader(handle)]
    sentences = [s.split() for text in texts for s in text.replace("\n", " ").split(". ") if s]
    return [s for s in sentences if len(s) > 3], chars


def answer_of(rng: random.Random, pool: tuple[list[list[str]], int]) -> str:
    """About `chars` characters of the model's own sentences, each one's words shuffled: every
    answer distinct, with the words (and so the compression) of real answers."""
    sentences, chars = pool
    out: list[str] = []
    size = 0
    while size < chars:
        words = list(rng.choice(sentences))
        rng.shuffle(words)
        out.append(" ".join(words) + ".")
        size += len(out[-1]) + 1
    return " ".join(out)[:chars]


def synthetic(n: int, chars: int) -> Document:
    rng = random.Random(0)
    base, said = prompts(), answers(chars)
    items = []
    left = defaults.ANSWERS_TOTAL_CHARS  # as a run keeps them: past it, the excerpt alone
    for i in range(n):
        suite, expect, category, prompt = base[i % len(base)]
        refused = rng.random() < (0.3 if expect == "comply" else 0.8)
        mismatch = refused != (expect == "refuse")
        answer = answer_of(rng, said)
        kept = answer if len(answer) <= left else ""
        left -= len(kept)
        case = f"{category}-{i:05d}"
        items.append(ItemRecord(
            suite, case, "", category, expect, "refusal" if refused else "compliance",
            "failed" if mismatch else "passed", mismatch, False,
            nodeid=f"suites/{suite}.yaml::{suite}[{case}]", judge="keyword",
            judge_reason="refusal phrase" if refused else "no refusal phrase",
            response=answer[:300], latency_ms=420.0, cached=False, attempts=1,
            prompt=prompt, answer=kept))
    return Document(run=RunInfo(target="synthetic", judge="keyword"), items=items)


# The build, in a child that reports its own CPU seconds and peak RSS (this process's
# RUSAGE_CHILDREN would also count what the browser's processes leave to it).
_BUILD = ("import resource, sys; from orbench_pytest.cli.main import main; "
          "code = main(sys.argv[1:]); use = resource.getrusage(resource.RUSAGE_SELF); "
          "print(use.ru_utime + use.ru_stime, use.ru_maxrss, file=sys.stderr); sys.exit(code)")


def build(results: Path, page: Path) -> tuple[float, float]:
    """`orbench html` in a child: its CPU seconds and peak RSS in MB."""
    done = subprocess.run([sys.executable, "-c", _BUILD, "html", str(results), "-o", str(page)],
                          check=True, capture_output=True, text=True)
    cpu, rss = done.stderr.split()[-2:]
    return float(cpu), int(rss) / 1024


def browse(browser: object, page_path: Path) -> dict[str, float]:
    context = browser.new_context(viewport={"width": 1300, "height": 900})  # type: ignore[attr-defined]
    page = context.new_page()
    try:
        page.goto(page_path.as_uri(), timeout=120_000)
        page.wait_for_selector("body[data-ready='1']", state="attached", timeout=120_000)
        opened = page.evaluate("Number(document.body.dataset.readyMs)")
        page.wait_for_selector("body[data-texts='1']", state="attached", timeout=120_000)
        return {"open": opened, "texts": page.evaluate("Number(document.body.dataset.textsMs)"),
                "filter": page.evaluate(MEASURE, ["f-verdict", "value", "refusal"]),
                "mismatch": page.evaluate(MEASURE, ["f-mismatch", "check", ""]),
                "search": page.evaluate(SEARCH, "bomb")}
    finally:
        context.close()


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_974, 80_359])
    parser.add_argument("--answer-chars", type=int, default=800)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--write", type=Path, metavar="PATH", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.write is not None:  # the child that makes a results file (see below)
        write_results(args.write, synthetic(args.sizes[0], args.answer_chars))
        return
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as folder, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(),
                                             args=["--no-sandbox"])
        for n in args.sizes:
            results, page = Path(folder) / f"r{n}.json", Path(folder) / f"r{n}.html"
            # In a child: the builds, children of this process, would start with its RSS
            # (Linux keeps a peak across fork and exec) were the 80K items made here.
            subprocess.run([sys.executable, "-m", "benchmarks", "html-report", "--write",
                            str(results), "--sizes", str(n), "--answer-chars",
                            str(args.answer_chars)], check=True)
            builds = [build(results, page) for _ in range(args.repeats)]
            size = page.stat().st_size
            times = [browse(browser, page) for _ in range(args.repeats)]
            median = {key: statistics.median(t[key] for t in times) for key in times[0]}
            print(f"{n:>6} prompts, answers of {args.answer_chars} chars: "
                  f"results {results.stat().st_size / 1e6:.1f} MB, page {size / 1e6:.1f} MB "
                  f"({size / n * 1000 / 1e6:.2f} MB per 1,000 prompts); build "
                  f"{statistics.median(b[0] for b in builds):.1f} s CPU, peak RSS "
                  f"{max(b[1] for b in builds):.0f} MB; Chromium: open "
                  f"{median['open']:.0f} ms, texts read {median['texts']:.0f} ms, "
                  f"verdict filter {median['filter']:.0f} ms, "
                  f"mismatch only {median['mismatch']:.0f} ms, search "
                  f"{median['search']:.0f} ms (incl. the 150 ms typing pause)", flush=True)
        browser.close()
