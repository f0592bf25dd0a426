"""One orbench run, without pytest: selected prompts → answers → verdicts → gate → outcomes."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orbench_pytest.config.settings import Settings, Variant
from orbench_pytest.core import defaults
from orbench_pytest.core.conversation import sent_system
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.ids import key_label
from orbench_pytest.core.redact import secret_from_env
from orbench_pytest.core.types import History, Label, PromptCase, Response
from orbench_pytest.core.untrusted import redacted_repr
from orbench_pytest.fetch.cache import ResponseCache, cache_keys
from orbench_pytest.fetch.engine import (
    FetchReport,
    FetchSettings,
    Job,
    Progress,
    cached_answers,
    request_layer,
)
from orbench_pytest.fetch.fingerprint import target_fingerprint
from orbench_pytest.fetch.freshness import probe_key
from orbench_pytest.fetch.requests import RequestLayer
from orbench_pytest.fetch.targets import (
    CallableTarget,
    GenerationParams,
    OpenAICompatibleTarget,
    Target,
    check_key,
    local_concurrency,
    model_identity,
    served_url,
)
from orbench_pytest.gate.baseline import Baseline, Comparison, Pairing
from orbench_pytest.gate.decision import Gate, ItemResult, Outcome, evaluate
from orbench_pytest.gate.samples import refused_by_rule, sample_key
from orbench_pytest.gate.scope import Scope, Ungated
from orbench_pytest.gate.thresholds import Thresholds
from orbench_pytest.judges.channel import JudgeChannel
from orbench_pytest.judges.judge import Judge, OfflineJudge, RoutingStats
from orbench_pytest.judges.verdicts import Answer, Verdicts
from orbench_pytest.run.judged_fetch import JudgedFetch, fetch_and_judge

if TYPE_CHECKING:  # a run without judge_calibration never loads it
    from orbench_pytest.fetch.local_model import LocalServer
    from orbench_pytest.gate.calibration import Calibration


def effective_concurrency(settings: Settings) -> int:
    """The most requests in flight: for the local model no more than its slots."""
    if settings.target.is_local:
        return local_concurrency(settings.requests.concurrency)
    return settings.requests.concurrency


def adapts(settings: Settings) -> bool:
    """Whether the concurrency adapts to the endpoint: not for the embedded model (its slots
    are known) nor when pinned with --orbench-fixed-concurrency."""
    return not (settings.target.is_local or settings.requests.fixed_concurrency)


@dataclass(frozen=True, slots=True)
class Selected:
    """A selected item: its node id, its prompt case and its variant."""

    nodeid: str
    case: PromptCase
    variant: Variant


@redacted_repr
@dataclass(frozen=True, slots=True)
class ItemState:
    """What an item reports: its answer, its outcome and why."""

    answer: Answer
    outcome: Outcome
    reason: str
    result: ItemResult


@dataclass
class RunOutcome:
    """What a run decided: every item's state, the gate, the fetch's report and the verdicts."""

    states: dict[str, ItemState]
    gate: Gate
    report: FetchReport
    verdicts: Verdicts
    target_label: str
    judge_stats: RoutingStats | None = None  # llm / hybrid: where verdicts came from, agreement
    judge_version: str = ""  # recorded in results: a changed judge is visible there
    fingerprint: dict[str, Any] | None = None  # the candidate's code / version (fingerprint.py)
    calibration: Calibration | None = None  # judge_calibration: what corrected the gate
    comparison: Comparison | None = None  # against --orbench-baseline, from each item's pairing


def settings_url(settings: Settings) -> str:
    """The endpoint of the served model under test."""
    return served_url(settings.target.base_url)


def check_target_key(settings: Settings) -> None:
    """The endpoint's key, checked only when something is to be asked of it: a gate over a
    cache (or a Batch API output) that holds every answer needs none."""
    if settings.target.function is not None or settings.target.is_local:
        return
    check_key(settings_url(settings), settings.target.api_key_env)


@contextlib.contextmanager
def open_target(settings: Settings, params: GenerationParams,
                start_local: Callable[..., LocalServer] | None = None,
                ) -> Iterator[tuple[Target, str]]:
    """The target to ask, and a label for reports; a local model server lives only inside
    (started by `start_local`, local_model.start_local_server unless a test gives another)."""
    if settings.target.function is not None:
        yield CallableTarget(settings.target.function, params.timeout_s), settings.target.function
        return
    if settings.target.is_local:
        if start_local is None:
            from orbench_pytest.fetch.local_model import start_local_server

            start_local = start_local_server

        name = settings.target.model or "local"
        server = start_local(name, threads=settings.target.local_threads,
                             n_parallel=effective_concurrency(settings),
                             n_ctx=defaults.LOCAL_CONTEXT, cache_dir=settings.cache.dir)
        try:
            yield (OpenAICompatibleTarget(server.base_url, server.model, None, params,
                                          settings.requests.concurrency), name)
        finally:
            server.stop()
        return
    url = settings_url(settings)
    key = secret_from_env(settings.target.api_key_env)
    assert settings.target.model is not None
    yield OpenAICompatibleTarget(url, settings.target.model, key, params,
                                 settings.requests.concurrency), settings.target.model


def generation_params(settings: Settings) -> GenerationParams:
    max_tokens = settings.target.max_tokens
    if max_tokens is None and settings.target.is_local:
        max_tokens = defaults.LOCAL_MAX_TOKENS
    return GenerationParams(temperature=settings.target.temperature, max_tokens=max_tokens,
                            seed=settings.target.request_seed,
                            timeout_s=settings.requests.timeout_s)


def target_identity(settings: Settings, params: GenerationParams,
                    fingerprint: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the cache key knows of the target, so an answer belongs to the candidate that gave
    it: name, parameters, and its fingerprint (code of a callable, the version the user gave).
    Computable without starting anything."""
    if fingerprint is None:
        fingerprint = target_fingerprint(settings.target.function, settings.target.version)
    # Only what identifies the candidate (not the list of files, shown in reports).
    candidate: dict[str, Any] = {name: fingerprint[name] for name in ("code", "version")
                                 if name in fingerprint}
    if settings.target.function is not None:
        return {"kind": "callable", "spec": settings.target.function, **candidate}
    if settings.target.is_local:
        return {**model_identity(settings.target.model or "local", None, params), **candidate}
    assert settings.target.model is not None
    return {**model_identity(settings.target.model, settings_url(settings), params), **candidate}


