"""Which model a run tests: the one named, never a silent default.

Suites that run with neither a model nor a target stop with a usage error listing the choices.
With a base URL and no model, the endpoint's `/models` (fetch/endpoints.served_models) decides:
exactly one served model is used (and said so); none or several is a usage error naming them.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping

from orbench_pytest.config.settings import Settings
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.redact import secret_from_env, shown_url
from orbench_pytest.core.untrusted import terminal_text
from orbench_pytest.fetch.endpoints import served_models

CHOICES = ("--orbench-model=NAME (a model your endpoint serves, e.g. gpt-4o-mini)",
           "--orbench-model=local (the embedded model, no network)",
           "--orbench-target=MODULE:FUNCTION (your application)")
_SHOWN_MODELS = 10
_ID_CHARS = 80

ServedModels = Callable[[str, Settings], list[str]]


def choose_model(settings: Settings, env: Mapping[str, str] | None = None,
                 served: ServedModels | None = None) -> tuple[Settings, str | None]:
    """The settings with a model to test, and a line to print when the endpoint chose it."""
    if settings.target.function is not None or settings.target.model is not None:
        return settings, None
    env = os.environ if env is None else env
    url = settings.target.base_url or env.get("OPENAI_BASE_URL")
    if not url:
        raise ConfigError(f"no model to test: give {'; or '.join(CHOICES)} "
                          "(or orbench_model in the ini file)")
    models = (served or _served)(url, settings)
    shown = shown_url(url)
    if len(models) == 1:
        model = terminal_text(models[0], _ID_CHARS)  # the endpoint's text: inert, bounded
        return (dataclasses.replace(
                    settings, target=dataclasses.replace(settings.target, model=models[0])),
                f"orbench: testing {model}, the one model {shown} serves")
    if not models:
        raise ConfigError(f"--orbench-base-url: {shown} serves no model (GET /models); "
                          "name one with --orbench-model=NAME")
    listed = ", ".join(terminal_text(model, _ID_CHARS) for model in models[:_SHOWN_MODELS])
    more = f", … ({len(models)} in all)" if len(models) > _SHOWN_MODELS else ""
    raise ConfigError(f"--orbench-base-url: {shown} serves several models ({listed}{more}); "
                      "pick one with --orbench-model=NAME")


def _served(url: str, settings: Settings) -> list[str]:
    return served_models(url, secret_from_env(settings.target.api_key_env) or None,
                         min(settings.requests.timeout_s, 30.0))
