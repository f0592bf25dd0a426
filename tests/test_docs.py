"""README.md and docs/ are tested: their code blocks run, generated pages are fresh.

The block runner and its rules: tests/docs_blocks.py (for people: docs/contributing.md).
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.docs_blocks import REPO, PageError, output_matches, pages, parse, run_page
from tests.timeouts import SUBPROCESS_TIMEOUT_S

PAGES = pages()


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_the_pages_code_blocks_run(page: Path, tmp_path: Path,
                                   record_property: Callable[[str, object], None]) -> None:
    started = time.perf_counter()
    run = run_page(page, tmp_path)
    # Summed over the session (under xdist too) by tests/conftest.py's terminal summary.
    record_property("docs_blocks", [run.ran, run.not_run, run.files,
                                    round(time.perf_counter() - started, 2)])


def test_there_are_pages_and_blocks_to_run() -> None:
    assert len(PAGES) >= 10, PAGES
    executed = [block for page in PAGES for block in parse(page) if block.executed]
    assert len(executed) >= 20, len(executed)


def test_a_not_run_block_is_skipped_and_a_file_block_is_written(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Page\n\n<!-- not-run: needs a key -->\n```bash\nexit 3\n```\n\n"
                    "<!-- file: app/answer.py -->\n```python\nREPLY = 'no'\n```\n\n"
                    "```bash\ntest -f app/answer.py\n```\n\n"
                    "```python\nimport pathlib\n"
                    "x = pathlib.Path('app/answer.py').read_text()\n```\n"
                    "\n```python\nassert 'REPLY' in x\n```\n\n```yaml\nnot: run\n```\n")
    folder = tmp_path / "run"
    folder.mkdir()
    run = run_page(page, folder)
    assert (run.ran, run.not_run, run.files, run.skipped_languages) == (3, 1, 1, 1)


def test_a_failing_block_fails_the_page_and_names_its_line(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Page\n\n```bash\necho fine\n```\n\nText.\n\n"
                    "```bash\nfalse\necho after\n```\n")
    with pytest.raises(AssertionError, match=r"page\.md:9: the bash block exited 1"):
        run_page(page, tmp_path)


def test_a_directive_binds_only_the_block_right_below_it(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("<!-- not-run: far away -->\n\nA paragraph.\n\n```bash\nexit 4\n```\n")
    with pytest.raises(AssertionError, match="exited 4"):
        run_page(page, tmp_path)


def test_a_not_run_needs_its_reason() -> None:
    with pytest.raises(PageError, match="not-run: needs a value"):
        parse(Path("page.md"), "<!-- not-run: -->\n```bash\ntrue\n```\n")


def test_a_directive_is_one_line() -> None:
    with pytest.raises(PageError, match="a directive is one line"):
        parse(Path("page.md"), "<!-- not-run: a reason\nover two lines -->\n```bash\ntrue\n```\n")


def test_an_unclosed_block_is_an_error() -> None:
    with pytest.raises(PageError, match="never closed"):
        parse(Path("page.md"), "```bash\ntrue\n")


def test_a_console_block_checks_output_and_status(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```console\n$ printf 'a\\nb 12.5s\\nc\\nd\\n'\na\nb …s\n…\nd\n"
                    "$ echo one \\\n  two\none two\n```\n\n"
                    "<!-- exit: 3 -->\n```console\n$ echo out; exit 3\nout\n```\n")
    assert run_page(page, tmp_path).ran == 2
    stale = tmp_path / "stale.md"
    stale.write_text("```console\n$ echo new text\nold text\n```\n")
    with pytest.raises(AssertionError, match="expected 'old text', printed 'new text'"):
        run_page(stale, tmp_path)
    failing = tmp_path / "failing.md"
    failing.write_text("```console\n$ exit 1\n```\n")
    with pytest.raises(AssertionError, match="exited 1, not 0"):
        run_page(failing, tmp_path)


def test_console_output_matching() -> None:
    assert output_matches(["a", "…", "z"], ["a", "b", "c", "z"]) is None
    assert output_matches(["a", "z"], ["a", "b", "z"]) == "expected 'z', printed 'b'"
    assert output_matches(["x … y"], ["x 1 2 3 y  "]) is None
    assert output_matches(["a", "b"], ["a"]) == "expected 'b', printed '(end of output)'"


@pytest.mark.parametrize("script", ["docs_options.py", "docs_results.py"])
def test_the_generated_pages_are_current(script: str) -> None:
    """docs/options.md from the options table, docs/results.md from the results model."""
    done = subprocess.run([sys.executable, str(REPO / "scripts" / script), "--check"],
                          capture_output=True, text=True, check=False,
                          timeout=SUBPROCESS_TIMEOUT_S)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_readme_fits_a_page_and_pins_no_commit() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.encode()) <= 15 * 1024, len(readme.encode())
    assert not re.search(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b", readme)


def test_every_page_is_linked_from_the_readme_or_the_docs_index() -> None:
    linked = (REPO / "README.md").read_text() + (REPO / "docs" / "index.md").read_text()
    for page in PAGES:
        if page.name in ("README.md", "index.md"):
            continue
        relative = page.relative_to(REPO / "docs").as_posix()
        assert relative in linked, f"docs/{relative} is linked from neither README nor index"


def test_a_default_the_prose_states_is_the_one_in_force() -> None:
    """Where a sentence needs a default's value (arithmetic, a table of bounds), the value
    stated is core/defaults.py's; elsewhere the prose links to the generated options.md."""
    from orbench_pytest.core import defaults

    word = ("zero", "one", "two", "three", "four")
    stated = {
        "large-runs.md": [f"the default ceiling of {defaults.CONCURRENCY} in flight"],
        "concurrency.md": [f"The embedded model keeps {word[defaults.LOCAL_SLOTS]} fixed slot"],
        "embedded-model.md": [f"{word[defaults.LOCAL_THREADS]} CPU thread by default",
                              f"serves {word[defaults.LOCAL_SLOTS]} slot",
                              f"keeps {word[defaults.GENERATE_LOCAL_SLOTS]} slots"],
        "batch.md": [f"{defaults.BATCH_MAX_REQUESTS:,} requests or "
                     f"{defaults.BATCH_MAX_BYTES // 10**6} MB a file"],
        "hostile-input.md": [f"samples ≤ {defaults.MAX_REQUESTS:,} |",
                             f"1 to {defaults.MAX_REWORDINGS:,} tries per prompt; 1 to "
                             f"{defaults.MAX_REWORDINGS_BUDGET:,} rewordings in all",
                             f"| {defaults.CACHE_LOCK_WAIT_S:g} s in all "],
    }
    from orbench_pytest.core.bounded import FLIP_ANSWER_CHARS

    stated["rewordings.md"] = [f"N at most {defaults.MAX_REWORDINGS:,}",
                               f"at most {defaults.MAX_REWORDINGS_BUDGET:,}) bounds",
                               f"up to {FLIP_ANSWER_CHARS:,} characters"]
    for page, phrases in stated.items():
        text = " ".join((REPO / "docs" / page).read_text(encoding="utf-8").split())
        assert [p for p in phrases if p not in text] == [], page
