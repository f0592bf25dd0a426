"""Keep secrets out of everything the plugin writes or prints."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from urllib.parse import unquote_plus

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


def looks_like_key(text: str) -> bool:
    """Whether `text` holds something shaped like an API key or bearer token."""
    return _KEY_SHAPES.search(text) is not None


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
    secrets of URLs (password, query keys), before anything is read or printed: an answer,
    an error or a target's exception that quotes one is redacted in every output."""
    for name in (*key_vars, *WELL_KNOWN_KEY_VARS):
        register_secret(env.get(name))
    for url in urls:
        register_url_secrets(url)


# Query parameters that carry credentials (`?api_key=`, `?code=` of Azure Functions, `?sig=` of
# a SAS URL, `?access_token=`); others (`?api-version=2024-10-21`) are no secret to redact.
_SECRET_PARAM = re.compile(r"key|token|secret|sig|pass|auth|code|credential", re.IGNORECASE)


def register_url_secrets(url: str | None) -> None:
    """A URL's secrets, redacted wherever they appear (an HTTP library's error may quote the
    whole URL); shown_url keeps them out of our own text."""
    for secret in url_secrets(url):
        register_secret(secret)
        register_secret(unquote_plus(secret))  # as a library may print it, decoded


def url_secrets(url: str | None) -> list[str]:
    """The password of a URL's userinfo and the values of its query's credentials."""
    password = url_password(url)
    query = (url or "").partition("#")[0].partition("?")[2]
    return [*([password] if password else []),
            *(value for name, _, value in (pair.partition("=") for pair in query.split("&"))
              if value and _SECRET_PARAM.search(name))]


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


# A URL's `scheme:` and the slashes after it; its authority runs to the first "/", "?" or "#".
_URL_HEAD = re.compile(r"(?:[A-Za-z][A-Za-z0-9+.\-]*:)?/*")
_AUTHORITY_END = re.compile(r"[/?#]")
_QUERY_OR_FRAGMENT = re.compile(r"[?#]")


def shown_url(url: str) -> str:
    """A URL as it may be printed, written or keyed: without its userinfo (`user:password@`,
    a token as the user) and without its query and fragment (`?api_key=…` is common); a URL
    without them is returned unchanged. Cut by hand rather than parsed: a malformed URL must
    not carry its secret into the error message that rejects it."""
    head = _URL_HEAD.match(url)
    start = head.end() if head else 0
    rest = url[start:]
    end = _AUTHORITY_END.search(rest)
    authority, tail = (rest[:end.start()], rest[end.start():]) if end else (rest, "")
    return url[:start] + authority.rpartition("@")[2] + _QUERY_OR_FRAGMENT.split(tail, 1)[0]
