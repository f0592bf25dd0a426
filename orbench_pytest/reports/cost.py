"""What a run cost, as every report shows it: tokens, requests by kind, retries, wall time and,
with prices given (--orbench-price-input / --orbench-price-output), dollars. Built once per run
(run/session_run.run_cost) from what the fetch and the rewordings search spent (fetch/costs.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from orbench_pytest.core import defaults
from orbench_pytest.core.typed_json import OMIT, Count
from orbench_pytest.fetch.costs import KINDS, PROMPTS, Spending, TokenCount


@dataclass(frozen=True)
class KindCost:
    """One kind's share of a run's cost (the results file's "cost.kinds")."""

    requests: Count
    prompt_tokens: Count
    completion_tokens: Count


def _ordered(kinds: Iterable[str]) -> list[str]:
    return sorted(kinds, key=lambda kind: (KINDS.index(kind) if kind in KINDS else len(KINDS),
                                           kind))


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
    """One run's cost as the reports show it (the results file's "cost" object): every request
    of the run, and in `kinds` each kind's share when it sent any but the suites' prompts."""

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
    kinds: dict[str, KindCost] = field(default_factory=dict, metadata=OMIT)
    cached: Count = field(default=0, metadata=OMIT)  # answers read from the cache

    @classmethod
    def of(cls, spending: Spending, retries: int, wall_s: float, prices: Prices = Prices(),
           cached: int = 0) -> RunCost:
        tokens = spending.tokens()
        usd = prices.cost(tokens)
        sent = {kind: spending.kinds[kind] for kind in _ordered(spending.kinds)
                if spending.kinds[kind].requests}
        kinds = {kind: KindCost(spend.requests, spend.tokens.prompt, spend.tokens.completion)
                 for kind, spend in sent.items()} if set(sent) - {PROMPTS} else {}
        return cls(prompt_tokens=tokens.prompt, completion_tokens=tokens.completion,
                   answers_counted=tokens.answers, estimated_answers=tokens.estimated,
                   requests=spending.requests, retries=retries, wall_s=round(wall_s, 3),
                   price_input_per_m=prices.input_per_m, price_output_per_m=prices.output_per_m,
                   usd=None if usd is None else round(usd, 6),
                   ignored_usage=tokens.ignored or None, kinds=kinds, cached=cached)

    def tokens_text(self) -> str:
        if self.answers_counted == 0:
            if self.requests:
                return "0 tokens (no answer came back)"
            return ("0 tokens (every answer from the cache)" if self.cached
                    else "0 tokens (nothing asked)")
        text = f"{self.prompt_tokens:,} prompt + {self.completion_tokens:,} completion tokens"
        if self.kinds:
            text += ": " + ", ".join(f"{part.prompt_tokens:,} + {part.completion_tokens:,} {kind}"
                                     for kind, part in self.kinds.items())
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

    def requests_text(self) -> str:
        text = f"{self.requests:,} requests"
        if self.kinds:
            text += ": " + ", ".join(f"{part.requests:,} {kind}"
                                     for kind, part in self.kinds.items())
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
        if self.requests and not self.answers_counted:  # nothing came back: say so first
            retried = f" ({self.retries:,} of them retries)" if self.retries else ""
            text = (f"cost: no answer came back: {self.requests_text()} failed{retried}, "
                    f"0 tokens, {self.wall_s:.1f}s")
        elif self.kinds:  # not only the suites' prompts: each kind counted on the line
            text = (f"cost: {self.requests_text()}; {self.tokens_text()}; "
                    f"{self.retries:,} retries, {self.wall_s:.1f}s")
        else:
            text = (f"cost: {self.tokens_text()}, {self.requests_text()}, {self.retries} retries, "
                    f"{self.wall_s:.1f}s")
        usd = self.usd_text()
        return text + (f"; {usd}" if usd else "")


def _price(value: float | None) -> str:
    return f"{value or 0:g}"
