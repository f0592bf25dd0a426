"""Sybil, pytest-codeblocks and this project's docs runner on the same page, serial and -n 2.

    pip install sybil pytest-codeblocks     # only for this comparison; neither is a dependency
    python benchmarks/docs_runners.py

The page: one Python block that sets x, then 30 steps of a Python block that adds 1 to x and
checks it and a shell block, then one block marked `<!-- not-run: … -->` that would exit 3. A
runner that fits the project's convention passes all of it, serial and under `pytest -n 2`.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

SYBIL_CONFTEST = '''
import subprocess
from sybil import Sybil
from sybil.parsers.markdown import CodeBlockParser, PythonCodeBlockParser, SkipParser

def run_bash(example):
    subprocess.run(["bash", "-c", example.parsed], check=True, capture_output=True)

pytest_collect_file = Sybil(
    parsers=[PythonCodeBlockParser(), CodeBlockParser(language="bash", evaluator=run_bash),
             SkipParser()],
    patterns=["*.md"],
).pytest()
'''

OWN_TEST = f'''
import sys
sys.path.insert(0, {str(REPO)!r})
from pathlib import Path
import pytest
from tests.docs_blocks import run_page

@pytest.mark.parametrize("page", sorted(Path(__file__).parent.glob("docs/*.md")))
def test_page(page, tmp_path):
    run_page(page, tmp_path)
'''


def page() -> str:
    parts = ["# Page\n\n```python\nx = 0\n```\n"]
    for i in range(30):
        parts.append(f"\nStep {i}.\n\n```python\nx += 1\nassert x == {i + 1}\n```\n")
        parts.append(f'\n```bash\ntest -n "$HOME" && echo step{i}\n```\n')
    parts.append("\n<!-- not-run: needs an API key -->\n```bash\nexit 3\n```\n")
    return "".join(parts)


def run(name: str, folder: Path, args: list[str]) -> None:
    for extra in ([], ["-n", "2"]):
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               "-p", "no:randomly", *args, *extra], cwd=folder,
                              capture_output=True, text=True, check=False)
        wall = time.perf_counter() - started
        closing = (done.stdout.strip().splitlines() or ["(nothing)"])[-1]
        print(f"{name:18} {'-n 2' if extra else 'serial':6} exit {done.returncode}  "
              f"{wall:5.1f} s  {closing}")


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        for name in ("codeblocks", "sybil", "own"):
            (base / name / "docs").mkdir(parents=True)
            (base / name / "docs" / "page.md").write_text(page())
        (base / "sybil" / "conftest.py").write_text(SYBIL_CONFTEST)
        (base / "own" / "test_docs_pages.py").write_text(OWN_TEST)
        if importlib.util.find_spec("pytest_codeblocks"):
            run("pytest-codeblocks", base / "codeblocks", ["--codeblocks", "docs"])
        else:
            print("pytest-codeblocks: not installed (pip install pytest-codeblocks)")
        if importlib.util.find_spec("sybil"):
            run("sybil", base / "sybil", ["docs"])
        else:
            print("sybil: not installed (pip install sybil)")
        run("own runner", base / "own", ["test_docs_pages.py"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
