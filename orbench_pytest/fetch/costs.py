"""What a run cost: tokens, requests, retries, wall time and, with prices given, money.

Tokens come from each reply's `usage` (prompt_tokens, completion_tokens). A provider that sends
none (a callable target, some servers) gets an estimate, about four characters a token, and the
count says how many answers were estimated. Only answers asked in this run count: one read from
the cache cost nothing now. Pure: the fetch engine adds to a TokenCount as answers arrive, the
reports format it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from orbench_pytest.core import defaults
from orbench_pytest.core.typed_json import OMIT, Count

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


@dataclass(frozen=True)
class Prices:
    """Dollars per million tokens (--orbench-price-input / --orbench-price-output)."""

    input_per_m: float | None = None
    output_per_m: float | None = None

    @property
    def given(self) -> bool:
        return self.input_per_m is not None or self.output_per_m is not None

    def cost(self, tokens: TokenCount) -> float | None:
        if not self.given:
            return None
        return (tokens.prompt * (self.input_per_m or 0.0)
                + tokens.completion * (self.output_per_m or 0.0)) / 1_000_000


@dataclass(frozen=True)
class RunCost:
    """One run's cost as the reports show it (the results file's "cost" object)."""

    prompt_tokens: Count
    completion_tokens: Count
    answers_counted: Count
    estimated_answers: Count
    requests: Count
    retries: Count
    wall_s: float
    price_input_per_m: float | None = None
    price_output_per_m: float | None = None
    usd: float | None = None
    # Answers whose usage was past any real count (estimated from the text instead)
    ignored_usage: Count | None = field(default=None, metadata=OMIT)

    @classmethod
    def of(cls, tokens: TokenCount, requests: int, retries: int, wall_s: float,
           prices: Prices = Prices()) -> RunCost:
        usd = prices.cost(tokens)
        return cls(prompt_tokens=tokens.prompt, completion_tokens=tokens.completion,
                   answers_counted=tokens.answers, estimated_answers=tokens.estimated,
                   requests=requests, retries=retries, wall_s=round(wall_s, 3),
                   price_input_per_m=prices.input_per_m, price_output_per_m=prices.output_per_m,
                   usd=None if usd is None else round(usd, 6),
                   ignored_usage=tokens.ignored or None)

    def tokens_text(self) -> str:
        if self.answers_counted == 0:
            return "0 tokens (every answer from the cache)"
        text = f"{self.prompt_tokens:,} prompt + {self.completion_tokens:,} completion tokens"
        if self.ignored_usage:  # a provider's figure past any real count: said, not used
            return text + (f" (estimated for {self.estimated_answers} of "
                           f"{self.answers_counted} answers: {self.ignored_usage} usage past "
                           f"{defaults.MAX_USAGE_TOKENS:,} tokens ignored)")
        if self.estimated_answers == self.answers_counted:
            return text + " (estimated: the endpoint sent no usage)"
        if self.estimated_answers:
            return text + (f" (estimated for {self.estimated_answers} of "
                           f"{self.answers_counted} answers: no usage sent)")
        return text

    def usd_text(self) -> str | None:
        if self.usd is None:
            return None
        prices = (f"${_price(self.price_input_per_m)} in / ${_price(self.price_output_per_m)} "
                  "out per million tokens")
        estimated = ", estimated" if self.estimated_answers else ""
        return f"${self.usd:.4f}{estimated} (at {prices})"

    def line(self) -> str:
        """One line for the terminal and the PR comment."""
        text = (f"cost: {self.tokens_text()}, {self.requests} requests, {self.retries} retries, "
                f"{self.wall_s:.1f}s")
        usd = self.usd_text()
        return text + (f"; {usd}" if usd else "")


def _price(value: float | None) -> str:
    return f"{value or 0:g}"
