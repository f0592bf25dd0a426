"""Batch API output lines → the run's answers, through the live client's own parser.

Each line's HTTP status and body go through `targets.parse_chat_response`, so a content
filter is a refusal, an empty answer is judged by --orbench-empty, and a malformed body or a
failed request is an error of that item with its message: never a refusal or a compliance.
Usable answers are written to the cache (as the live client's are); every matched line's
response is handed to the run, so errors and empty answers count there too.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from orbench_pytest.batch.format import OutputLine, shown_id
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.types import Response
from orbench_pytest.core.untrusted import terminal_text
from orbench_pytest.fetch.cache import ResponseCache
from orbench_pytest.fetch.engine import has_answer
from orbench_pytest.fetch.targets import ConfigFault, TransientFault, parse_chat_response

SHOWN_UNMATCHED = 3  # custom_ids listed when lines match no prompt of the run


@dataclass
class ImportReport:
    responses: dict[str, Response] = field(default_factory=dict)  # by key, matched lines only
    line_of: dict[str, int] = field(default_factory=dict)  # the line each response came from
    lines: int = 0
    unmatched: int = 0
    unmatched_examples: list[str] = field(default_factory=list)

    @property
    def answered(self) -> int:
        return sum(1 for r in self.responses.values() if has_answer(r))

    @property
    def failed(self) -> int:
        return sum(1 for r in self.responses.values() if r.error is not None)

    def summary(self, source: str) -> list[str]:
        """Bounded lines for the terminal, whatever the file held."""
        # Every matched line counted once: an answer, a failure, or an empty answer (no text
        # and no error: --orbench-empty decides what it is)
        empty = len(self.responses) - self.answered - self.failed
        lines = [f"orbench: {source}: {self.lines} lines, {len(self.responses)} for this run "
                 f"({self.answered} answers, {self.failed} failed"
                 f"{f', {empty} empty' if empty else ''})"]
        if self.unmatched:
            examples = ", ".join(self.unmatched_examples)
            more = ", …" if self.unmatched > len(self.unmatched_examples) else ""
            lines.append(f"orbench: {self.unmatched} lines match no request of this run "
                         f"(custom_id {examples}{more}): another model, parameters or "
                         "selection exported them")
        return lines


def response_of(line: OutputLine, source: str) -> Response:
    """One output line as the live client would have seen that exchange."""
    if line.status is None:
        return Response(text=None, error=f"batch request failed: {line.error}")
    try:
        response = parse_chat_response(line.status, None, line.body, 0.0, source)
    except (TransientFault, ConfigFault) as fault:
        return Response(text=None, error=_failed(str(fault)))
    if response.error is not None:
        response.error = _failed(response.error)
    return response


def _failed(reason: str) -> str:
    return terminal_text(f"batch request failed: {reason}", 300)


def conflicting(known: Response | None, response: Response) -> bool:
    """Two usable answers to one request that a judge would not see as one (ids, timings and
    usage aside): which one the model gave cannot be told."""
    return (known is not None and has_answer(known) and has_answer(response)
            and (known.text, known.refusal, known.content_filter, known.finish_reason)
            != (response.text, response.refusal, response.content_filter,
                response.finish_reason))


def import_lines(lines: Iterable[OutputLine], wanted: Collection[str], source: str,
                 report: ImportReport | None = None) -> ImportReport:
    """Match lines to the run's keys; a usable answer outranks a failure of the same key (an
    output file and its error file, or a retried batch, may both name it). The same answer
    twice is kept once; two different answers to one custom_id are an error naming both
    lines: which one the model gave cannot be told, and the gate must not pick one."""
    report = report if report is not None else ImportReport()
    for line in lines:
        report.lines += 1
        if line.custom_id not in wanted:
            report.unmatched += 1
            if len(report.unmatched_examples) < SHOWN_UNMATCHED:
                report.unmatched_examples.append(shown_id(line.custom_id))
            continue
        response = response_of(line, source)
        known = report.responses.get(line.custom_id)
        if conflicting(known, response):
            raise ConfigError(f"{source}, line {line.number}: custom_id "
                              f"{shown_id(line.custom_id)} again, with another answer than on "
                              f"line {report.line_of[line.custom_id]}; keep one line per "
                              "request (its custom_id)")
        if known is None or has_answer(response) or not has_answer(known):
            report.responses[line.custom_id] = response
            report.line_of[line.custom_id] = line.number
    return report


def store(report: ImportReport, cache: ResponseCache | None) -> None:
    """Write the usable answers now, in one transaction (CacheWriteError fails the run)."""
    if cache is None or not cache.writable:
        return
    cache.put_many((key, r) for key, r in report.responses.items() if has_answer(r))
