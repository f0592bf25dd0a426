"""Seeds: the toxic prompts the rewriter starts from, read from a file or written from topics."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from orbench_pytest.catalog.datasets import read_rows
from orbench_pytest.core.bounded import OPTION_FILE_LIMIT, read_text
from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.ids import safe_id
from orbench_pytest.core.untrusted import redacted_repr
from orbench_pytest.core.yaml_load import load_yaml

MAX_PROMPT_CHARS = 4000  # a seed or candidate longer than this is not a prompt but a document


@redacted_repr
@dataclass(frozen=True, slots=True)
class Seed:
    seed_id: str  # selectable and file-safe: letters, digits, '_', '.', '-'
    prompt: str
    category: str


def read_seeds(path: Path, prompt_column: str = "prompt",
               category_column: str = "category") -> list[Seed]:
    """A CSV or JSONL of toxic prompts with a category column (and optionally an id column)."""
    if path.suffix.lower() not in (".csv", ".jsonl"):
        raise ConfigError(f"--seeds: {path}: expected a .csv or .jsonl file")
    rows = read_rows(path)
    columns = set(rows[0])
    for option, column in (("--seed-column", prompt_column),
                           ("--category-column", category_column)):
        if column not in columns:
            raise ConfigError(f"--seeds: {path}: no column {column!r} ({option}; columns: "
                              f"{', '.join(sorted(columns))})")
    seeds: list[Seed] = []
    seen: dict[str, int] = {}
    for index, row in enumerate(rows):
        prompt = (row.get(prompt_column) or "").strip()
        category = (row.get(category_column) or "").strip()
        if not prompt:
            raise ConfigError(f"--seeds: {path}: row {index + 1}: empty {prompt_column!r}")
        if len(prompt) > MAX_PROMPT_CHARS:
            raise ConfigError(f"--seeds: {path}: row {index + 1}: the prompt has {len(prompt)} "
                              f"characters (at most {MAX_PROMPT_CHARS})")
        if not category:
            raise ConfigError(f"--seeds: {path}: row {index + 1}: empty {category_column!r}")
        raw_id = (row.get("id") or "").strip()
        seed_id = safe_id(raw_id) if raw_id else f"seed{index + 1:04d}"
        if seed_id in seen:
            raise ConfigError(f"--seeds: {path}: rows {seen[seed_id]} and {index + 1} have the "
                              f"same id {seed_id!r}; ids must be unique")
        seen[seed_id] = index + 1
        seeds.append(Seed(seed_id, prompt, category))
    return seeds


def read_topics(path: Path) -> dict[str, str]:
    """topics.yaml: category → a short description of the domain's sensitive topics."""
    data = load_yaml(read_text(path, OPTION_FILE_LIMIT), f"--seed-topics: {path}")
    if not isinstance(data, dict) or not data:
        raise ConfigError(f"--seed-topics: {path}: expected a mapping of category to a short "
                          "description, e.g. 'fraud: card fraud, account takeover'")
    topics: dict[str, str] = {}
    for category, description in data.items():
        if not isinstance(category, str) or not category.strip():
            raise ConfigError(f"--seed-topics: {path}: {category!r}: a category is a name")
        if not isinstance(description, str) or not description.strip():
            raise ConfigError(f"--seed-topics: {path}: {category}: expected a short description "
                              "(text)")
        topics[category.strip()] = " ".join(description.split())
    return topics


def seeds_from_lists(topics: dict[str, str], lists: list[list[str]]) -> list[Seed]:
    """The rewriter's toxic prompts per topic, in topic order, as seeds."""
    seeds = []
    for category, prompts in zip(topics, lists, strict=True):
        for index, prompt in enumerate(prompts):
            seeds.append(Seed(f"{safe_id(category)}-{index + 1:02d}", prompt, category))
    return seeds
