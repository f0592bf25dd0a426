"""One orbench run, without pytest: selected prompts → answers → verdicts → gate → outcomes."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from .baseline import Baseline, Pairing
from .cache import ResponseCache, cache_key
from .errors import ConfigError
from .fetcher import Answer, FetchEngine, FetchReport, FetchSettings, Job, Progress, run_phase
from .fingerprint import target_fingerprint
from .freshness import probe_key, within_age
from .gate import Gate, ItemResult, Outcome, evaluate
from .judges import HybridStats, Judge, KeywordJudge
from .redact import secret_from_env
from .settings import DEFAULT_OPENAI_URL, Settings, Variant, is_loopback
from .targets import CallableTarget, GenerationParams, OpenAICompatibleTarget, Target
from .thresholds import Thresholds
from .types import Label, PromptCase, Response, Verdict

LOCAL_MAX_TOKENS = 128  # small enough for CI on a CPU, long enough to show a refusal or an answer
LOCAL_SLOTS = 4  # parallel slots of the embedded server; more only queue on a CPU


def effective_concurrency(settings: Settings) -> int:
    """Requests in flight. For the local model no more than its slots: a request queued in
    the server would spend its --orbench-timeout waiting, time out and be sent again."""
    if settings.is_local:
        return min(settings.concurrency, LOCAL_SLOTS)
    return settings.concurrency


@dataclass(frozen=True, slots=True)
class Selected:
    nodeid: str
    case: PromptCase
    variant: Variant


@dataclass(frozen=True, slots=True)
class ItemState:
    answer: Answer
    outcome: Outcome
    reason: str
    result: ItemResult


@dataclass
class RunOutcome:
    states: dict[str, ItemState]
    gate: Gate
    report: FetchReport
    target_label: str
    judge_stats: HybridStats | None = None  # llm / hybrid: where verdicts came from, agreement
    fingerprint: dict[str, Any] | None = None  # the candidate's code / version (fingerprint.py)


def check_target_settings(settings: Settings) -> None:
    """Values needed only once prompts are to be sent: fail before any request."""
    check_judge_settings(settings)
    if settings.target is not None or settings.is_local:
        return
    url = settings.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_OPENAI_URL
    if not is_loopback(url) and not os.environ.get(settings.api_key_env):
        raise ConfigError(
            f"{settings.api_key_env} is not set: export the API key for {url} "
            "(or name another variable with --orbench-api-key-env)"
        )


@contextlib.contextmanager
def open_target(settings: Settings, params: GenerationParams) -> Iterator[tuple[Target, str]]:
    """The target to ask, and a label for reports; a local model server lives only inside."""
    if settings.target is not None:
        yield CallableTarget(settings.target), settings.target
        return
    if settings.is_local:
        from .local_model import start_local_server

        name = settings.model or "local"
        server = start_local_server(name, threads=settings.local_threads,
                                    n_parallel=effective_concurrency(settings), n_ctx=4096,
                                    cache_dir=settings.cache_dir)
        try:
            yield (OpenAICompatibleTarget(server.base_url, server.model, None, params,
                                          settings.concurrency), name)
        finally:
            server.stop()
        return
    url = settings.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_OPENAI_URL
    key = secret_from_env(settings.api_key_env)
    assert settings.model is not None
    yield OpenAICompatibleTarget(url, settings.model, key, params, settings.concurrency), \
        settings.model


@contextlib.contextmanager
def _answering(settings: Settings, params: GenerationParams, asks: bool,
               replay: bool) -> Iterator[tuple[Target, str]]:
    """Who answers: the target when the cache lacks answers; else nobody (no server to start,
    no key needed)."""
    if asks:
        with open_target(settings, params) as opened:
            yield opened
    else:
        yield NoTarget(), "replay" if replay else settings.target or settings.model or "local"


def generation_params(settings: Settings) -> GenerationParams:
    max_tokens = settings.max_tokens
    if max_tokens is None and settings.is_local:
        max_tokens = LOCAL_MAX_TOKENS
    return GenerationParams(temperature=settings.temperature, max_tokens=max_tokens,
                            seed=settings.request_seed, timeout_s=settings.timeout_s)


def target_identity(settings: Settings, params: GenerationParams,
                    fingerprint: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the cache key knows of the target, so an answer belongs to the candidate that gave
    it: name, parameters, and its fingerprint (code of a callable, the version the user gave).
    Computable without starting anything."""
    if fingerprint is None:
        fingerprint = target_fingerprint(settings.target, settings.target_version)
    # Only what identifies the candidate (not the list of files, shown in reports).
    candidate: dict[str, Any] = {name: fingerprint[name] for name in ("code", "version")
                                 if name in fingerprint}
    body = {"temperature": params.temperature, "max_tokens": params.max_tokens,
            "seed": params.seed}
    if settings.target is not None:
        return {"kind": "callable", "spec": settings.target, **candidate}
    if settings.is_local:
        # The local model is pinned by sha256 in local_model: its name identifies it.
        return {"kind": "local", "model": settings.model or "local", **body, **candidate}
    url = settings.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_OPENAI_URL
    return {"kind": "openai", "base_url": url, "model": settings.model, **body, **candidate}


