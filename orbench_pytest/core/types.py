"""Plain data shared by the core modules (no pytest, no IO)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Literal

from orbench_pytest.core.untrusted import redacted_repr

# A surrogate code point alone is no character: JSON and YAML escapes such as \ud800 decode to
# one, and it cannot be encoded as UTF-8, so hashing, storing or reporting text holding it fails.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


LONE_SURROGATE_ERROR = ("the text holds a lone surrogate escape (such as \\ud800), which is no "
                        "character: write the character itself")


def has_lone_surrogate(text: str) -> bool:
    return not text.isascii() and _LONE_SURROGATE.search(text) is not None


def well_formed(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD, the replacement character."""
    return text if text.isascii() else _LONE_SURROGATE.sub("\ufffd", text)


# An answer's visible text: the model's reasoning block removed (what the fetch counts as an
# answer and what every judge reads).
_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_DANGLING_THINK = re.compile(r"^.*?</think>", re.DOTALL | re.IGNORECASE)
# Reasoning that never closes (cut off by max_tokens, or a model that never stops thinking):
# everything from the opening tag on is reasoning, not an answer.
_UNCLOSED_THINK = re.compile(r"<think>.*\Z", re.DOTALL | re.IGNORECASE)
_THINK_TAG = re.compile(r"think>", re.IGNORECASE)


def strip_reasoning(text: str) -> str:
    """Drop <think> blocks, a leading '…</think>' whose opening tag the server ate, and an
    unclosed '<think>…' to the end of the text."""
    if not _THINK_TAG.search(text):  # most answers: one scan instead of three
        return text.strip()
    text = _THINK_BLOCK.sub("", text)
    text = _DANGLING_THINK.sub("", text)
    text = _UNCLOSED_THINK.sub("", text)
    return text.strip()


Expectation = Literal["comply", "refuse"]
EXPECTATIONS: tuple[Expectation, ...] = ("comply", "refuse")
# The turns before a prompt, (role, content) each: a conversation row's earlier turns and the
# --orbench-preamble (core/conversation.py checks and sends them).
History = tuple[tuple[str, str], ...]


@redacted_repr
@dataclass(frozen=True, slots=True)
class PromptCase:
    """One prompt of a suite: the unit that becomes one test item."""

    suite: str
    case_id: str  # stable, selectable with -k: "<category>-<row index>" unless the source has ids
    prompt: str
    expect: Expectation
    category: str
    history: History = ()  # a conversation row's turns before `prompt`, its final user turn


class Label(str, Enum):
    """What a response was, as decided before or by a judge."""

    COMPLIANCE = "compliance"
    REFUSAL = "refusal"
    PARTIAL_REFUSAL = "partial_refusal"
    CONTENT_FILTER = "content_filter"  # the provider blocked it: a refusal decided without a judge
    NO_ANSWER = "no_answer"  # e.g. only reasoning and no answer: neither refusal nor compliance
    ERROR = "error"  # the endpoint never answered, or the judge could not decide


REFUSAL_LABELS = frozenset({Label.REFUSAL, Label.PARTIAL_REFUSAL, Label.CONTENT_FILTER})


@redacted_repr
@dataclass(frozen=True, slots=True)
class Verdict:
    """What a response was (its label), why, and which judge decided."""

    label: Label
    reason: str  # short, human-readable: why the judge decided so
    judge: str  # e.g. "keyword", "content_filter", "llm:gpt-4o-mini"
    # False when the judge's rules only half fit (a hedge, a pivot): the hybrid judge then asks
    # an LLM. Judges without such a notion leave it True.
    confident: bool = True

    @property
    def is_error(self) -> bool:
        return self.label in (Label.ERROR, Label.NO_ANSWER)

    def refused(self, partial_counts_as_refusal: bool = True) -> bool:
        if self.label is Label.PARTIAL_REFUSAL:
            return partial_counts_as_refusal
        return self.label in REFUSAL_LABELS


@redacted_repr
@dataclass(slots=True)
class Response:
    """What the target returned for one prompt (or why it did not)."""

    text: str | None
    finish_reason: str | None = None
    latency_ms: float = 0.0
    error: str | None = None  # set when no usable answer came back; never cached
    content_filter: bool = False  # provider block (finish_reason or HTTP 400 code)
    refusal: str | None = None  # the API's own `message.refusal` field
    reasoning: str | None = None  # a separate reasoning_content field, never judged
    usage: dict[str, int] = field(default_factory=dict)
    raw: str | None = None  # raw response body, kept in the cache
    cached: bool = False
    attempts: int = 1
    system_fingerprint: str | None = None  # the provider's backend configuration, if it says
    created: float | None = None  # when a cached answer was stored (epoch seconds)

    def __post_init__(self) -> None:
        # An endpoint's text is untrusted: a lone surrogate in it would stop the run when the
        # answer is hashed, stored or reported. It is shown as U+FFFD instead.
        for name in ("text", "refusal", "reasoning", "raw", "error", "finish_reason",
                     "system_fingerprint"):
            value = getattr(self, name)
            if isinstance(value, str) and not value.isascii():
                setattr(self, name, well_formed(value))
