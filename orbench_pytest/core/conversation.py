"""Conversations: a suite row's `messages:` and the --orbench-preamble, checked and sent.

A conversation is the turns before the prompt (its history) and the prompt, the final user
turn, which the judge reads the answer against. The chat request holds the variant's system
prompt first unless the history has a system turn of its own (the row's wins), then the
history, then the prompt.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orbench_pytest.core import defaults
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.types import LONE_SURROGATE_ERROR, History, has_lone_surrogate

ROLES = ("system", "user", "assistant")


def parse_turns(value: Any, where: str, *, final_user: bool) -> History:
    """`value` (a list of {role, content}, or its JSON text: a CSV cell, a JSONL or Parquet
    value) as turns; a one-line ConfigError starting with `where` otherwise."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            raise ConfigError(f"{where}: messages: not a JSON list of {{role, content}}") \
                from None
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{where}: messages: expected a non-empty list of {{role, content}}")
    if len(value) > defaults.CONVERSATION_TURNS:
        raise ConfigError(f"{where}: messages: {len(value):,} turns, more than the "
                          f"{defaults.CONVERSATION_TURNS} a conversation may hold")
    turns = []
    for number, turn in enumerate(value):
        at = f"{where}: messages[{number}]"
        if not isinstance(turn, dict) or set(turn) != {"role", "content"}:
            raise ConfigError(f"{at}: expected {{role, content}} and nothing else")
        role, content = turn["role"], turn["content"]
        if role not in ROLES:
            raise ConfigError(f"{at}: role {_shown(role)} is not allowed "
                              f"(allowed: {', '.join(ROLES)})")
        if not isinstance(content, str) or not content.strip():
            raise ConfigError(f"{at}: empty content" if isinstance(content, (str, type(None)))
                              else f"{at}: content: expected text")
        if has_lone_surrogate(content):
            raise ConfigError(f"{at}: {LONE_SURROGATE_ERROR}")
        turns.append((role, content))
    chars = sum(len(content) for _, content in turns)
    if chars > defaults.CONVERSATION_CHARS:
        raise ConfigError(f"{where}: messages: {chars:,} characters, more than the "
                          f"{defaults.CONVERSATION_CHARS:,} a conversation may hold")
    if final_user and turns[-1][0] != "user":
        raise ConfigError(f"{where}: messages: the last turn is {turns[-1][0]}'s; a "
                          "conversation ends with the user turn the answer is judged against")
    return tuple(turns)


def _shown(value: Any) -> str:
    from orbench_pytest.core.untrusted import terminal_text

    return terminal_text(repr(value), 60)


def split_final(turns: History) -> tuple[History, str]:
    """(the history, the final user turn's text)."""
    return turns[:-1], turns[-1][1]


def sent_system(system_prompt: str | None, history: History) -> str | None:
    """The variant's system prompt, unless the history brings its own (which then wins)."""
    return None if any(role == "system" for role, _ in history) else system_prompt


def chat_messages(system_prompt: str | None, prompt: str,
                  history: History = ()) -> list[dict[str, str]]:
    """The chat-completions `messages` of one prompt after its history."""
    system = sent_system(system_prompt, history)
    messages = [{"role": "system", "content": system}] if system else []
    messages.extend({"role": role, "content": content} for role, content in history)
    messages.append({"role": "user", "content": prompt})
    return messages


SHOWN_TURNS = 6  # earlier turns a terminal line shows (the last ones); the rest are counted


def shown_turns(history: Sequence[tuple[str, str]], prompt: str, limit: int) -> str:
    """One line: the last SHOWN_TURNS earlier turns as `role: text`, cut to share `limit`
    between them, then the final prompt up to `limit` (a terminal's view of a conversation)."""
    from orbench_pytest.core.untrusted import terminal_text

    if not history:
        return terminal_text(prompt, limit)
    shown = history[-SHOWN_TURNS:]
    each = max(40, limit // (len(shown) + 1))
    earlier = [f"{role}: {terminal_text(content, each)}" for role, content in shown]
    if len(history) > len(shown):
        earlier.insert(0, f"({len(history) - len(shown)} earlier turns)")
    return " › ".join([*earlier, f"user: {terminal_text(prompt, limit)}"])


@dataclass(frozen=True)
class Preamble:
    """--orbench-preamble: turns sent before every prompt of a run, and what names them."""

    path: str  # as given (shown in the gate line and the results)
    sha256: str  # of the file's bytes
    turns: History


def load_preamble(path: Path, option: str = "--orbench-preamble") -> Preamble:
    """The preamble file: a YAML list of {role, content}; a one-line ConfigError otherwise."""
    from orbench_pytest.core.bounded import OPTION_FILE_LIMIT, read_bytes
    from orbench_pytest.core.yaml_load import load_yaml

    data = read_bytes(path, OPTION_FILE_LIMIT, option)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ConfigError(f"{option}: {path}: not UTF-8; save it as UTF-8") from None
    turns = parse_turns(load_yaml(text, f"{option}: {path}"), f"{option}: {path}",
                        final_user=False)
    return Preamble(str(path), hashlib.sha256(data).hexdigest(), turns)