def judge_url(settings: Settings) -> str:
    """The judge model's endpoint: its own option, else the target's (when that is a server)."""
    if settings.judge.base_url is not None:
        return settings.judge.base_url
    target = settings.target
    if target.function is None and not target.is_local and target.base_url is not None:
        return target.base_url
    return served_url(None)


def check_judge_settings(settings: Settings) -> None:
    if settings.judge.name == "keyword":
        return
    if not settings.judge.model:
        raise ConfigError(f"--orbench-judge={settings.judge.name} needs --orbench-judge-model=NAME "
                          "(a model on --orbench-judge-base-url)")
    check_key(judge_url(settings), settings.judge.api_key_env, whose="the judge's API key",
              hint="--orbench-judge-api-key-env")


def build_run_judge(settings: Settings, requests: RequestLayer[FetchReport],
                    cache: ResponseCache | None, fetch: FetchSettings
                    ) -> tuple[Judge, JudgeChannel | None]:
    """The run's judge, and for an LLM-backed one the channel its model is asked through: the
    run's request layer and cache, and a concurrency limit of its own."""
    from orbench_pytest.judges.judge import build_judge

    if settings.judge.name == "keyword":
        return OfflineJudge(), None
    check_judge_settings(settings)  # a suite's `judge:` may have asked for it
    assert settings.judge.model is not None
    key = (secret_from_env(settings.judge.api_key_env)
           if os.environ.get(settings.judge.api_key_env) else None)
    # Temperature 0 and a short reply: the verdict is one small JSON object.
    params = GenerationParams(temperature=0.0, max_tokens=200, seed=settings.target.request_seed,
                              timeout_s=settings.requests.timeout_s)
    judge_target = OpenAICompatibleTarget(judge_url(settings), settings.judge.model, key,
                                          params, settings.judge.concurrency)
    channel = JudgeChannel(judge_target, requests, settings.judge.concurrency, cache, fetch)
    return build_judge(settings.judge.name, channel.chat, settings.judge.model), channel


