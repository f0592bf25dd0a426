"""The one way the generation pipeline asks a model: through the project's fetch engine.

`ask_all` is the only function here that knows FetchEngine's constructor and report, so that a
change of the engine is absorbed in one place. It gives back the full text of every answer
(the engine's report keeps only an excerpt; the cache keeps the whole answer), the tokens this
call spent, and how many answers came from the cache: an interrupted generation resumes where
it stopped and asks nothing twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from orbench_pytest.core import defaults
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.types import Response
from orbench_pytest.core.untrusted import redacted_repr
from orbench_pytest.fetch.cache import ResponseCache, cache_keys
from orbench_pytest.fetch.engine import (
    FetchEngine,
    FetchSettings,
    Job,
    Progress,
    Unjudged,
    request_layer,
    run_in_new_loop,
)
from orbench_pytest.generate.models import Endpoints, ModelRef


@redacted_repr
@dataclass(frozen=True, slots=True)
class Request:
    prompt: str
    system: str | None = None


@dataclass(frozen=True)
class AskSettings:
    concurrency: int = defaults.GENERATE_CONCURRENCY
    max_retries: int = defaults.MAX_RETRIES
    backoff_s: float = defaults.BACKOFF_S
    rpm: int | None = None
    tpm: int | None = None


@dataclass
class AskedAll:
    """What `ask_all` got: the answers in request order and what they cost."""

    responses: list[Response]  # one per request, in order; an unanswered one has .error set
    requests_sent: int = 0
    from_cache: int = 0
    tokens: dict[str, int] = field(default_factory=dict)  # spent by this call (not the cache)


def ask_all(ref: ModelRef, requests: Sequence[Request], *, cache: ResponseCache,
            endpoints: Endpoints, settings: AskSettings,
            progress: Progress | None = None) -> AskedAll:
    """Every request's answer from `ref`, in order; what the cache holds is not asked again."""
    key_of = cache_keys(ref.identity())  # the model's identity serialised once, not per request
    keys = [key_of(r.system, r.prompt) for r in requests]
    before = cache.get_many(keys)
    missing = {key: r for key, r in zip(keys, requests, strict=True) if key not in before}
    asked = AskedAll(responses=[], from_cache=len(set(keys) & set(before)))
    errors: dict[str, str] = {}
    if missing:
        concurrency = endpoints.concurrency(ref, settings.concurrency)
        target = endpoints.target(ref, concurrency)
        fetch = FetchSettings.of(concurrency=concurrency, rpm=settings.rpm, tpm=settings.tpm,
                                 max_tokens=ref.params.max_tokens,
                                 max_retries=settings.max_retries, backoff_s=settings.backoff_s,
                                 # the plugin's stall bound: no answer for 2 timeouts stops
                                 timeout_s=ref.params.timeout_s)
        # Nothing is judged here: the pipeline reads the answers' text from the cache, and the
        # probes are judged by the caller.
        engine = FetchEngine.build(target, cache, fetch, request_layer(fetch))
        report = engine.report
        unjudged = Unjudged(progress, lambda: engine.concurrency.limit)
        jobs = [Job(key, r.prompt, r.system) for key, r in missing.items()]
        run_in_new_loop(lambda: engine.run(jobs, unjudged, {}))
        if report.config_error:
            raise ConfigError(f"the {ref.role} {ref.name}: {report.config_error}")
        asked.requests_sent = report.requests
        errors = unjudged.errors  # incl. "not sent: …" for what a stop left unasked
    elif progress is not None and keys:
        progress(len(set(keys)), len(set(keys)), 0, 0)
    after = cache.get_many(k for k in missing if k not in errors)
    for key in missing:
        usage = after[key].usage if key in after else {}
        for name in ("prompt_tokens", "completion_tokens"):
            asked.tokens[name] = asked.tokens.get(name, 0) + usage.get(name, 0)
    found = {**before, **after}
    for key in keys:
        if key in found:
            asked.responses.append(found[key])
        else:
            # Errors are never cached: this one is retried by the next run.
            asked.responses.append(Response(text=None, error=errors.get(key, "no answer")))
    return asked
