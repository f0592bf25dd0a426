"""Endpoints a run may ask: the OpenAI URL, a base URL checked once, the models it serves
(GET /models), a `module:function` target."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.redact import register_url_secrets, shown_url


def validate_base_url(url: str, option: str = "--orbench-base-url") -> str:
    register_url_secrets(url)  # https://user:KEY@host/v1?api_key=KEY: never printed
    shown = shown_url(url)[:100]
    try:
        parsed = urlparse(url)
        port = parsed.port  # raises on :99999 or :abc
    except ValueError as exc:
        raise ConfigError(f"{option}: {shown!r} is not a valid URL ({exc})") from None
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ConfigError(f"{option}: {shown!r} is not an http(s) URL "
                          "(e.g. http://127.0.0.1:8000/v1)")
    if port == 0:
        raise ConfigError(f"{option}: {shown!r}: port 0 is not a port (1-65535)")
    base, sep, query = url.partition("?")  # `/v1/?k=v` is `/v1?k=v`: the same cache
    return base.rstrip("/") + sep + query


def endpoint_url(base_url: str, path: str) -> str:
    """`path` under a base URL, the base's query after it (`http://h/v1?api-version=1` and
    `chat/completions`: `http://h/v1/chat/completions?api-version=1`); no fragment (never sent)."""
    base, sep, query = base_url.partition("#")[0].partition("?")
    return f"{base.rstrip('/')}/{path}{sep}{query}"


def is_loopback(url: str) -> bool:
    host = urlparse(url).hostname or ""
    return host in ("localhost", "::1") or host.startswith("127.")


def parse_target_spec(spec: str) -> tuple[str, str]:
    """`module:function` → (module, function), or a one-line error."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(f"--orbench-target: {spec!r} is not of the form module:function")
    return module_name, attr


def served_models(url: str, key: str | None, timeout_s: float) -> list[str]:
    """The ids GET {url}/models lists (config/model_choice.py picks from them). Nothing of the
    body but the ids reaches a message."""
    import httpx

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    address = endpoint_url(url, "models")
    shown = shown_url(address)
    try:
        response = httpx.get(address, headers=headers, timeout=timeout_s)
    except httpx.HTTPError as exc:
        raise ConfigError(f"--orbench-base-url: cannot list the models of {shown_url(url)} "
                          f"({type(exc).__name__}); name one with --orbench-model=NAME") from None
    if response.status_code != 200:
        raise ConfigError(f"--orbench-base-url: GET {shown} answered HTTP "
                          f"{response.status_code}; name the model with --orbench-model=NAME")
    try:
        data: Any = response.json()
        ids = [entry["id"] for entry in data["data"]]
    except (ValueError, KeyError, TypeError):
        raise ConfigError(f"--orbench-base-url: GET {shown} did not answer an OpenAI model "
                          "list; name the model with --orbench-model=NAME") from None
    return [model for model in ids if isinstance(model, str) and model.strip()]