def fetch_settings(settings: Settings, params: GenerationParams) -> FetchSettings:
    return FetchSettings.of(
        concurrency=effective_concurrency(settings), adaptive=adapts(settings),
        rpm=settings.requests.rpm, tpm=settings.requests.tpm,
        max_tokens=params.max_tokens, max_retries=settings.requests.max_retries,
        backoff_s=settings.requests.backoff_s, max_duration_s=settings.requests.max_duration_s,
        empty_is_refusal=settings.judge.empty_is_refusal,
        read_cache=settings.cache.mode in ("on", "read"),
        cache_max_age_s=settings.cache.max_age_s, timeout_s=settings.requests.timeout_s,
        # The local model is pinned by sha256 and a callable by its code: no backend to watch.
        # --orbench-cache=read asks nothing of what is cached (the gate over merged shards).
        revalidate=(settings.target.function is None and not settings.target.is_local
                    and settings.cache.mode != "read"),
    )


@dataclass(frozen=True)
class JobPlan:
    """What a selection asks: one key per item (its sample 0), and every sample's job."""

    params: GenerationParams
    keys: list[str]
    jobs: list[Job]
    fingerprint: dict[str, Any]


def plan_jobs(selected: Sequence[Selected], settings: Settings) -> JobPlan:
    params = generation_params(settings)
    fingerprint = target_fingerprint(settings.target.function, settings.target.version)
    identity = target_identity(settings, params, fingerprint)
    key_of = cache_keys(identity)
    # The preamble, then the row's own turns; a system turn among them wins over the variant's.
    asked = [(sent_system(s.variant.system_prompt, history), history) for s in selected
             for history in (settings.target.preamble_turns + s.case.history,)]
    keys = [key_of(system, s.case.prompt, history)
            for s, (system, history) in zip(selected, asked, strict=True)]
    # --orbench-samples=N: N jobs per prompt, each with its own key (sample 0: the prompt's).
    jobs: list[Job] = []
    for key, s, (system, history) in zip(keys, selected, asked, strict=True):
        jobs.extend(Job(k, s.case.prompt, system, history)
                    for k in sample_keys(key, settings.scope.samples))
    return JobPlan(params, keys, jobs, fingerprint)


def answers_key(selected: Sequence[Selected], settings: Settings) -> str:
    """One key for every answer the selection needs (--orbench-cache-key): the hash of their
    response-cache keys, which hold the target's identity (model, endpoint, parameters, target
    version, a callable's code), the system prompt and the prompt. Equal keys: the same answers,
    so a CI cache saved under it holds all of them and a rerun asks nothing."""
    digest = hashlib.sha256()
    for key in sorted({job.key for job in plan_jobs(selected, settings).jobs}):
        digest.update(key.encode("ascii"))
    return "orbench-" + digest.hexdigest()[:32]


def missing_jobs(plan: JobPlan, settings: Settings, cache: ResponseCache | None) -> list[Job]:
    """The distinct jobs the cache holds no usable answer for, in selection order."""
    unique = {job.key: job for job in plan.jobs}
    cached, _ = cached_answers(cache, list(unique), fetch_settings(settings, plan.params))
    return [job for key, job in unique.items() if key not in cached]


