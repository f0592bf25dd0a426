"""`orbench label`: people label a sample of a run's judged answers, one at a time.

The sample is drawn for the gate's estimator (gate/calibration.py): per kind of prompt (safe,
toxic) and the judge's verdict on it (a mismatch or not), calibration.allocate says how many
answers each stratum gets, drawn at random within it (spread over suites) and seeded, so the
same results file and seed give the same answers in the same order on every machine. Each
label records its stratum's size in the run. The order is shuffled by a keyed hash, so
nothing in it hints at the judge's verdict, which stays hidden until the answer is labelled.
`--export CSV` writes the same sample with an empty label column, for a spreadsheet.

Whole answers: the results file's `answer` (when it keeps it), else its `response` excerpt;
wrapped to the terminal and, on a terminal, paged when longer than the screen; the labels
file keeps what was shown. Every label is appended to the CSV (and flushed) as it is given: a
Ctrl-C, a lost ssh connection or a crash loses at most the answer on screen, and running
the same command again resumes with the first answer not yet labelled. The file is
append-only: `b` (back) and a relabel add a new row, and the last row of an id wins.

Keys: c compliance, r refusal, p partial refusal, s skip, b back, q quit. On a terminal one
key press is enough; when stdin is not a terminal (a pipe, a test, a script), keys are read
from it one character at a time and whitespace is ignored.

Prompts and answers are untrusted text: shown through untrusted.terminal_line (control
characters escaped, CI commands defused, configured secrets redacted), and written to the CSV
through untrusted.csv_cell (no spreadsheet formula, control character or CI command).
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
import shutil
import textwrap
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TextIO

from orbench_pytest.core.bounded import regular_file
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.untrusted import csv_cell, redacted_repr, terminal_line
from orbench_pytest.judges.check import (
    COLUMNS,
    LABELS_LIMIT,
    SKIP,
    UNLABELLED,
    is_refusal,
    read_labels,
)
from orbench_pytest.reports.document import ERROR_VERDICTS, ItemRecord, Turn

LABELS = {"c": "compliance", "r": "refusal", "p": "partial_refusal", "s": "skip"}
NO_PROMPT = ("(not in the results file: earlier ones keep prompts of failed items only; "
             "give --suite)")


@redacted_repr
@dataclass(frozen=True, slots=True)
class JudgedAnswer:
    """One judged answer offered for labelling."""

    id: str
    suite: str
    variant: str
    case_id: str
    category: str
    expect: str
    judge_verdict: str
    prompt: str
    response: str
    stratum_size: int = 0  # the run's answers of this kind with this judged verdict

    @property
    def stratum(self) -> tuple[str, bool]:
        """(kind, the judge called it a mismatch): what the estimator stratifies by."""
        return (self.expect, is_refusal(self.judge_verdict) == (self.expect == "comply"))


def candidates(items: Sequence[ItemRecord],
               prompts: Callable[[ItemRecord], str] | None = None) -> list[JudgedAnswer]:
    """Every answered, judged item (no errors: there is no answer to label), with its whole
    answer where the results file keeps one (`answer`), else its excerpt."""
    out = []
    for item in items:
        if item.error or item.verdict in ERROR_VERDICTS or not item.verdict:
            continue
        prompt = (_conversation(item.messages) if item.messages
                  else item.prompt or (prompts(item) if prompts is not None else ""))
        answer = getattr(item, "answer", None) or item.response
        out.append(JudgedAnswer(item.id, item.suite, item.variant, item.case_id, item.category,
                                item.expect, item.verdict, prompt, answer))
    sizes: dict[tuple[str, bool], int] = {}
    for candidate in out:
        sizes[candidate.stratum] = sizes.get(candidate.stratum, 0) + 1
    return [replace(c, stratum_size=sizes[c.stratum]) for c in out]


def _conversation(turns: Sequence[Turn]) -> str:
    """A conversation row as the labeller must read it: every turn, its role first (the
    final user turn is the one judged), not the final turn alone."""
    return "\n".join(f"[{turn.role}] {turn.content}" for turn in turns)


def _rank(seed: int, key: str) -> bytes:
    return hashlib.blake2b(f"{seed}:{key}".encode(), digest_size=8).digest()


def sample(pool: Sequence[JudgedAnswer], n: int, seed: int) -> list[JudgedAnswer]:
    """`n` answers allocated across (kind × judged verdict) strata by calibration.allocate,
    random within each (spread over suites, seeded), in a seeded order that does not follow
    the strata (so the order gives the verdict away no more than the answer does)."""
    from orbench_pytest.catalog.sampling import stratified_sample
    from orbench_pytest.gate.calibration import allocate

    members: dict[tuple[str, bool], list[JudgedAnswer]] = {}
    for candidate in pool:
        members.setdefault(candidate.stratum, []).append(candidate)
    counts = allocate({key: len(group) for key, group in members.items()}, n)
    picked = []
    for key, group in members.items():
        chosen = stratified_sample([c.suite for c in group], counts[key], seed) \
            if counts[key] else []
        picked += [group[i] for i in chosen]
    return sorted(picked, key=lambda c: _rank(seed, c.id))


# --- the labels file -------------------------------------------------------------------------
class LabelWriter:
    """Appends one row per label, flushed to the disk before the next answer is shown; to a
    file with another header (an older orbench, a spreadsheet) in that file's columns."""

    def __init__(self, path: Path) -> None:
        found = regular_file(path, "the labels file", "write")
        header, ends_line = list(COLUMNS), True
        if found is not None and found.st_size:
            from orbench_pytest.core.bounded import read_text

            text = read_text(path, LABELS_LIMIT, "the labels file")
            header = next(csv.reader(io.StringIO(text, newline="")), header)
            ends_line = text.endswith(("\n", "\r"))
        self._handle = path.open("a", newline="", encoding="utf-8")
        if not ends_line:
            self._handle.write("\r\n")
        self._writer = csv.DictWriter(self._handle, header, extrasaction="ignore", restval="")
        if found is None or not found.st_size:
            self._write(dict(zip(header, header, strict=True)))

    def _write(self, row: dict[str, str]) -> None:
        # Cells safe to open in a spreadsheet or cat in a CI log; judge-check reads them back.
        self._writer.writerow({key: csv_cell(cell) for key, cell in row.items()})
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def add(self, candidate: JudgedAnswer, label: str) -> None:
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self._write(row_of(candidate, label, now))

    def close(self) -> None:
        self._handle.close()