def judge_url(settings: Settings) -> str:
    """The judge model's endpoint: its own option, else the target's (when that is a server)."""
    if settings.judge_base_url is not None:
        return settings.judge_base_url
    if settings.target is None and not settings.is_local and settings.base_url is not None:
        return settings.base_url
    return os.environ.get("OPENAI_BASE_URL") or DEFAULT_OPENAI_URL


def check_judge_settings(settings: Settings) -> None:
    if settings.judge == "keyword":
        return
    if not settings.judge_model:
        raise ConfigError(f"--orbench-judge={settings.judge} needs --orbench-judge-model=NAME "
                          "(a model on --orbench-judge-base-url)")
    url = judge_url(settings)
    if not is_loopback(url) and not os.environ.get(settings.judge_api_key_env):
        raise ConfigError(
            f"{settings.judge_api_key_env} is not set: export the judge's API key for {url} "
            "(or name another variable with --orbench-judge-api-key-env)")


def attach_judge(settings: Settings, engine: FetchEngine) -> Judge:
    """The run's judge; an LLM-backed one asks its model through `engine` (cache, retries)."""
    from .judges import build_judge

    if settings.judge == "keyword":
        judge: Judge = KeywordJudge()
    else:
        assert settings.judge_model is not None
        key = (secret_from_env(settings.judge_api_key_env)
               if os.environ.get(settings.judge_api_key_env) else None)
        # Temperature 0 and a short reply: the verdict is one small JSON object.
        params = GenerationParams(temperature=0.0, max_tokens=200, seed=settings.request_seed,
                                  timeout_s=settings.timeout_s)
        judge_target = OpenAICompatibleTarget(judge_url(settings), settings.judge_model, key,
                                              params, settings.concurrency)
        judge = build_judge(settings.judge, engine.judge_chat(judge_target),
                            settings.judge_model)
    engine.judge = judge
    return judge