def run_selected(
    selected: Sequence[Selected],
    settings: Settings,
    thresholds: Thresholds,
    *,
    cache: ResponseCache | None,
    progress: Progress | None = None,
    max_mismatches: int | None = None,
    baseline: Baseline | None = None,
    given: Mapping[str, Response] | None = None,
    ungated: Ungated | None = None,
    scope: Scope | None = None,
    plan: JobPlan | None = None,
) -> RunOutcome:
    """Fetch every selected prompt (or read it from the cache) and decide the gate.

    `given`: answers known from elsewhere (a Batch API output file), used like cached ones.
    `ungated`: why the gate does not decide this run (a shard alone): mismatches are then
    tolerated, the gate's rates only shown. `scope`: what the gate is decided over (scope.py).
    `plan`: plan_jobs(selected, settings), when the caller made it already (the Batch API steps).
    """
    if not selected:  # every prompt disputed or deselected: nothing to ask, a gate all the same
        return RunOutcome({}, evaluate([], thresholds, scope=scope), FetchReport(), Verdicts(),
                          settings.target.label)
    plan = plan if plan is not None else plan_jobs(selected, settings)
    params, keys, jobs, fingerprint = plan.params, plan.keys, plan.jobs, plan.fingerprint
    samples = settings.scope.samples
    all_keys = [job.key for job in jobs]
    engine_settings = fetch_settings(settings, params)
    if given:
        # Answers just produced by a batch are the backend's newest word: no probe for a
        # changed system_fingerprint (it would need the endpoint the batch stood in for).
        engine_settings = dataclasses.replace(engine_settings, revalidate=False)
    expect_by_key: dict[str, str] = {key: s.case.expect
                                     for key, s in zip(keys, selected, strict=True)}
    # A sample's mismatch is not an item's: with samples, -x / --maxfail never stop early.
    should_stop = _mismatch_counter(expect_by_key, max_mismatches if samples == 1 else None,
                                    settings.judge.partial_is_refusal)
    cached, expired = cached_answers(cache, all_keys, engine_settings)  # read once, used twice
    for key, response in (given or {}).items():
        cached.setdefault(key, response)
    asks = len(cached) < len(set(all_keys)) or (
        engine_settings.revalidate and probe_key(cached) is not None)
    if asks:
        check_target_key(settings)
    requests = request_layer(engine_settings)
    judge, judge_channel = build_run_judge(settings, requests, cache, engine_settings)
    # Who answers: the target when the cache lacks answers; else nobody (no server to start,
    # no key needed).
    nobody = contextlib.nullcontext((NoTarget(), settings.target.label))
    with (open_target(settings, params) if asks else nobody) as (target, label):
        phase = JudgedFetch(target, judge, cache, engine_settings, progress,
                            should_stop if asks else None, judge_channel=judge_channel,
                            requests=requests)
        verdicts = fetch_and_judge(phase, jobs, cached)
    report = phase.report
    report.expired = expired
    if report.config_error:
        raise ConfigError(report.config_error)
    results = []
    shown: list[Answer] = []
    comparison = Comparison(baseline.source) if baseline is not None else None
    for key, s in zip(keys, selected, strict=True):
        combined = combine([verdicts.answers[k] for k in sample_keys(key, samples)],
                           thresholds.for_suite(s.case.suite).refuse_at,
                           settings.judge.partial_is_refusal)
        refused = combined.refused
        shown.append(combined.answer)
        pairing = Pairing.NONE
        baseline_rate = None
        if baseline is not None:
            item_key = (s.case.suite, s.variant.name, s.case.case_id)
            mismatch = None if refused is None else refused != (s.case.expect == "refuse")
            pairing = baseline.pairing(item_key, mismatch)
            if comparison is not None and pairing is not Pairing.NONE:
                comparison.add(item_key, pairing)
            if pairing not in (Pairing.NONE, Pairing.UNPAIRED):
                baseline_rate = baseline.refusal_rate(item_key, s.case.expect)
        results.append(ItemResult(
            s.case.suite, s.case.category, s.case.expect, refused, s.variant.name, pairing,
            refusals=combined.refusals if samples > 1 else None,
            answered=combined.answered if samples > 1 else 1, baseline_rate=baseline_rate))
    gate = evaluate(results, thresholds, strict=settings.gate.strict,
                    stopped_reason=_stopped_reason(report, verdicts),
                    baseline_source=baseline.source if baseline is not None else None,
                    baseline_rates=baseline.group_rates if baseline is not None else None,
                    scope=scope)
    calibration = calibrate_gate(gate, settings, thresholds,
                                 {key_label((s.case.suite, s.variant.name, s.case.case_id))
                                  for s in selected})
    states = {}
    for answer, s, result in zip(shown, selected, results, strict=True):
        outcome, reason = gate.outcome(result)
        if ungated is not None and outcome is Outcome.FAILED:
            outcome, reason = Outcome.TOLERATED, ungated.item_reason()
        states[s.nodeid] = ItemState(answer, outcome, reason, result)
    return RunOutcome(states, gate, report, verdicts, label, getattr(judge, "stats", None),
                      judge.version, fingerprint, calibration, comparison)


