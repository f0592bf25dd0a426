"""The batch steps of a run, before its fetch phase: export, import, submit and wait, status.

Every step works on the run's own plan (runner.plan_jobs: the selection's keys, samples
included), so a custom_id is exactly the cache key the live run would use, and the bodies are
built by the live client's code (targets.chat_request_body).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from orbench_pytest.batch.api import BatchClient, Clock, Sleep, wait
from orbench_pytest.batch.format import (
    BatchLimits,
    parse_output,
    read_output,
    shown_id,
    split_requests,
)
from orbench_pytest.batch.import_answers import ImportReport, conflicting, import_lines, store
from orbench_pytest.batch.state import BatchState, request_set_key, state_path
from orbench_pytest.config.settings import Settings
from orbench_pytest.core.artefacts import write_atomically
from orbench_pytest.core.errors import BatchEnded, ConfigError
from orbench_pytest.core.redact import secret_from_env
from orbench_pytest.core.types import Response
from orbench_pytest.fetch.cache import ResponseCache
from orbench_pytest.fetch.engine import Job
from orbench_pytest.fetch.retry import RetrySettings
from orbench_pytest.fetch.targets import chat_request_body
from orbench_pytest.run.runner import (
    JobPlan,
    Selected,
    check_target_key,
    generation_params,
    missing_jobs,
    plan_jobs,
    settings_url,
)

Write = Callable[[str], None]


def batch_limits(settings: Settings) -> BatchLimits:
    """What one input file may hold: a set of requests larger than one batch takes is several
    input files (an export) or several batches, submitted together and waited for in turn."""
    return BatchLimits(requests=settings.batch.max_requests)


@dataclass
class Given:
    """Answers known before the fetch phase, and what to print about them."""

    responses: dict[str, Response] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)


def check_batch_target(settings: Settings, option: str) -> None:
    target = settings.target
    if target.function is not None or target.is_local or target.model is None:
        raise ConfigError(f"{option} needs a served model: --orbench-model=NAME with an "
                          "OpenAI-compatible endpoint (not local, not --orbench-target)")


def batch_requests(jobs: Sequence[Job], settings: Settings) -> list[tuple[str, dict[str, Any]]]:
    assert settings.target.model is not None
    params = generation_params(settings)
    return [(job.key, chat_request_body(settings.target.model, params, job.system_prompt,
                                        job.prompt, job.history))
            for job in jobs]


def export(selected: Sequence[Selected], settings: Settings,
           cache: ResponseCache | None) -> BatchEnded:
    """Write every request the cache lacks as Batch API input files (one, unless they exceed
    what a batch takes); nothing is sent."""
    assert settings.batch.export is not None
    check_batch_target(settings, "--orbench-batch-export")
    plan = plan_jobs(selected, settings)
    jobs = missing_jobs(plan, settings, cache)
    limits = batch_limits(settings)
    texts = split_requests(batch_requests(jobs, settings), limits) or [""]
    paths = export_paths(settings.batch.export, len(texts))
    for path, text in zip(paths, texts, strict=True):
        write_export_file(path, text)
    held = len({job.key for job in plan.jobs}) - len(jobs)
    where, repeat = str(paths[0]), ""
    if len(paths) > 1:
        where = (f"{len(paths)} files, {paths[0]} to {paths[-1].name} (a batch takes at most "
                 f"{limits.requests:,} requests and {limits.bytes // 1_000_000} MB)")
        repeat = " (once for each file)"
    return BatchEnded([f"orbench: wrote {len(jobs)} requests to {where} ({held} already "
                       "cached); nothing was sent. Import the answers with "
                       f"--orbench-batch-import=OUTPUT.jsonl{repeat}"])


def export_paths(path: Path, count: int) -> list[Path]:
    """PATH itself for one file; PATH's stem numbered (requests.1.jsonl, …) for several."""
    if count == 1:
        return [path]
    width = len(str(count))
    return [path.with_name(f"{path.stem}.{i:0{width}d}{path.suffix}")
            for i in range(1, count + 1)]


def write_export_file(path: Path, text: str) -> None:
    def write(out: TextIO) -> None:
        out.write(text)

    try:
        write_atomically(path, write, "--orbench-batch-export")
    except OSError as exc:
        raise ConfigError(f"--orbench-batch-export: cannot write {path} "
                          f"({exc.strerror or exc})") from None


