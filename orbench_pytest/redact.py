"""Keep secrets out of everything the plugin writes or prints."""

from __future__ import annotations

import os
import re

# Shapes of API keys and bearer tokens seen in the wild (OpenAI sk-…, HF hf_…, Azure hex, JWT).
_KEY_SHAPES = re.compile(
    r"(sk-[A-Za-z0-9_\-*]{8,}|hf_[A-Za-z0-9]{8,}|Bearer\s+[A-Za-z0-9._\-~+/=]{8,}"
    r"|eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]*)"
)
_known_secrets: set[str] = set()


def register_secret(value: str | None) -> None:
    """Remember a secret so that redact() removes it wherever it appears."""
    if value and len(value) >= 4:
        _known_secrets.add(value)


def redact(text: str) -> str:
    for secret in _known_secrets:
        text = text.replace(secret, "[REDACTED]")
    return _KEY_SHAPES.sub("[REDACTED]", text)


def redact_known(text: str) -> str:
    """Only the registered secrets: cheap enough for every response body, and it never
    touches model text that merely looks like a key (e.g. "sk-learn-pipeline")."""
    for secret in _known_secrets:
        if secret in text:
            text = text.replace(secret, "[REDACTED]")
    return text


def secret_from_env(name: str) -> str | None:
    value = os.environ.get(name) or None
    register_secret(value)
    return value
