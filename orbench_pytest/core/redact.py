"""Keep secrets out of everything the plugin writes or prints."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

# Shapes of API keys and bearer tokens seen in the wild (OpenAI sk-…, HF hf_…, Azure hex, JWT).
_KEY_SHAPES = re.compile(
    r"(sk-[A-Za-z0-9_\-*]{8,}|hf_[A-Za-z0-9]{8,}|Bearer\s+[A-Za-z0-9._\-~+/=]{8,}"
    r"|eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]*)"
)
_known_secrets: set[str] = set()
_ordered: list[str] = []


def forget_secrets() -> None:
    """Forget every registered secret: one pytest session's keys do not outlive it (pytester
    and other in-process runs start the next session in the same interpreter)."""
    _known_secrets.clear()
    _ordered.clear()


def register_secret(value: str | None) -> None:
    """Remember a secret so that redact() removes it wherever it appears."""
    if value and len(value) >= 4:
        _known_secrets.add(value)
        # Longest first: a key that contains another is removed whole.
        _ordered[:] = sorted(_known_secrets, key=len, reverse=True)


def redact(text: str) -> str:
    for secret in _ordered:
        text = text.replace(secret, "[REDACTED]")
    return _KEY_SHAPES.sub("[REDACTED]", text)


def redact_known(text: str) -> str:
    """Only the registered secrets: cheap enough for every response body, and it never
    touches model text that merely looks like a key (e.g. "sk-learn-pipeline")."""
    for secret in _ordered:
        if secret in text:
            text = text.replace(secret, "[REDACTED]")
    return text


# Variables that hold keys whatever the options say: redacted even when another one is used.
WELL_KNOWN_KEY_VARS = ("OPENAI_API_KEY", "AZURE_OPENAI_API_KEY", "OPENROUTER_API_KEY",
                       "ANTHROPIC_API_KEY", "HF_TOKEN")


def register_configured_secrets(env: Mapping[str, str], key_vars: Iterable[str],
                                urls: Iterable[str | None] = ()) -> None:
    """Every key this run could use (target's, judge's, the usual variables) and the
    passwords of URLs, before anything is read or printed: an answer, an error or a target's
    exception that quotes one is redacted in every output."""
    for name in (*key_vars, *WELL_KNOWN_KEY_VARS):
        register_secret(env.get(name))
    for url in urls:
        register_secret(url_password(url))


def url_password(url: str | None) -> str | None:
    """The password (or token) of `scheme://user:password@host`, without parsing the URL
    (a malformed one must not hide its secret)."""
    if not url or "@" not in url:
        return None
    authority = re.split(r"[/?#]", url.partition("://")[2], maxsplit=1)[0]
    userinfo = authority.rpartition("@")[0]
    user, sep, password = userinfo.partition(":")
    if sep:
        return password or None
    return user if len(user) >= 16 else None  # a token as the user name; not "admin"


def secret_from_env(name: str) -> str | None:
    value = os.environ.get(name) or None
    register_secret(value)
    return value


def without_userinfo(url: str) -> str:
    """A URL as shown in messages: `user:password@` becomes `***@`, whatever its length."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return redact(url)
    authority, _, _ = rest.partition("/")
    if "@" not in authority:
        return redact(url)
    return redact(f"{scheme}://***@{rest[len(authority.rpartition('@')[0]) + 1:]}")