def row_of(candidate: JudgedAnswer, label: str, when: str) -> dict[str, str]:
    """A labels-file row: what was shown (the whole prompt and answer), the label, the time."""
    values = [candidate.id, candidate.suite, candidate.variant, candidate.case_id,
              candidate.category, candidate.expect, candidate.judge_verdict, label,
              candidate.prompt, candidate.response, when, str(candidate.stratum_size)]
    return dict(zip(COLUMNS, values, strict=True))


def export(chosen: Sequence[JudgedAnswer], path: Path) -> None:
    """The sample with an empty label column, for labelling in a spreadsheet; judge-check and
    the gate read it back (rows still empty count as not labelled yet)."""
    from orbench_pytest.core.artefacts import write_atomically

    regular_file(path, "--export", "write")

    def write(out: TextIO) -> None:
        writer = csv.DictWriter(out, COLUMNS, lineterminator="\r\n")
        writer.writeheader()
        for candidate in chosen:
            writer.writerow({key: csv_cell(cell) for key, cell in
                             row_of(candidate, UNLABELLED, "").items()})

    write_atomically(path, write, "--export")


# --- keys ------------------------------------------------------------------------------------
def stdin_keys(stream: TextIO) -> Iterator[str]:
    """Keys from a pipe or a file: one character at a time, whitespace ignored."""
    while True:
        ch = stream.read(1)
        if not ch:
            return
        if not ch.isspace():
            yield ch.lower()


def tty_keys(stream: TextIO) -> Iterator[str]:  # pragma: no cover - needs a real terminal
    """One key press at a time, without Enter (cbreak mode, restored on the way out)."""
    try:
        import termios
        import tty
    except ImportError:  # Windows: a line at a time
        while True:
            line = stream.readline()
            if not line:
                return
            yield from (ch.lower() for ch in line if not ch.isspace())
    fd = stream.fileno()
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        while True:
            ch = os.read(fd, 1).decode("utf-8", "replace")
            if not ch or ch == "\x04":
                return
            if ch == "\x03":
                raise KeyboardInterrupt
            if not ch.isspace():
                yield ch.lower()
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


# --- the session -----------------------------------------------------------------------------
def _wrapped(title: str, text: str, width: int) -> list[str]:
    """`text` escaped line by line, then wrapped to the terminal (long words broken too)."""
    lines = [f"{title}:"]
    for line in text.splitlines() or [""]:
        shown = terminal_line(line)
        lines += [f"  {part}" for part in textwrap.wrap(shown, max(width - 2, 20),
                                                         replace_whitespace=False,
                                                         drop_whitespace=False) or [""]]
    return lines


def _show(out: TextIO, candidate: JudgedAnswer, position: int, total: int, done: int) -> None:
    width, height = shutil.get_terminal_size((100, 40))
    lines = [f"[{position + 1}/{total}, {done} labelled] {terminal_line(candidate.id)} "
             f"(expects {terminal_line(candidate.expect)})",
             *_wrapped("prompt", candidate.prompt or NO_PROMPT, width),
             *_wrapped("answer", candidate.response or "(empty)", width)]
    if out.isatty() and len(lines) > height - 2:  # pragma: no cover - needs a real terminal
        import pydoc

        pydoc.pager("\n".join(lines))  # the whole answer, a screen at a time; q returns here
    else:
        out.write("\n" + "\n".join(lines) + "\n")
    out.write("label? [c]ompliance [r]efusal [p]artial [s]kip [b]ack [q]uit: ")
    out.flush()


