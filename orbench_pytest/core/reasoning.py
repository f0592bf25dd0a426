"""An answer's visible text: the model's reasoning block removed (what the fetch counts as an
answer and what every judge reads)."""

from __future__ import annotations

import re

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