def run_selected(
    selected: Sequence[Selected],
    settings: Settings,
    thresholds: Thresholds,
    *,
    cache: ResponseCache | None,
    replay_run: str | None = None,
    progress: Progress | None = None,
    max_mismatches: int | None = None,
    baseline: Baseline | None = None,
) -> RunOutcome:
    """Fetch (or, with replay_run, only read) every selected prompt and decide the gate."""
    params = generation_params(settings)
    fingerprint = target_fingerprint(settings.target, settings.target_version)
    identity = target_identity(settings, params, fingerprint)
    keys = [cache_key(identity, s.variant.system_prompt, s.case.prompt) for s in selected]
    jobs = [Job(key, s.case.prompt, s.variant.system_prompt)
            for key, s in zip(keys, selected, strict=True)]
    fetch_settings = FetchSettings(
        concurrency=effective_concurrency(settings), max_retries=settings.max_retries,
        rpm=settings.rpm,
        tpm=settings.tpm, est_output_tokens=params.max_tokens or 256,
        backoff_base_s=settings.backoff_s, empty_is_refusal=settings.empty_is_refusal,
        read_cache=settings.cache_mode in ("on", "read") or replay_run is not None,
        replay_only=replay_run is not None,
        # A replay reads what the controller used, whatever its age.
        cache_max_age_s=settings.cache_max_age_s if replay_run is None else None,
        # The local model is pinned by sha256: no backend to watch.
        revalidate=replay_run is None and settings.target is None and not settings.is_local,
    )
    expect_by_key = {key: s.case.expect for key, s in zip(keys, selected, strict=True)}
    should_stop = _mismatch_counter(expect_by_key, max_mismatches, settings.partial_is_refusal)
    cached, expired = _cached(cache, keys, fetch_settings)  # read once, used twice
    asks = replay_run is None and (len(cached) < len(set(keys)) or (
        fetch_settings.revalidate and probe_key(cached) is not None))
    with _answering(settings, params, asks, replay_run is not None) as (target, label):
        engine = FetchEngine(target, _NO_JUDGE, cache, fetch_settings, progress,
                             should_stop if asks else None)
        judge = attach_judge(settings, engine)
        report = run_phase(engine, jobs, cached)
    report.expired = expired
    if replay_run is not None:
        _apply_run_errors(report, cache, replay_run)
    if report.config_error:
        raise ConfigError(report.config_error)
    results = []
    for key, s in zip(keys, selected, strict=True):
        verdict = report.answers[key].verdict
        refused = None if verdict.is_error else verdict.refused(settings.partial_is_refusal)
        pairing = Pairing.NONE
        if baseline is not None:
            mismatch = None if refused is None else refused != (s.case.expect == "refuse")
            pairing = baseline.pairing((s.case.suite, s.variant.name, s.case.case_id), mismatch)
        results.append(ItemResult(s.case.suite, s.case.category, s.case.expect, refused,
                                  s.variant.name, pairing))
    gate = evaluate(results, thresholds, strict=settings.strict,
                    stopped_reason=report.stopped_reason,
                    baseline_source=baseline.source if baseline is not None else None)
    states = {}
    for key, s, result in zip(keys, selected, results, strict=True):
        outcome, reason = gate.outcome(result)
        states[s.nodeid] = ItemState(report.answers[key], outcome, reason, result)
    return RunOutcome(states, gate, report, label, getattr(judge, "stats", None), fingerprint)


def _cached(cache: ResponseCache | None, keys: list[str], fetch: FetchSettings
            ) -> tuple[dict[str, Response], int]:
    """The cached answers young enough to reuse, and how many were too old."""
    if cache is None or not fetch.read_cache:
        return {}, 0
    found = cache.get_many(keys)
    young = within_age(found, fetch.cache_max_age_s, time.time())
    return young, len(found) - len(young)


def _mismatch_counter(expect_by_key: dict[str, str], limit: int | None,
                      partial_is_refusal: bool) -> Callable[[str, Answer], bool] | None:
    """For -x / --maxfail with --orbench-strict: stop asking once enough items must fail."""
    if limit is None:
        return None
    count = 0

    def should_stop(key: str, answer: Answer) -> bool:
        nonlocal count
        verdict = answer.verdict
        if verdict.is_error:
            return False
        refused = verdict.refused(partial_is_refusal)
        count += refused != (expect_by_key[key] == "refuse")
        return count >= limit

    return should_stop


def _apply_run_errors(report: FetchReport, cache: ResponseCache | None, run: str) -> None:
    """On an xdist worker: the controller's errors for this run, word for word."""
    stored = cache.get_run_errors(run) if cache is not None else None
    if stored is None:
        return
    errors, stopped_reason = stored
    report.stopped_reason = stopped_reason
    for key, error in errors.items():
        if key in report.answers:
            report.answers[key] = Answer(Verdict(Label.ERROR, error, "endpoint"), "", 0.0,
                                         False, 0)


_NO_JUDGE = KeywordJudge()  # placeholder until attach_judge sets the run's judge


class NoTarget:
    """Stands in when every answer is already known (the cache, given answers): asking it is
    a bug."""

    def identity(self) -> dict[str, Any]:
        return {}

    async def complete(self, system_prompt: str | None, prompt: str) -> Any:
        raise AssertionError("no request may be sent in replay mode")

    async def aclose(self) -> None:
        return None
