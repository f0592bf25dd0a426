"""The runner of the code blocks in README.md and docs/: each page's blocks, in order.

Its rules are written for people in docs/contributing.md ("Code blocks are tests"); in short:

- A fenced block whose language is `bash`, `sh`, `console` or `python` is executed; any other
  language (`text`, `yaml`, `toml`, `csv`, none) is not.
- A block is bound by the comment lines right above its fence (blank lines may stand between):
  `<!-- not-run: REASON -->` skips it (the reason is required), `<!-- file: PATH -->` writes
  its text to PATH in the page's folder instead of running it (any language), and
  `<!-- exit: N -->` says what exit status a `console` block's last command has.
- `<!-- cwd: checkout -->` on its own line makes the page's later blocks run in the project's
  checkout instead of the page's own empty folder (for pages about this repository).
- `bash` / `sh`: the whole block is one `bash -e -o pipefail` script; it must exit 0.
- `console`: lines starting with `$ ` are commands (a trailing backslash continues one); the
  lines after a command are its expected output, matched in order against what it printed
  (stdout and stderr): each expected line must match the next printed line, `…` or `...`
  inside a line matches any text, and a line that is only `…` (or `...`) skips any number of
  printed lines. Trailing spaces are ignored.
- `python`: run with exec in one namespace per page, in the page's folder.

Every page runs in a fresh temporary folder (a new project, not this checkout) with its own
orbench cache, no API key and no hub access (HF_HUB_OFFLINE=1); the folder and Python
namespace last for the page, shell variables only for a block.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests.timeouts import scaled

REPO = Path(__file__).resolve().parent.parent
EXECUTED = ("bash", "sh", "console", "python")
BLOCK_TIMEOUT_S = scaled(300.0)  # docs/contributing.md: at most 300 s, busy machines aside

_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
_DIRECTIVE = re.compile(r"^\s*<!--\s*(?P<key>not-run|file|exit|cwd)\s*:\s*(?P<value>.*?)\s*-->\s*$")
_ELLIPSIS = ("…", "...")


class PageError(Exception):
    """A page breaks the runner's rules (a not-run without a reason, an unclosed fence)."""


@dataclass
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    language: str
    text: str
    not_run: str | None = None
    file: str | None = None
    exit_status: int = 0
    cwd_checkout: bool = False

    @property
    def where(self) -> str:
        return f"{self.page.name}:{self.line}"

    @property
    def executed(self) -> bool:
        return self.not_run is None and self.file is None and self.language in EXECUTED


@dataclass
class PageRun:
    ran: int = 0
    not_run: int = 0
    files: int = 0
    skipped_languages: int = 0
    log: list[str] = field(default_factory=list)


def pages(repo: Path = REPO) -> list[Path]:
    """README.md and every Markdown page under docs/."""
    found = [repo / "README.md"]
    found += sorted((repo / "docs").rglob("*.md")) if (repo / "docs").is_dir() else []
    return [page for page in found if page.is_file()]


def parse(page: Path, text: str | None = None) -> list[Block]:
    """Every fenced block of a page, with the directives bound to it."""
    lines = (page.read_text(encoding="utf-8") if text is None else text).splitlines()
    blocks: list[Block] = []
    pending: dict[str, str] = {}
    checkout = False
    index = 0
    while index < len(lines):
        line = lines[index]
        directive = _DIRECTIVE.match(line)
        if directive:
            key, value = directive["key"], directive["value"]
            if key == "cwd":
                if value != "checkout":
                    raise PageError(f"{page.name}:{index + 1}: cwd: takes only 'checkout'")
                checkout = True
            else:
                if not value:
                    raise PageError(f"{page.name}:{index + 1}: {key}: needs a value "
                                    f"(<!-- {key}: … -->)")
                pending[key] = value
            index += 1
            continue
        if re.match(r"\s*<!--\s*(not-run|file|exit|cwd)\s*:", line):
            raise PageError(f"{page.name}:{index + 1}: a directive is one line: "
                            "<!-- key: value -->")
        fence = _FENCE.match(line)
        if not fence:
            if line.strip():
                pending = {}  # a directive binds only the block right below it
            index += 1
            continue
        opening, start = fence["fence"], index
        body: list[str] = []
        index += 1
        while index < len(lines):
            closing = lines[index].strip()
            if closing.startswith(opening[0] * len(opening)) and not closing.strip(opening[0]):
                break
            body.append(lines[index][len(fence["indent"]):] if lines[index].startswith(
                fence["indent"]) else lines[index])
            index += 1
        else:
            raise PageError(f"{page.name}:{start + 1}: the block is never closed")
        index += 1
        language = (fence["info"].split() or [""])[0].lower()
        try:
            status = int(pending.get("exit", "0"))
        except ValueError:
            raise PageError(f"{page.name}:{start + 1}: exit: takes a number") from None
        blocks.append(Block(page, start + 1, language, "\n".join(body) + "\n",
                            not_run=pending.get("not-run"), file=pending.get("file"),
                            exit_status=status, cwd_checkout=checkout))
        pending = {}
    return blocks