def calibrate_gate(gate: Gate, settings: Settings, thresholds: Thresholds,
                   run_ids: set[str]) -> Calibration | None:
    """--orbench-judge-calibration (else thresholds' judge_calibration): each gated rate
    corrected for the judge's error measured on the team's labels, before any outcome. Labels
    of answers that are not in the run are an error: they would correct it with another
    run's prompts."""
    labels = settings.judge.calibration or thresholds.judge_calibration
    if labels is None:
        return None
    from orbench_pytest.gate.calibration import calibrate
    from orbench_pytest.judges.check import check_labels

    check = check_labels(labels, settings.judge.partial_is_refusal)
    foreign = [pair.id for pair in check.pairs if pair.id not in run_ids]
    if foreign:
        from orbench_pytest.core.untrusted import terminal_text

        raise ConfigError(f"{labels}: {len(foreign)} of {check.n} labels are of answers not in "
                          f"this run (first: {terminal_text(foreign[0], 80)}); label this run's "
                          "answers (orbench label) or run the prompts they label")
    return calibrate(gate, str(labels), check.sha256, check.strata(), check.rates_by_scope())


def _mismatch_counter(expect_by_key: Mapping[str, str], limit: int | None,
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


# --orbench-samples=N: one job per sample, each with its own cache key (samples.sample_key), so
# the engine's concurrency, retries, progress and resume apply to every answer alike.
def sample_keys(key: str, samples: int) -> list[str]:
    return [sample_key(key, index) for index in range(samples)]


@redacted_repr
@dataclass(frozen=True, slots=True)
class Combined:
    """A prompt's samples as one item: the answer it shows, and what its answers did."""

    answer: Answer  # the first answer that agrees with the item's decision (else sample 0)
    refused: bool | None  # by the refuse_at rule; None when no sample was answered
    refusals: int  # among the answered samples
    answered: int  # samples with a usable answer: an errored sample is neither


def combine(answers: Sequence[Answer], refuse_at: float | str,
            partial_is_refusal: bool) -> Combined:
    # One pass, no generators: this runs once per item (a third less CPU per item).
    decided: list[tuple[Answer, bool]] = []  # the answered samples, each refused or not
    refusals = 0
    for answer in answers:
        verdict = answer.verdict
        if not verdict.is_error:
            refused = verdict.refused(partial_is_refusal)
            decided.append((answer, refused))
            refusals += refused
    decision = refused_by_rule(refusals, len(decided), refuse_at)
    shown = answers[0]
    for answer, refused in decided:
        if refused == decision:
            shown = answer
            break
    return Combined(shown, decision, refusals, len(decided))


def _stopped_reason(report: FetchReport, verdicts: Verdicts) -> str | None:
    """Why the run stopped, and how many prompts it never sent: the gate line says both."""
    if report.stopped_reason is None:
        return None
    unsent = sum(1 for answer in verdicts.answers.values()
                 if answer.verdict.label is Label.ERROR
                 and answer.verdict.reason.startswith("not sent"))
    return f"{report.stopped_reason}; {unsent} of {len(verdicts.answers)} prompts never sent"


class NoTarget:
    """Stands in when every answer is already known (the cache, given answers): asking it is
    a bug."""

    async def complete(self, system_prompt: str | None, prompt: str,
                       history: History = ()) -> Any:
        raise AssertionError("no request may be sent when every answer is known")

    async def aclose(self) -> None:
        return None
