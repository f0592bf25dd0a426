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

from orbench_pytest.errors import ConfigError
from orbench_pytest.redact import redact, secret_from_env
from orbench_pytest.settings import DEFAULT_OPENAI_URL, is_loopback, validate_base_url
from orbench_pytest.targets import GenerationParams, OpenAICompatibleTarget

# Generation keeps 4 parallel slots: its output is reviewed, not gated twice, so throughput
# wins over the plugin's one-slot determinism (local_model.py).
LOCAL_SLOTS = 4


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
        return self.name == "local" or self.name.startswith("local:")

    def identity(self) -> dict[str, Any]:
        """What the cache key knows of the model; computable without starting anything."""
        body = {"temperature": self.params.temperature, "max_tokens": self.params.max_tokens,
                "seed": self.params.seed}
        if self.is_local:
            return {"kind": "local", "model": self.name, **body}
        return {"kind": "openai", "base_url": self.base_url, "model": self.name, **body}

    def describe(self) -> dict[str, Any]:
        """For the provenance: model and endpoint, never a key."""
        return {"model": self.name,
                "endpoint": "embedded" if self.is_local else redact(self.base_url or ""),
                "temperature": self.params.temperature, "max_tokens": self.params.max_tokens,
                "seed": self.params.seed}


def model_ref(role: str, option: str, name: str, base_url: str | None, api_key_env: str,
              params: GenerationParams) -> ModelRef:
    if not name.strip():
        raise ConfigError(f"{option}: empty; give a model name, or local")
    if name == "local" or name.startswith("local:"):
        from orbench_pytest.local_model import resolve_model

        try:
            resolve_model(name)
        except ConfigError as exc:
            raise ConfigError(str(exc).replace("--orbench-model", option)) from None
        return ModelRef(role, name, None, api_key_env, params)
    url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_OPENAI_URL
    return ModelRef(role, name, validate_base_url(url, f"{option} base URL"), api_key_env,
                    params)


def check_keys(refs: list[ModelRef]) -> None:
    """Before any request: every remote, non-loopback endpoint has its key in the environment."""
    for ref in refs:
        if ref.is_local or ref.base_url is None or is_loopback(ref.base_url):
            continue
        if not os.environ.get(ref.api_key_env):
            raise ConfigError(f"{ref.api_key_env} is not set: export the API key for "
                              f"{redact(ref.base_url)} (the {ref.role} {ref.name}), or name "
                              "another variable with --api-key-env")


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
            from orbench_pytest.local_model import start_local_server

            server = start_local_server(ref.name, threads=self.local_threads,
                                        n_parallel=LOCAL_SLOTS, n_ctx=4096,
                                        cache_dir=self.cache_dir, reuse_prompts=True)
            self._servers[ref.name] = server
        return OpenAICompatibleTarget(server.base_url, server.model, None, ref.params,
                                      concurrency)

    def concurrency(self, ref: ModelRef, wanted: int) -> int:
        # A request queued in the embedded server would spend its timeout waiting.
        return min(wanted, LOCAL_SLOTS) if ref.is_local else wanted

    def close(self) -> None:
        servers, self._servers = self._servers, {}
        for server in servers.values():
            server.stop()