def environment(folder: Path) -> dict[str, str]:
    """What every block sees: this interpreter's tools first, no key, no hub, its own cache."""
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("OPENAI_", "ORBENCH_", "PYTEST_", "HF_"))}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["ORBENCH_CACHE_DIR"] = str(folder / ".orbench-cache")
    env["HF_HUB_OFFLINE"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("COLUMNS", None)
    env["COLUMNS"] = "100"
    return env


def run_page(page: Path, folder: Path, repo: Path = REPO) -> PageRun:
    """Run a page's blocks in order in `folder` (fresh); raise AssertionError at the first
    block that fails, naming it."""
    run = PageRun()
    namespace: dict[str, object] = {"__name__": "__docs__"}
    env = environment(folder)
    for block in parse(page):
        if block.not_run is not None:
            run.not_run += 1
            continue
        cwd = repo if block.cwd_checkout else folder
        if block.file is not None:
            target = folder / block.file
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.text, encoding="utf-8")
            run.files += 1
            continue
        if block.language not in EXECUTED:
            run.skipped_languages += 1
            continue
        if block.language in ("bash", "sh"):
            _run_shell(block, cwd, env)
        elif block.language == "console":
            _run_console(block, cwd, env)
        else:
            _run_python(block, cwd, env, namespace)
        run.ran += 1
        run.log.append(block.where)
    return run


def _shell(command: str, block: Block, cwd: Path, env: dict[str, str]
           ) -> subprocess.CompletedProcess[str]:
    bash = shutil.which("bash") or "/bin/bash"
    try:
        return subprocess.run([bash, "-e", "-o", "pipefail", "-c", command], cwd=cwd, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=BLOCK_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{block.where}: still running after {BLOCK_TIMEOUT_S:.0f} s "
                             "(a long run is marked <!-- not-run: … -->)") from None


def _run_shell(block: Block, cwd: Path, env: dict[str, str]) -> None:
    done = _shell(block.text, block, cwd, env)
    if done.returncode != 0:
        raise AssertionError(f"{block.where}: the {block.language} block exited "
                             f"{done.returncode}:\n{block.text}\n--- output ---\n"
                             f"{done.stdout[-4000:]}")


def console_steps(text: str) -> list[tuple[str, list[str]]]:
    """A console block's commands, each with the lines expected after it."""
    steps: list[tuple[str, list[str]]] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("$ "):
            command = line[2:]
            while command.endswith("\\") and index + 1 < len(lines):
                index += 1
                command = command + "\n" + lines[index]
            steps.append((command, []))
        elif steps:
            steps[-1][1].append(line)
        elif line.strip():
            raise PageError(f"console text before the first '$ ' command: {line!r}")
        index += 1
    return steps


def output_matches(expected: list[str], printed: list[str]) -> str | None:
    """None when `printed` matches `expected` (the console rules); else what went wrong."""
    printed = [line.rstrip() for line in printed]
    position = 0
    skipping = False
    for want in (line.rstrip() for line in expected):
        if want.strip() in _ELLIPSIS:
            skipping = True
            continue
        pattern = _line_pattern(want)
        if skipping:
            while position < len(printed) and not pattern.fullmatch(printed[position]):
                position += 1
        if position >= len(printed) or not pattern.fullmatch(printed[position]):
            seen = printed[position] if position < len(printed) else "(end of output)"
            return f"expected {want!r}, printed {seen!r}"
        position += 1
        skipping = False
    return None


def _line_pattern(line: str) -> re.Pattern[str]:
    parts = re.split(r"…|\.\.\.", line)
    return re.compile(".*?".join(re.escape(part) for part in parts))


def _run_console(block: Block, cwd: Path, env: dict[str, str]) -> None:
    try:
        steps = console_steps(block.text)
    except PageError as exc:
        raise AssertionError(f"{block.where}: {exc}") from None
    for number, (command, expected) in enumerate(steps, 1):
        done = _shell(command, block, cwd, env)
        last = number == len(steps)
        want_status = block.exit_status if last else 0
        if done.returncode != want_status:
            raise AssertionError(f"{block.where}: `{command}` exited {done.returncode}, not "
                                 f"{want_status}:\n{done.stdout[-4000:]}")
        problem = output_matches(expected, done.stdout.splitlines())
        if problem:
            raise AssertionError(f"{block.where}: `{command}`: {problem}\n--- printed ---\n"
                                 f"{done.stdout[-4000:]}")


def _run_python(block: Block, cwd: Path, env: dict[str, str],
                namespace: dict[str, object]) -> None:
    here = Path.cwd()
    saved = dict(os.environ)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    try:
        exec(compile(block.text, block.where, "exec"), namespace)  # the page's own code
    except Exception as exc:
        raise AssertionError(f"{block.where}: the python block raised "
                             f"{type(exc).__name__}: {exc}\n{block.text}") from exc
    finally:
        os.chdir(here)
        os.environ.clear()
        os.environ.update(saved)