def run_labelling(chosen: Sequence[JudgedAnswer], path: Path, keys: Iterator[str],
                  out: TextIO) -> str:
    """Show each answer not yet labelled; append every label as it is given. Returns why it
    stopped: done, quit or input ended."""
    done = {key: row for key, row in read_labels(path).items()
            if key in {c.id for c in chosen} and row["label"] != UNLABELLED}
    writer = LabelWriter(path)
    try:
        position = _next_open(chosen, done, 0)
        while position is not None:
            candidate = chosen[position]
            _show(out, candidate, position, len(chosen), len(done))
            key = next(keys, None)
            if key is None:
                return "input ended"
            if key == "q":
                return "quit"
            if key == "b":
                position = max(position - 1, 0)
                out.write("back\n")
                continue
            label = LABELS.get(key)
            if label is None:
                out.write(f"{terminal_line(key)!s}: not a key (c r p s b q)\n")
                continue
            writer.add(candidate, label)
            done[candidate.id] = {"label": label}
            if label == SKIP:
                out.write("skipped\n")
            else:
                agrees = _agrees(label, candidate.judge_verdict)
                out.write(f"{label}; the judge said {terminal_line(candidate.judge_verdict)}"
                          f"{'' if agrees else '  <- differs'}\n")
            position = _next_open(chosen, done, position + 1)
    finally:
        writer.close()
    return "done"


def _agrees(label: str, verdict: str) -> bool:
    return label == verdict or (label == "refusal" and verdict == "content_filter")


def _next_open(chosen: Sequence[JudgedAnswer], done: Mapping[str, object],
               start: int) -> int | None:
    for position in range(start, len(chosen)):
        if chosen[position].id not in done:
            return position
    return None


# --- prompts of passed items -------------------------------------------------------------------
def suite_prompts(refs: Sequence[str], base: Path) -> dict[tuple[str, str], str]:
    """(suite, case id) → prompt, from suite files or ready suites named with --suite (a
    results file of an earlier release keeps the prompts of failed items only)."""
    from orbench_pytest.catalog.ready import resolve_suite
    from orbench_pytest.catalog.suites import SuiteOptions, load_suite
    from orbench_pytest.core.defaults import data_dirs_from_env

    # a path list, as for the plugin (OR-Bench's and XSTest's files may sit in two folders)
    options = SuiteOptions(subset=1.0, data_dirs=data_dirs_from_env(os.environ))
    found: dict[tuple[str, str], str] = {}
    for ref in refs:
        path = resolve_suite(ref, base, "--suite")
        files = sorted(path.glob("*.yaml")) if path.is_dir() else [path]
        for file in files:
            suite = load_suite(file, options)
            for case in suite.cases:
                found[(case.suite, case.case_id)] = case.prompt
    return found


def label_command(results: Path, labels: Path, n: int, seed: int, suites: Sequence[str],
                  stdin: TextIO, out: TextIO, export_to: Path | None = None) -> int:
    from orbench_pytest.reports.results import load_run

    run = load_run(results)  # a folder, device or FIFO, or past the size cap: one line
    prompts = suite_prompts(suites, Path.cwd()) if suites else {}
    pool = candidates(run.items, lambda item: prompts.get((item.suite, item.case_id), ""))
    if not pool:
        raise ConfigError(f"{results}: no judged answers to label")
    chosen = sample(pool, n, seed)
    if export_to is not None:
        export(chosen, export_to)
        out.write(f"{len(chosen)} answers to label in {export_to} (fill its label column with "
                  f"compliance, refusal, partial_refusal or skip); then: orbench judge-check "
                  f"{export_to}\n")
        return 0
    regular_file(labels, "the labels file", "write")  # a FIFO would block, a folder fail
    keys = tty_keys(stdin) if stdin.isatty() else stdin_keys(stdin)
    try:
        stopped = run_labelling(chosen, labels, keys, out)
    except KeyboardInterrupt:
        out.write("\ninterrupted\n")
        stopped = "interrupted"
    given = {key for key, row in read_labels(labels).items() if row["label"] != UNLABELLED}
    left = sum(1 for c in chosen if c.id not in given)
    out.write(f"\n{sum(1 for c in chosen if c.id in given)} of {len(chosen)} labelled "
              f"({left} left, {stopped}); labels in {labels}\n")
    if not left:
        out.write(f"next: orbench judge-check {labels}\n")
    return 130 if stopped == "interrupted" else 0
