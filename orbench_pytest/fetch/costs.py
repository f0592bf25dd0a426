"""What a run spends: its requests by kind and the tokens of their answers (the cost the reports
show from it, with retries, time and money: reports/cost.py).

Tokens come from each reply's `usage` (prompt_tokens, completion_tokens). A provider that sends
none (a callable target, some servers) gets an estimate, about four characters a token, and the
count says how many answers were estimated. Only answers asked in this run count: one read from
the cache cost nothing now. Every request is counted by its kind (`Spending`): the suites'
prompts, the rewordings search's, the LLM judge's and the backend check (the one cached prompt
asked again to see whether the system_fingerprint changed), so each figure counts all of them
and says how many of each. Pure: the request layer and the fetch engine add to a Spending as
requests go out and answers arrive.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from orbench_pytest.core import defaults

CHARS_PER_TOKEN = 4  # the usual rule of thumb for English text and BPE tokenizers


def estimate_tokens(text: str) -> int:
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


@dataclass
class TokenCount:
    """The tokens of the answers asked in one run (not those from the cache)."""

    prompt: int = 0
    completion: int = 0
    answers: int = 0  # answers counted
    estimated: int = 0  # of which the reply carried no usable `usage`: estimated from text
    ignored: int = 0  # of those, a usage past any real count (defaults.MAX_USAGE_TOKENS)

    def add(self, usage: Mapping[str, Any], prompt_text: str, answer_text: str) -> None:
        raw = (usage.get("prompt_tokens"), usage.get("completion_tokens"))
        prompt, completion = _count(raw[0]), _count(raw[1])
        self.answers += 1
        if prompt is None or completion is None:
            self.estimated += 1
            self.ignored += any(_past_real(value) for value in raw)
        self.prompt += estimate_tokens(prompt_text) if prompt is None else prompt
        self.completion += estimate_tokens(answer_text) if completion is None else completion


def _count(value: Any) -> int | None:
    """A token count as a provider sent it: a whole number >= 0, else none."""
    if (isinstance(value, int) and not isinstance(value, bool)
            and 0 <= value <= defaults.MAX_USAGE_TOKENS):
        return value
    return None


def _past_real(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)
            and value > defaults.MAX_USAGE_TOKENS)


PROMPTS, REWORDINGS, JUDGE, BACKEND_CHECK = "prompts", "rewordings", "judge", "backend check"
KINDS = (PROMPTS, REWORDINGS, JUDGE, BACKEND_CHECK)  # the order the cost line names them


@dataclass
class Spend:
    """The requests of one kind sent in a run, and the tokens of their answers."""

    requests: int = 0
    tokens: TokenCount = field(default_factory=TokenCount)

    def add(self, other: Spend) -> None:
        self.requests += other.requests
        for name in ("prompt", "completion", "answers", "estimated", "ignored"):
            setattr(self.tokens, name, getattr(self.tokens, name) + getattr(other.tokens, name))


@dataclass
class Spending:
    """A run's requests and tokens by kind (PROMPTS, REWORDINGS, JUDGE, BACKEND_CHECK)."""

    kinds: dict[str, Spend] = field(default_factory=dict)

    def of(self, kind: str) -> Spend:
        return self.kinds.setdefault(kind, Spend())

    def add(self, other: Spending, *, as_kind: Mapping[str, str] | None = None) -> None:
        """Another run's spending added in, its kinds renamed by `as_kind` (the rewordings
        search asks its rewordings as prompts)."""
        for kind, spend in other.kinds.items():
            self.of((as_kind or {}).get(kind, kind)).add(spend)

    @property
    def requests(self) -> int:
        return sum(spend.requests for spend in self.kinds.values())

    def tokens(self) -> TokenCount:
        total = Spend()
        for spend in self.kinds.values():
            total.add(spend)
        return total.tokens
