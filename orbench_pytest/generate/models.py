"""The models a generation asks, named as the plugin names them, and where they are served.

`local` / `local:<name>` is the embedded model, started on first need and shared by every
role that names it; any other name is a model on an OpenAI-compatible endpoint, whose key is
read from the environment variable the user names (never from the command line).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orbench_pytest.core import defaults
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.ids import is_local_model
from orbench_pytest.core.redact import redact, secret_from_env, shown_url
from orbench_pytest.fetch.endpoints import validate_base_url
from orbench_pytest.fetch.targets import (
    GenerationParams,
    OpenAICompatibleTarget,
    check_key,
    local_concurrency,
    model_identity,
    served_url,
)


@dataclass(frozen=True)
class ModelRef:
    """One model in one role, e.g. moderator `gpt-4o-mini` at https://api.openai.com/v1."""

    role: str  # rewriter, moderator, probe: for messages
    name: str
    base_url: str | None  # None for the embedded model
    api_key_env: str
    params: GenerationParams

    @property
    def is_local(self) -> bool:
        return is_local_model(self.name)

    def identity(self) -> dict[str, Any]:
        """What the cache key knows of the model, as the plugin keys it."""
        return model_identity(self.name, None if self.is_local else self.base_url, self.params)

    def describe(self) -> dict[str, Any]:
        """For the provenance: model and endpoint, never a key."""
        endpoint = "embedded" if self.is_local else redact(shown_url(self.base_url or ""))
        return {"model": self.name, "endpoint": endpoint,
                "temperature": self.params.temperature, "max_tokens": self.params.max_tokens,
                "seed": self.params.seed}


def model_ref(role: str, option: str, name: str, base_url: str | None, api_key_env: str,
              params: GenerationParams) -> ModelRef:
    if not name.strip():
        raise ConfigError(f"{option}: empty; give a model name, or local")
    if is_local_model(name):
        from orbench_pytest.fetch.local_model import resolve_model

        try:
            resolve_model(name)
        except ConfigError as exc:
            raise ConfigError(str(exc).replace("--orbench-model", option)) from None
        return ModelRef(role, name, None, api_key_env, params)
    return ModelRef(role, name, validate_base_url(served_url(base_url), f"{option} base URL"),
                    api_key_env, params)


def check_keys(refs: list[ModelRef]) -> None:
    """Before any request: every remote, non-loopback endpoint has its key in the environment."""
    for ref in refs:
        if not ref.is_local and ref.base_url is not None:
            check_key(ref.base_url, ref.api_key_env, hint="--api-key-env",
                      asker=f"the {ref.role} {ref.name}")


class Endpoints:
    """Opens targets; the embedded servers live until close()."""

    def __init__(self, cache_dir: Path, local_threads: int) -> None:
        self.cache_dir = cache_dir
        self.local_threads = local_threads
        self._servers: dict[str, Any] = {}

    def target(self, ref: ModelRef, concurrency: int) -> OpenAICompatibleTarget:
        if not ref.is_local:
            assert ref.base_url is not None
            key = secret_from_env(ref.api_key_env) if os.environ.get(ref.api_key_env) else None
            return OpenAICompatibleTarget(ref.base_url, ref.name, key, ref.params, concurrency)
        server = self._servers.get(ref.name)
        if server is None:
            from orbench_pytest.fetch.local_model import start_local_server

            server = start_local_server(ref.name, threads=self.local_threads,
                                        n_parallel=defaults.GENERATE_LOCAL_SLOTS,
                                        n_ctx=defaults.LOCAL_CONTEXT,
                                        cache_dir=self.cache_dir, reuse_prompts=True)
            self._servers[ref.name] = server
        return OpenAICompatibleTarget(server.base_url, server.model, None, ref.params,
                                      concurrency)

    def concurrency(self, ref: ModelRef, wanted: int) -> int:
        # A request queued in the embedded server would spend its timeout waiting.
        return (local_concurrency(wanted, defaults.GENERATE_LOCAL_SLOTS) if ref.is_local
                else wanted)

    def close(self) -> None:
        servers, self._servers = self._servers, {}
        for server in servers.values():
            server.stop()
