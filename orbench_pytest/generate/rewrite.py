"""Rewrite: each toxic seed becomes prompts on its surface that ask for something safe."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from orbench_pytest.core.types import Response
from orbench_pytest.core.untrusted import FORMULA_STARTS, redacted_repr
from orbench_pytest.generate.prompts import PromptTemplate
from orbench_pytest.generate.seeds import MAX_PROMPT_CHARS, Seed
from orbench_pytest.judges.judge import neutralise_delimiters, strip_reasoning


@redacted_repr
@dataclass(frozen=True, slots=True)
class RewrittenPrompt:
    """One prompt a seed was rewritten into: a candidate until moderation and probes keep it."""

    candidate_id: str  # "<seed id>-r<n>"
    prompt: str
    category: str
    seed_id: str


# "1. text", "2) text", "- text", "* text", "Prompt 3: text"
_ITEM = re.compile(r"^\s*(?:\d{1,3}\s*[.):]|[-*•]|(?:prompt|request)\s*\d{1,3}\s*[.):])\s*(.*)$",
                   re.IGNORECASE)
_WRAPPING_QUOTES = re.compile(r'^["“”\'`*]+|["“”\'`*]+$')


def parse_prompt_list(response: Response, limit: int) -> list[str]:
    """The prompts of a reply that lists them (a JSON array or numbered/bulleted lines).

    Lines that are not list items (a preamble, a closing remark) are left out; so are repeats,
    empty items and overlong ones. At most `limit`.
    """
    text = strip_reasoning(response.text or "")
    items = _json_list(text)
    if items is None:
        items = [m.group(1) for line in text.splitlines() if (m := _ITEM.match(line))]
    found: list[str] = []
    for item in items:
        prompt = _WRAPPING_QUOTES.sub("", " ".join(item.split())).strip()
        # No prompt starts as a spreadsheet formula (=, +, -, @): the suite CSVs are opened
        # in spreadsheets by reviewers, and their prompts must be sent as written there.
        prompt = prompt.lstrip(FORMULA_STARTS + " ")
        if prompt and len(prompt) <= MAX_PROMPT_CHARS and prompt not in found:
            found.append(prompt)
    return found[:limit]


def _json_list(text: str) -> list[str] | None:
    start, end = text.find("["), text.rfind("]")
    if start < 0 or end <= start:
        return None
    try:
        value = json.loads(text[start:end + 1])
    except (ValueError, RecursionError):  # not JSON, or nested deeper than Python recurses
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return value


def rewrite_prompt(template: PromptTemplate, seed: Seed, count: int) -> str:
    return template.render(seed=neutralise_delimiters(seed.prompt), count=count,
                           category=seed.category)


def candidates_of(seed: Seed, prompts: list[str]) -> list[RewrittenPrompt]:
    return [RewrittenPrompt(f"{seed.seed_id}-r{index + 1}", prompt, seed.category, seed.seed_id)
            for index, prompt in enumerate(prompts)]
