"""The LLM judge's way to its model, built with the run's request layer and cache."""

from __future__ import annotations

import json
from typing import Any

from orbench_pytest.core.types import Response
from orbench_pytest.fetch.cache import ResponseCache, cache_key
from orbench_pytest.fetch.concurrency import AdaptiveLimiter
from orbench_pytest.fetch.costs import JUDGE
from orbench_pytest.fetch.engine import CacheWriter, FetchSettings, cached_answer
from orbench_pytest.fetch.requests import RequestLayer
from orbench_pytest.fetch.targets import OpenAICompatibleTarget, model_identity


def judge_identity(target: OpenAICompatibleTarget) -> dict[str, Any]:
    """What a judge reply's cache key holds of the judge model: model_identity less its unset
    fields (max_tokens, seed), the keys as they were before the identity was one formula
    (tests/test_cache.py pins them)."""
    identity = model_identity(target.model, target.base_url, target.params)
    return {"judge": {k: v for k, v in identity.items() if v is not None}}


class JudgeChannel:
    """Each judge request cached (the judge's version in the key: a changed judge asks again),
    retried, rate limited and stopped like a target's, through the run's request layer, within
    a concurrency limit of its own (--orbench-judge-concurrency, adapting to the judge's
    endpoint up to it): the target's limit bounds only the target's requests."""

    def __init__(self, target: OpenAICompatibleTarget, requests: RequestLayer[Any],
                 concurrency: int, cache: ResponseCache | None, fetch: FetchSettings) -> None:
        self.target = target
        self.identity = judge_identity(target)
        self._requests = requests
        self._slots = AdaptiveLimiter(requests.limit(concurrency))
        self._cache = cache
        self._fetch = fetch
        self._writer = CacheWriter(cache, requests)

    async def chat(self, messages: list[dict[str, str]], judge_version: str = "") -> Response:
        """One LLM-judge exchange."""
        identity = ({**self.identity, "judge_version": judge_version} if judge_version
                    else self.identity)
        key = cache_key(identity, None, json.dumps(messages, ensure_ascii=False))
        hit = cached_answer(self._cache, key, self._fetch)
        if hit is not None:
            return hit
        target, requests = self.target, self._requests
        body = {"model": target.model, "messages": messages, **target.params.body_fields()}
        response = await requests.attempts(
            lambda: target.chat(body), sum(len(m["content"]) for m in messages) // 4 + 100,
            gated=False, slots=self._slots, kind=JUDGE)
        if response is None:
            return Response(text=None,
                            error=f"judge not asked: {requests.why_stopped('stopped')}")
        if response.error is None:  # the judge's tokens are the run's cost too
            requests.tally.spent.of(JUDGE).tokens.add(
                response.usage, "".join(m["content"] for m in messages), response.text or "")
        self._writer.store(key, response)
        return response

    async def aclose(self) -> None:
        try:
            await self.target.aclose()
        finally:
            self._writer.flush(final=True)