def import_files(paths: Sequence[Path], plan: JobPlan,
                 cache: ResponseCache | None) -> Given:
    """Read output files into the cache; every file is read whole before anything is written,
    so a malformed file stores nothing, nor do two files answering one request differently."""
    wanted = {job.key for job in plan.jobs}
    given = Given()
    reports = []
    source: dict[str, Path] = {}  # the file each kept response came from
    for path in paths:
        report = import_lines(read_output(path), wanted, str(path))
        reports.append(report)
        given.lines.extend(report.summary(str(path)))
        for key, response in report.responses.items():
            known = given.responses.get(key)
            if conflicting(known, response):
                raise ConfigError(f"{path}, line {report.line_of[key]}: custom_id "
                                  f"{shown_id(key)} has another answer than in {source[key]}; "
                                  "import one answer per request")
            if known is None or known.error is not None:
                given.responses[key] = response
                source[key] = path
    for report in reports:
        store(report, cache)
    return given


def submit_or_status(plan: JobPlan, settings: Settings,
                     cache: ResponseCache | None, write: Write, *,
                     clock: Clock = time.monotonic, sleep: Sleep = time.sleep) -> Given:
    """--orbench-batch=submit: the missing requests as one batch (or the batch already
    submitted for them), waited for and imported. --orbench-batch=status: report, end."""
    check_batch_target(settings, "--orbench-batch")
    jobs = missing_jobs(plan, settings, cache)
    status_only = settings.batch.mode == "status"
    if not jobs:
        line = "orbench: the cache holds every answer: no batch to submit"
        if status_only:
            raise BatchEnded([line])
        write(line)
        return Given()
    check_target_key(settings)
    url = settings_url(settings)
    requests = batch_requests(jobs, settings)
    chunks = split_requests(requests, batch_limits(settings))
    set_key = request_set_key(url, (key for key, _ in requests))
    state = BatchState(state_path(settings.cache.path))
    batch_ids = state.batch_ids(set_key)
    if not batch_ids and status_only:
        raise BatchEnded([f"orbench: no batch submitted for the {len(jobs)} requests the cache "
                          "lacks (--orbench-batch=submit submits them)"])
    client = BatchClient(url, secret_from_env(settings.target.api_key_env) or None,
                         settings.requests.timeout_s,
                         retry=RetrySettings(max_retries=settings.requests.max_retries,
                                             backoff_base_s=settings.requests.backoff_s),
                         clock=clock, sleep=sleep)
    if status_only:
        raise BatchEnded([f"orbench: {client.status(batch_id).describe()}"
                          for batch_id in batch_ids])
    if batch_ids:
        write(f"orbench: waiting for {_batches(batch_ids)} ({len(requests)} requests), "
              "submitted earlier for these requests")
    # Chunks not yet submitted (all of them the first time; the rest after an interruption):
    # each id is remembered as soon as its batch exists, so none is ever submitted twice.
    for chunk in chunks[len(batch_ids):]:
        batch_id = client.submit(chunk.encode("utf-8"), "orbench-requests.jsonl")
        batch_ids.append(batch_id)
        state.remember(set_key, batch_ids, len(requests))
        lines = chunk.count("\n")
        write(f"orbench: submitted {lines} requests as batch {batch_id}")
    started = clock()
    statuses = []
    for batch_id in batch_ids:
        left = (None if settings.requests.max_duration_s is None
                else max(0.0, settings.requests.max_duration_s - (clock() - started)))
        status = wait(client, batch_id, poll_s=settings.batch.poll_s, max_wait_s=left,
                      report=lambda s: write(f"orbench: {s.describe()}"), clock=clock,
                      sleep=sleep)
        if not status.finished:
            raise BatchEnded([f"orbench: {status.describe()} after --orbench-max-duration="
                              f"{settings.requests.max_duration_s:g}s; run again to resume "
                              "waiting for it"], returncode=1)
        statuses.append(status)
    report = ImportReport()
    wanted = {job.key for job in plan.jobs}
    for status in statuses:
        for file_id in (status.output_file_id, status.error_file_id):
            if file_id:
                source = f"batch {status.batch_id} file {file_id}"
                import_lines(parse_output(client.download(file_id).splitlines(), source),
                             wanted, source, report)
    store(report, cache)  # what the finished batches answered is kept, whatever failed
    state.forget(set_key)
    failed = [status for status in statuses if status.status == "failed"]
    if failed:
        reasons = "; ".join(f"batch {s.batch_id}: {'; '.join(s.errors) or 'no reason given'}"
                            for s in failed)
        raise ConfigError(f"{_batches([s.batch_id for s in failed])} failed ({reasons}); "
                          "run again to submit what is missing anew")
    return Given(report.responses, report.summary(_batches(batch_ids)))


def _batches(batch_ids: Sequence[str]) -> str:
    return f"batch {batch_ids[0]}" if len(batch_ids) == 1 else f"batches {', '.join(batch_ids)}"
